// The modelled loader reading through a storage model: its workers' reads
// queue at the device in time order, the page cache keeps what was read, and
// the loader cache admits by its policy. Exact times under the virtual clock.
#include <gtest/gtest.h>

#include "gpemu/clock.h"
#include "gpemu/pipeline.h"
#include "support/train_test_util.h"

namespace gpemu::train {
namespace {

using testing::loader_options;
using testing::memory_dataset;
using testing::per_sample_cost;

constexpr Time ms = kMillisecond;

// 1 ms + 1 ms per 100 KB, one request at a time: a 100,000-byte sample takes 2 ms.
pipeline::StorageDevice disk() {
  pipeline::StorageDevice d;
  d.name = "disk";
  d.latency = ms;
  d.bytes_per_s = 1e8;
  return d;
}

LoaderModelOptions through_disk(Duration decode) {
  LoaderModelOptions m = per_sample_cost(decode);
  m.storage = disk();
  return m;
}

std::vector<Time> ready_times(ModelledLoader& l, Clock& clock, Duration consumer_busy = 0) {
  std::vector<Time> out;
  while (auto b = l.next({})) {
    out.push_back(b->ready);
    clock.sleep_for(consumer_busy);
  }
  return out;
}

TEST(LoaderStorage, WorkersQueueAtTheDeviceInTheOrderTheyAsk) {
  auto clock = make_virtual_clock();
  // Two workers, a batch of two each; reads 2 ms on one head, decodes 1 ms.
  // Worker 0 reads 0-2, decodes 2-3; worker 1 waits, reads 2-4, decodes 4-5;
  // worker 0 asks at 3, reads 4-6, decodes 6-7; worker 1 asks at 5, reads
  // 6-8, decodes 8-9.
  ModelledLoader l(*clock, memory_dataset(4), loader_options(2, 2), through_disk(ms));
  l.begin_epoch(0);
  EXPECT_EQ(ready_times(l, *clock), (std::vector<Time>{7 * ms, 9 * ms}));
  const pipeline::LoaderStats s = l.stats();
  EXPECT_EQ(s.storage_requests, 4u);
  EXPECT_EQ(s.storage_bytes, 400000u);
  EXPECT_EQ(s.page_cache_misses, 4u);
  EXPECT_EQ(s.batches, 2u);
  EXPECT_EQ(s.samples, 4u);
}

TEST(LoaderStorage, WithoutWorkersTheConsumerReadsWhenItAsks) {
  auto clock = make_virtual_clock();
  ModelledLoader l(*clock, memory_dataset(4), loader_options(2, 0), through_disk(0));
  l.begin_epoch(0);
  // 2 reads of 2 ms after each call; the consumer works 10 ms in between.
  EXPECT_EQ(ready_times(l, *clock, 10 * ms), (std::vector<Time>{4 * ms, 18 * ms}));
}

TEST(LoaderStorage, ThePageCacheKeepsWhatWasReadUnlessDroppedEachEpoch) {
  for (const bool cold : {false, true}) {
    auto clock = make_virtual_clock();
    LoaderModelOptions m = through_disk(0);
    m.page_cache_cold = cold;
    ModelledLoader l(*clock, memory_dataset(4), loader_options(2, 1), m);
    l.begin_epoch(0);
    EXPECT_EQ(ready_times(l, *clock), (std::vector<Time>{4 * ms, 8 * ms}));
    const Time second = clock->now();
    l.begin_epoch(1);
    const std::vector<Time> warm = ready_times(l, *clock);
    const pipeline::LoaderStats s = l.stats();
    if (cold) {
      EXPECT_EQ(s.storage_requests, 8u);
      EXPECT_EQ(warm, (std::vector<Time>{second + 4 * ms, second + 8 * ms}));
    } else {
      EXPECT_EQ(s.storage_requests, 4u);
      EXPECT_EQ(s.page_cache_hits, 4u);
      EXPECT_EQ(s.page_cache_resident_bytes, 400000u);
      EXPECT_EQ(warm, (std::vector<Time>{second, second}));  // memory reads cost nothing in this model
    }
  }
  // A page cache of two samples, LRU under a random order, keeps no more.
  auto clock = make_virtual_clock();
  LoaderModelOptions m = through_disk(0);
  m.page_cache_bytes = 200000;
  ModelledLoader l(*clock, memory_dataset(8), loader_options(2, 1), m);
  for (std::uint64_t e = 0; e < 3; ++e) {
    l.begin_epoch(e);
    ready_times(l, *clock);
  }
  EXPECT_EQ(l.stats().page_cache_resident_bytes, 200000u);
  EXPECT_LT(l.stats().page_cache_hits, 8u);
}

pipeline::Dataset small_and_large() {
  pipeline::Dataset d = memory_dataset(8);
  for (std::size_t i = 0; i < 8; ++i) d.samples[i].length = i % 2 ? 150000 : 50000;
  return d;
}

TEST(LoaderStorage, LoaderCachePoliciesAdmitByTheirRules) {
  std::uint64_t hits[2] = {};
  for (const pipeline::CachePolicy policy : {pipeline::CachePolicy::Minio, pipeline::CachePolicy::Sff}) {
    auto clock = make_virtual_clock();
    LoaderModelOptions m = through_disk(0);
    m.page_cache_bytes = 0;
    m.cache_bytes = 200000;
    m.cache_policy = policy;
    ModelledLoader l(*clock, small_and_large(), loader_options(2, 1), m);
    l.begin_epoch(0);
    ready_times(l, *clock);
    EXPECT_EQ(l.stats().cache_hits, 0u);
    l.begin_epoch(1);
    ready_times(l, *clock);
    const pipeline::LoaderStats s = l.stats();
    EXPECT_LE(s.cache_resident_bytes, 200000u);
    EXPECT_EQ(s.cache_hits + s.storage_requests, 16u);  // no page cache: every miss goes to the device
    hits[policy == pipeline::CachePolicy::Sff] = s.cache_hits;
  }
  // SFF keeps the four 50 KB files (4 x 50 KB = the capacity); MinIO keeps
  // whatever came first until full, at most a 150 KB and a 50 KB file here.
  EXPECT_EQ(hits[1], 4u);
  EXPECT_LT(hits[0], hits[1]);
}

TEST(LoaderStorage, AGroupIsReadWithOneRequest) {
  // Eight 100 KB samples, four to a file: a batch of four is one file, one
  // request of 1 ms + 4 ms, where single files take four of 2 ms.
  for (const std::size_t k : {1u, 4u}) {
    auto clock = make_virtual_clock();
    pipeline::LoaderOptions o = loader_options(4, 1);
    o.group_size = k;
    ModelledLoader l(*clock, pipeline::grouped(memory_dataset(8), k), o, through_disk(0));
    l.begin_epoch(0);
    const std::vector<Time> ready = ready_times(l, *clock);
    const pipeline::LoaderStats s = l.stats();
    if (k == 1) {
      EXPECT_EQ(ready, (std::vector<Time>{8 * ms, 16 * ms}));
      EXPECT_EQ(s.storage_requests, 8u);
    } else {
      EXPECT_EQ(ready, (std::vector<Time>{5 * ms, 10 * ms}));
      EXPECT_EQ(s.storage_requests, 2u);
      EXPECT_EQ(s.storage_bytes, 800000u);
    }
  }
  // Groups of three in batches of four: a batch ends inside a group, whose
  // rest the next batch reads with a request of its own.
  auto clock = make_virtual_clock();
  pipeline::LoaderOptions o = loader_options(4, 1);
  o.shuffle = false;
  o.group_size = 3;
  ModelledLoader l(*clock, pipeline::grouped(memory_dataset(6), 3), o, through_disk(0));
  l.begin_epoch(0);
  // Batch 0: group 0 (1 + 3 ms), then sample 3 of group 1 (1 + 1 ms) -> 6 ms;
  // batch 1: samples 4-5 of group 1 (1 + 2 ms) -> 9 ms.
  EXPECT_EQ(ready_times(l, *clock), (std::vector<Time>{6 * ms, 9 * ms}));
  EXPECT_EQ(l.stats().storage_requests, 3u);
}

TEST(LoaderStorage, IoUringAndSuperbatchesSubmitBatchesOfReadsAtOnce) {
  // A device that serves eight 2 ms requests at once; one worker, batches of
  // four, 1 ms of decode per sample.
  auto wide = [] {
    LoaderModelOptions m = through_disk(ms);
    m.storage->parallelism = 8;
    return m;
  };
  auto run = [&](pipeline::ReadMethod method, std::size_t superbatch) {
    auto clock = make_virtual_clock();
    pipeline::LoaderOptions o = loader_options(4, 1);
    o.read_method = method;
    o.superbatch = superbatch;
    ModelledLoader l(*clock, memory_dataset(8), o, wide());
    l.begin_epoch(0);
    return ready_times(l, *clock);
  };
  // pread: read 2 ms, decode 1 ms, four times a batch.
  EXPECT_EQ(run(pipeline::ReadMethod::Pread, 1), (std::vector<Time>{12 * ms, 24 * ms}));
  // io_uring: a batch's four reads together (2 ms), then four decodes.
  EXPECT_EQ(run(pipeline::ReadMethod::IoUring, 1), (std::vector<Time>{6 * ms, 12 * ms}));
  // A superbatch of two: both batches' reads at 0, done at 2 ms.
  EXPECT_EQ(run(pipeline::ReadMethod::IoUring, 2), (std::vector<Time>{6 * ms, 10 * ms}));
  // One head: the reads queue whatever is submitted, so io_uring only overlaps decodes with reads.
  auto clock = make_virtual_clock();
  pipeline::LoaderOptions o = loader_options(4, 1);
  o.superbatch = 2;
  ModelledLoader l(*clock, memory_dataset(8), o, through_disk(ms));
  l.begin_epoch(0);
  // Reads end at 2, 4, ..., 16 ms; batch 0 decodes the first four by 9 ms,
  // batch 1 the rest as they arrive: the last at 16 + 1 ms.
  EXPECT_EQ(ready_times(l, *clock), (std::vector<Time>{9 * ms, 17 * ms}));
  EXPECT_EQ(l.stats().storage_requests, 8u);
}

TEST(LoaderStorage, DescribesItsStorageAndCaches) {
  auto clock = make_virtual_clock();
  LoaderModelOptions m = through_disk(0);
  m.cache_bytes = 1 << 20;
  m.cache_policy = pipeline::CachePolicy::Sff;
  ModelledLoader l(*clock, memory_dataset(4), loader_options(2, 1), m);
  const std::string d = l.describe();
  EXPECT_NE(d.find("storage disk, page cache unlimited"), std::string::npos) << d;
  EXPECT_NE(d.find("loader cache 1.0 MiB (sff)"), std::string::npos) << d;
}

}  // namespace
}  // namespace gpemu::train
