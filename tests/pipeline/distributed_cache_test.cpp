// Caches spanning several nodes (CoorDL's partitioned cache, LADCache's
// regular and locality-aware modes), the modelled loaders that use them, and
// a storage server's IOPS limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>

#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"

namespace gpemu::pipeline {
namespace {

constexpr Time ms = kMillisecond;

StorageDevice device(Duration latency, double bytes_per_s, int parallelism) {
  StorageDevice d;
  d.name = "test";
  d.latency = latency;
  d.bytes_per_s = bytes_per_s;
  d.parallelism = parallelism;
  return d;
}

// `n` byte records of 1,000 bytes each (the loader delivers bytes: no decode).
Dataset records(std::size_t n) {
  Dataset d;
  d.root = "test";
  for (std::size_t i = 0; i < n; ++i) d.samples.push_back({"virtual:test/" + std::to_string(i), 0, 1000});
  return d;
}

TEST(DistributedCache, ALookupSeesOnlyAdmissionsOfEarlierEpochs) {
  DistributedCache dc(4, 2, DistributedCacheKind::Partitioned, device(0, 1e9, 1));
  EXPECT_EQ(dc.holder(1, 0), -1);
  dc.admit(1, 1, 0);
  dc.admit(1, 0, 0);               // the first admission stays
  EXPECT_EQ(dc.holder(1, 0), -1);  // the epoch that admitted it cannot find it (no node reads it twice)
  EXPECT_EQ(dc.holder(1, 1), 1);
  dc.admit(2, 0, 3);
  EXPECT_EQ(dc.holder(2, 3), -1);
  EXPECT_EQ(dc.holder(2, 4), 0);
  EXPECT_EQ(dc.holder(99, 9), -1);  // outside the dataset
  EXPECT_THROW(DistributedCache(4, 0, DistributedCacheKind::Partitioned, device(0, 1e9, 1)), InputError);
  EXPECT_THROW(DistributedCache(4, 2, DistributedCacheKind::Partitioned, device(0, 0, 1)), InputError);
}

TEST(DistributedCache, NamesAndTheirAliases) {
  EXPECT_EQ(parse_distributed_cache("coordl"), DistributedCacheKind::Partitioned);
  EXPECT_EQ(parse_distributed_cache("ladcache"), DistributedCacheKind::Partitioned);
  EXPECT_EQ(parse_distributed_cache("ladcache-locality"), DistributedCacheKind::LocalityAware);
  for (auto k : {DistributedCacheKind::None, DistributedCacheKind::Partitioned, DistributedCacheKind::LocalityAware})
    EXPECT_EQ(parse_distributed_cache(to_string(k)), k);
  try {
    parse_distributed_cache("lru");
    FAIL() << "accepted 'lru'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'lru'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("locality-aware"), std::string::npos) << e.what();
  }
}

TEST(DistributedCache, LocalityAwareOrderKeepsTheFirstShardAndShufflesIt) {
  Sampler s(100, SamplerOptions{true, 7, 1, 4, false, 1});
  const std::vector<std::size_t> first = locality_aware_order(s, 0);
  EXPECT_EQ(first, s.indices(0));
  std::set<std::size_t> shard(first.begin(), first.end());
  bool reordered = false;
  for (std::uint64_t e = 1; e < 4; ++e) {
    const std::vector<std::size_t> o = locality_aware_order(s, e);
    EXPECT_EQ(std::set<std::size_t>(o.begin(), o.end()), shard) << e;
    reordered |= o != first;
    const std::vector<std::size_t> plain = s.indices(e);
    EXPECT_NE(std::set<std::size_t>(plain.begin(), plain.end()), shard) << e;  // the plain sampler moves
  }
  EXPECT_TRUE(reordered);
}

// Two nodes of one rank each, every sample's bytes fit the nodes' caches
// together: epoch 1 reads all from storage (each node caching its shard),
// epoch 2 finds the other node's samples there (partitioned) or reads only
// its own (locality-aware).
struct TwoNodes {
  LoaderStats node[2];
};
TwoNodes two_epochs(DistributedCacheKind kind) {
  auto clock = make_virtual_clock();
  const Dataset d = records(64);
  auto dc = std::make_shared<DistributedCache>(d.size(), 2, kind, device(100 * kMicrosecond, 1e9, 4));
  std::unique_ptr<ModelledLoader> loaders[2];
  for (int r = 0; r < 2; ++r) {
    LoaderOptions o;
    o.batch_size = 4;
    o.num_workers = 2;
    o.shuffle = true;
    o.seed = 3;
    o.rank = r;
    o.world_size = 2;
    o.decode_images = false;
    LoaderModelOptions m;
    m.cores = 4;
    m.storage = device(ms, 1e8, 1);
    m.page_cache_bytes = 0;
    m.cache_bytes = 64'000;  // each node's: the whole dataset fits either one
    m.node = r;
    m.distributed_cache = dc;
    loaders[r] = std::make_unique<ModelledLoader>(*clock, d, o, m);
  }
  for (std::uint64_t e = 0; e < 2; ++e)
    for (auto& l : loaders) {
      l->begin_epoch(e);
      while (l->next({})) {
      }
    }
  return {loaders[0]->stats(), loaders[1]->stats()};
}

TEST(DistributedCache, PartitionedReadsTheOtherNodesShardOverTheNetwork) {
  const TwoNodes t = two_epochs(DistributedCacheKind::Partitioned);
  std::uint64_t remote = 0;
  for (const LoaderStats& s : t.node) {
    ASSERT_EQ(s.epochs.size(), 2u);
    EXPECT_EQ(s.epochs[0].storage_requests, 32u);  // its shard, from storage
    EXPECT_EQ(s.epochs[0].remote_hits, 0u);
    EXPECT_EQ(s.epochs[1].storage_requests, 0u);  // everything cached somewhere
    EXPECT_EQ(s.epochs[1].cache_hits + s.epochs[1].remote_hits, 32u);
    EXPECT_EQ(s.epochs[1].network_bytes, s.epochs[1].remote_hits * 1000);
    EXPECT_EQ(s.remote_hits, s.epochs[1].remote_hits);
    EXPECT_EQ(s.epochs[1].epoch, 1u);
    remote += s.epochs[1].remote_hits;
  }
  // A new random partition: about half of each node's samples are the other's.
  EXPECT_GT(remote, 16u);
  EXPECT_LT(remote, 48u);
}

TEST(DistributedCache, LocalityAwareReadsOnlyItsOwnCache) {
  const TwoNodes t = two_epochs(DistributedCacheKind::LocalityAware);
  for (const LoaderStats& s : t.node) {
    ASSERT_EQ(s.epochs.size(), 2u);
    EXPECT_EQ(s.epochs[1].cache_hits, 32u);
    EXPECT_EQ(s.epochs[1].remote_hits, 0u);
    EXPECT_EQ(s.epochs[1].storage_requests, 0u);
    EXPECT_EQ(s.network_bytes, 0u);
  }
}

TEST(StorageServer, IopsSpaceRequestStarts) {
  StorageDevice d = device(ms, 1e9, 8);
  d.iops = 500;  // one start every 2 ms
  StorageServer s(d);
  EXPECT_EQ(s.serve(0, 0), 1 * ms);
  EXPECT_EQ(s.serve(0, 0), 3 * ms);  // a free slot, but the second start is 2 ms later
  EXPECT_EQ(s.serve(0, 0), 5 * ms);
  EXPECT_EQ(s.serve(10 * ms, 0), 11 * ms);  // idle: no wait
  EXPECT_DOUBLE_EQ(shared_by(d, 4).iops, 125);
  d.iops = -1;
  EXPECT_THROW(validate(d), InputError);
}

}  // namespace
}  // namespace gpemu::pipeline
