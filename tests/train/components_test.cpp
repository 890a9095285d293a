// The pieces under the driver: the modelled loader's schedule, host threads
// waiting for each other, the backward split, the dataset cache, and the real
// loader feeding the driver under the real clock.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <set>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/train.h"
#include "support/train_test_util.h"

namespace gpemu::train {
namespace {

using testing::loader_options;
using testing::memory_dataset;
using testing::per_sample_cost;

// ---- modelled loader ----

std::vector<Time> ready_times(int workers, int prefetch, Duration consumer_busy, int cores = 64, std::size_t n = 6) {
  auto clock = make_virtual_clock();
  LoaderModelOptions m = per_sample_cost(10 * kMillisecond);
  m.cores = cores;
  ModelledLoader l(*clock, memory_dataset(n), loader_options(1, workers, prefetch), m);
  l.begin_epoch(0);
  std::vector<Time> out;
  while (auto b = l.next({})) {
    out.push_back(b->ready);
    clock->sleep_for(consumer_busy);
  }
  return out;
}

TEST(LoaderModel, WorkersRoundRobinAndPrefetchLimit) {
  const Time ms = kMillisecond;
  // Fast consumer: two workers deliver in pairs.
  EXPECT_EQ(ready_times(2, 2, 0), (std::vector<Time>{10 * ms, 10 * ms, 20 * ms, 20 * ms, 30 * ms, 30 * ms}));
  // Slow consumer (25 ms per batch), one worker: with prefetch 1 the worker
  // waits for each delivery; with prefetch 2 it keeps one batch ahead.
  EXPECT_EQ(ready_times(1, 1, 25 * ms), (std::vector<Time>{10 * ms, 20 * ms, 45 * ms, 70 * ms, 95 * ms, 120 * ms}));
  EXPECT_EQ(ready_times(1, 2, 25 * ms), (std::vector<Time>{10 * ms, 20 * ms, 30 * ms, 45 * ms, 70 * ms, 95 * ms}));
  // No workers: loaded in next(), after the consumer's work.
  EXPECT_EQ(ready_times(0, 2, 25 * ms), (std::vector<Time>{10 * ms, 45 * ms, 80 * ms, 115 * ms, 150 * ms, 185 * ms}));
  // Four workers on two cores run at half speed.
  EXPECT_EQ(ready_times(4, 2, 0, 2, 4), (std::vector<Time>{20 * ms, 20 * ms, 20 * ms, 20 * ms}));
}

TEST(LoaderModel, SampleCostAndBatchBytes) {
  LoaderModelOptions m;
  m.read_per_sample = 50 * kMicrosecond;
  m.read_bytes_per_s = 1e9;
  m.decode_per_sample = 800 * kMicrosecond;
  m.decode_ns_per_byte = 10;
  pipeline::Sample s;
  s.length = 100000;
  s.format = pipeline::SampleFormat::Jpeg;
  SampleCost c = model_sample_cost(s, true, m);
  EXPECT_EQ(c.read, 50 * kMicrosecond + 100 * kMicrosecond);
  EXPECT_EQ(c.decode, 800 * kMicrosecond + 1000 * kMicrosecond);
  EXPECT_EQ(model_sample_cost(s, false, m).decode, 0);
  s.format = pipeline::SampleFormat::Bytes;
  EXPECT_EQ(model_sample_cost(s, true, m).decode, 0);

  auto clock = make_virtual_clock();
  ModelledLoader l(*clock, memory_dataset(10), loader_options(4, 1), per_sample_cost(kMillisecond));
  EXPECT_EQ(l.batches_per_epoch(), 3u);
  EXPECT_EQ(l.samples_per_epoch(), 10u);
  l.begin_epoch(0);
  auto b = l.next({});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->bytes, 4 * kImageNetInputBytes);
  EXPECT_EQ(b->memory, HostMemoryKind::Pinned);
  EXPECT_EQ(b->decode, 4 * kMillisecond);
}

// Loaders of jobs sharing a machine: each adds its workers to the pool while
// it exists, and a batch costed while the pool is crowded costs more.
TEST(LoaderModel, LoadersSharingACpuPoolSlowEachOtherWhileTheyExist) {
  auto clock = make_virtual_clock();
  auto pool = std::make_shared<pipeline::CpuPool>(4);
  LoaderModelOptions m = per_sample_cost(10 * kMillisecond);
  m.cpu_pool = pool;
  ModelledLoader a(*clock, memory_dataset(8), loader_options(1, 4, 1), m);
  EXPECT_EQ(pool->threads, 4);
  EXPECT_EQ(a.share(), 1.0);
  a.begin_epoch(0);
  EXPECT_EQ(a.next({})->ready, 10 * kMillisecond);  // alone: 4 workers on 4 cores
  {
    ModelledLoader b(*clock, memory_dataset(8), loader_options(1, 4, 1), m);
    EXPECT_EQ(pool->threads, 8);
    EXPECT_EQ(a.share(), 2.0);
    // Batch 4 (worker 0's second) is costed now, with 8 threads on 4 cores.
    for (int i = 0; i < 3; ++i) (void)a.next({});
    EXPECT_EQ(a.next({})->ready, 10 * kMillisecond + 20 * kMillisecond);
  }
  EXPECT_EQ(pool->threads, 4);  // b is gone
  EXPECT_EQ(a.share(), 1.0);
}

TEST(LoaderModel, RefusesImpossibleOptions) {
  auto clock = make_virtual_clock();
  auto o = loader_options(4, 1);
  o.prefetch_factor = 0;
  EXPECT_THROW((ModelledLoader(*clock, memory_dataset(4), o)), InputError);
  EXPECT_THROW((ModelledLoader(*clock, pipeline::Dataset{}, loader_options(4, 1))), InputError);
}

// ---- host threads waiting for each other ----

TEST(HostSync, AWaiterWakesWhenThePeerActsUnderTheVirtualClock) {
  auto clock = make_virtual_clock();
  HostSync sync(*clock, 2);
  bool flag = false;
  Time woke = -1;
  clock->run_concurrently({[&] {
                             sync.wait_until(0, [&] { return flag; });
                             woke = clock->now();
                             sync.finish(0);
                           },
                           [&] {
                             sync.sleep_until(1, 3 * kMillisecond);
                             sync.sleep_until(1, 5 * kMillisecond);
                             {
                               std::lock_guard lock(sync.mutex());
                               flag = true;
                             }
                             sync.notify_all();
                             sync.finish(1);
                           }});
  EXPECT_GE(woke, 5 * kMillisecond);
  EXPECT_LE(woke, 5 * kMillisecond + 1);
}

TEST(HostSync, EveryoneWaitingIsADeadlockNotAHang) {
  auto clock = make_virtual_clock();
  HostSync sync(*clock, 2);
  auto body = [&](int rank) {
    return [&, rank] {
      try {
        sync.wait_until(rank, [] { return false; });
      } catch (...) {
        sync.abort();
        sync.finish(rank);
        throw;
      }
    };
  };
  EXPECT_THROW(clock->run_concurrently({body(0), body(1)}), std::logic_error);
}

TEST(HostSync, RealClockWaitsOnACondition) {
  auto clock = make_real_clock();
  HostSync sync(*clock, 2);
  int value = 0;
  clock->run_concurrently({[&] { sync.wait_until(0, [&] { return value == 1; }); },
                           [&] {
                             {
                               std::lock_guard lock(sync.mutex());
                               value = 1;
                             }
                             sync.notify_all();
                           }});
  EXPECT_EQ(value, 1);
}

// ---- backward split ----

TEST(BackwardPlan, FromTheZooGraph) {
  const GpuSpec& v100 = find_gpu("v100");
  EstimateCostModel costs;
  const StepCost c = costs.step_cost(v100, "resnet18", 64);
  const BackwardPlan p = plan_backward(v100, "resnet18", c, 64);
  EXPECT_NE(p.source.find("zoo graph"), std::string::npos) << p.source;
  EXPECT_EQ(std::accumulate(p.gradient_bytes.begin(), p.gradient_bytes.end(), std::uint64_t{0}), 4ull * 11689512);
  EXPECT_EQ(p.gradient_bytes.size(), 62u);  // resnet18's parameter tensors
  double share = p.optimizer_share;
  std::set<int> grads;
  for (const auto& ch : p.chunks) {
    share += ch.share;
    EXPECT_GE(ch.share, 0);
    grads.insert(ch.gradients.begin(), ch.gradients.end());
  }
  EXPECT_NEAR(share, 1.0, 1e-9);
  EXPECT_EQ(grads.size(), 62u);
  EXPECT_LE(p.chunks.size(), 64u);
  EXPECT_GT(p.optimizer_share, 0);
  EXPECT_LT(p.optimizer_share, 0.5);
  // Backward produces the classifier's gradients first: the first gradient
  // is resnet18's fc layer (fc.bias 4000 B or fc.weight 2048000 B).
  EXPECT_TRUE(p.gradient_bytes.front() == 4000 || p.gradient_bytes.front() == 2048000) << p.gradient_bytes.front();
  const BackwardPlan few = plan_backward(v100, "resnet18", c, 64, 16, 8);
  EXPECT_EQ(few.chunks.size(), 8u);

  const std::vector<Duration> parts = split_backward(p, 123456789);
  EXPECT_EQ(parts.size(), p.chunks.size() + 1);
  EXPECT_EQ(std::accumulate(parts.begin(), parts.end(), Duration{0}), 123456789);
}

TEST(BackwardPlan, ChunksStayApartOnlyWhereABucketCompletes) {
  BackwardPlan p;
  p.gradient_bytes = {10, 10, 10, 10, 10};
  for (const std::vector<int>& g : std::vector<std::vector<int>>{{0}, {1}, {}, {2, 3}, {4}})
    p.chunks.push_back(BackwardChunk{0.2, g});
  // Buckets {0, 1}, {2} and {3, 4} complete in chunks 1, 3 and 4.
  const std::vector<GradientBucket> buckets{{{0, 1}, 20}, {{2}, 10}, {{3, 4}, 20}};
  EXPECT_EQ(bucket_chunk_ends(p, buckets), (std::vector<std::size_t>{2, 4, 5}));
  // Without buckets only the end of backward stays: one kernel.
  EXPECT_EQ(bucket_chunk_ends(p, {}), (std::vector<std::size_t>{5}));
  // Two buckets completing in one chunk share its end.
  const std::vector<GradientBucket> two{{{0, 1, 2}, 30}, {{3}, 10}, {{4}, 10}};
  EXPECT_EQ(bucket_chunk_ends(p, two), (std::vector<std::size_t>{4, 5}));

  // resnet18 with DDP's default buckets: one run of chunks per bucket, far
  // fewer than its chunks.
  const GpuSpec& v100 = find_gpu("v100");
  EstimateCostModel costs;
  const BackwardPlan r18 = plan_backward(v100, "resnet18", costs.step_cost(v100, "resnet18", 64), 64);
  const auto r18_buckets = assign_buckets(r18.gradient_bytes, 1ull << 20, 25ull << 20);
  const auto ends = bucket_chunk_ends(r18, r18_buckets);
  EXPECT_EQ(ends.back(), r18.chunks.size());
  EXPECT_LE(ends.size(), r18_buckets.size());
  EXPECT_LT(ends.size(), r18.chunks.size());
  EXPECT_TRUE(std::is_sorted(ends.begin(), ends.end()));
}

TEST(BackwardPlan, EvenChunksWithoutAGraph) {
  const GpuSpec& v100 = find_gpu("v100");
  StepCost c;
  c.backward = 100 * kMillisecond;
  c.persistent_bytes = 12'000'000;  // 1M parameters
  const BackwardPlan p = plan_backward(v100, "no_such_model", c, 32, 4);
  ASSERT_EQ(p.chunks.size(), 4u);
  EXPECT_EQ(std::accumulate(p.gradient_bytes.begin(), p.gradient_bytes.end(), std::uint64_t{0}), 4'000'000u);
  // 20 B/parameter over 900 GB/s plus 1 ms, of 100 ms.
  EXPECT_NEAR(p.optimizer_share, (20e6 / 900e9 + 1e-3) / 0.1, 1e-12);
  const std::vector<Duration> parts = split_backward(p, 100 * kMillisecond);
  EXPECT_NEAR(parts[0], parts[1], 1);
  EXPECT_EQ(std::accumulate(parts.begin(), parts.end(), Duration{0}), 100 * kMillisecond);
}

// ---- datasets ----

TEST(Datasets, CacheFolderFromTheEnvironment) {
  const char* saved[3] = {std::getenv("GPEMU_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"), std::getenv("HOME")};
  const std::string keep[3] = {saved[0] ? saved[0] : "", saved[1] ? saved[1] : "", saved[2] ? saved[2] : ""};
  ::setenv("GPEMU_CACHE_DIR", "/tmp/a", 1);
  ::setenv("XDG_CACHE_HOME", "/tmp/b", 1);
  ::setenv("HOME", "/tmp/c", 1);
  EXPECT_EQ(cache_dir(), std::filesystem::path("/tmp/a"));
  ::unsetenv("GPEMU_CACHE_DIR");
  EXPECT_EQ(cache_dir(), std::filesystem::path("/tmp/b/gpemu"));
  ::setenv("XDG_CACHE_HOME", "", 1);
  EXPECT_EQ(cache_dir(), std::filesystem::path("/tmp/c/.cache/gpemu"));
  const char* names[3] = {"GPEMU_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; ++i) {
    if (saved[i])
      ::setenv(names[i], keep[i].c_str(), 1);
    else
      ::unsetenv(names[i]);
  }
}

TEST(Datasets, GeneratedOnceThenReused) {
  testing::TempDir root;
  SyntheticDatasetSpec spec;
  spec.images = 6;
  spec.classes = 2;
  spec.median_kb = 20;
  std::vector<std::string> notes;
  EnsuredDataset a = ensure_synthetic_dataset(root.path(), spec, [&](const std::string& s) { notes.push_back(s); });
  EXPECT_TRUE(a.generated);
  EXPECT_EQ(notes.size(), 1u);
  EXPECT_EQ(a.dir, root.path() / "imagenet-like-6img-2cls-20kb-seed0");
  EXPECT_EQ(pipeline::open_image_folder(a.dir).size(), 6u);
  EnsuredDataset b = ensure_synthetic_dataset(root.path(), spec, [&](const std::string& s) { notes.push_back(s); });
  EXPECT_FALSE(b.generated);
  EXPECT_EQ(notes.size(), 1u);
  EXPECT_EQ(b.dir, a.dir);
  EXPECT_EQ(default_dataset_spec().images, 2000u);
}

// ---- the real loader under the real clock ----

TEST(RealLoader, FeedsTwoGpusEverySampleOnce) {
  testing::TempDir root;
  pipeline::generate_image_dataset(root.path(), 2, 16, 3, 20);
  auto clock = make_real_clock();
  testing::FixedCosts costs;
  costs.forward = costs.backward = 1 * kMillisecond;
  Trainer t(*clock, find_gpu("v100"), costs, testing::exact_options(2, 4));
  t.timeline().enable_trace(true);
  std::vector<std::unique_ptr<BatchSource>> src;
  for (int g = 0; g < 2; ++g) {
    auto o = loader_options(4, 1, 2, g, 2);
    o.pin_mode = PinMode::AccountOnly;
    PipelineSourceOptions so;
    so.rank = g;
    so.trace = &t.timeline();
    src.push_back(std::make_unique<PipelineSource>(*clock, pipeline::open_image_folder(root.path()), o, so));
  }
  TrainResult r = t.run(std::move(src));
  EXPECT_EQ(r.iterations, 2);
  EXPECT_EQ(r.samples, 16);
  std::set<std::size_t> seen;
  for (const BatchRecord& b : r.batches) {
    EXPECT_EQ(b.bytes, 4 * kImageNetInputBytes);
    EXPECT_LE(b.next_called, b.delivered);
    EXPECT_LE(b.data_stall, b.delivered - b.next_called);
    seen.insert(b.sample_indices.begin(), b.sample_indices.end());
  }
  EXPECT_EQ(seen.size(), 16u);
  EXPECT_EQ(r.all_reduces, static_cast<std::uint64_t>(2 * r.buckets));
  int reads = 0;
  for (const HostSpan& s : t.timeline().host_spans()) reads += s.name == "read";
  EXPECT_EQ(reads, 4);
}

TEST(RealLoader, RefusesTheVirtualClock) {
  auto clock = make_virtual_clock();
  EXPECT_THROW((PipelineSource(*clock, memory_dataset(4), loader_options(2, 1))), InputError);
}

}  // namespace
}  // namespace gpemu::train
