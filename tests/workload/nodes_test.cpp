// A job over several nodes with the modelled loader: each node's loader
// resources, GPEmu's one process per node, shared storage and a distributed
// cache (node_loaders.h; docs/pipeline.md "Several nodes").
#include <gtest/gtest.h>

#include <string>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/job.h"
#include "support/input_error.h"
#include "workload/node_loaders.h"

namespace gpemu {
namespace {

pipeline::Dataset records(std::size_t n, std::uint64_t bytes) {
  pipeline::Dataset d;
  d.root = "test";
  for (std::size_t i = 0; i < n; ++i)
    d.samples.push_back({"virtual:test/" + std::to_string(i), 0, bytes, -1, pipeline::SampleFormat::Jpeg});
  return d;
}

// GPEmu's distributed runs: one process per node standing for 8 GPUs, no all-reduce.
JobSpec gpemu_nodes(int nodes) {
  JobSpec s;
  s.cluster.gpu = &find_gpu("p100");
  s.cluster.gpus = nodes;
  s.cluster.nodes = nodes;
  s.cluster.network = network_preset("10gbe");
  s.batch_size = 16;
  s.compute.model.name = "alexnet";
  s.compute.time_divisor = 8;
  s.compute.use_allocator = false;
  s.compute.all_reduce = false;
  s.compute.variation.cv = 0;
  s.data.source = DataSource::Modelled;
  s.data.dataset = records(256, 100'000);
  s.data.loader.num_workers = 4;
  s.data.loader.shuffle = true;
  s.data.model.cores = 4;
  s.data.model.storage = pipeline::parse_storage("hdd");
  s.data.model.page_cache_bytes = 0;
  s.schedule.epochs = 2;
  return s;
}

std::string validation_message(const JobSpec& s) {
  return testing::input_error_message([&] { validate(s); });
}

TEST(Nodes, EachNodesRanksShareItsResourcesAndSharedStorageIsOneServer) {
  JobSpec s = gpemu_nodes(2);
  s.cluster.gpus = 4;  // as the loaders see it: two ranks a node
  s.compute.time_divisor = 1;
  EXPECT_EQ(ranks_per_node(s), 2);
  s.data.model.cache_bytes = 1000;
  const pipeline::LoaderModelOptions m = node_loader_model(s, s.data, 3, nullptr);
  EXPECT_EQ(m.node, 1);
  EXPECT_EQ(m.ranks_sharing, 2);
  EXPECT_EQ(m.loader_threads, 8);
  EXPECT_EQ(m.storage_ranks_sharing, 0);  // each node its own device
  s.data.shared_storage = true;
  s.data.io_depth = 4;
  const pipeline::LoaderModelOptions shared = node_loader_model(s, s.data, 0, nullptr);
  EXPECT_EQ(shared.node, 0);
  EXPECT_EQ(shared.storage_ranks_sharing, 4);  // one server, every rank of the job
  EXPECT_EQ(shared.storage_slots, 2);          // the node's 4 in flight, split
}

TEST(Nodes, GpemuModeRunsOneProcessPerNodeAndEachReadsItsShard) {
  const auto costs = make_cost_model(std::nullopt);
  auto run = [&](int nodes) {
    auto clock = make_virtual_clock();
    Job job(*clock, *costs, gpemu_nodes(nodes));
    return job.run();
  };
  const RunRecord one = run(1), two = run(2);
  EXPECT_EQ(two.nodes, 2);
  EXPECT_EQ(two.all_reduces, 0u);
  ASSERT_EQ(two.loader_stats.size(), 2u);
  for (const pipeline::LoaderStats& l : two.loader_stats) {
    ASSERT_EQ(l.epochs.size(), 2u);
    EXPECT_EQ(l.epochs[1].storage_requests, 128u);  // its half, each node from its own disk
  }
  // Each node reads half the dataset from its own disk: a storage-bound epoch takes about half as long.
  const double ratio = to_seconds(summarize(two).elapsed) / to_seconds(summarize(one).elapsed);
  EXPECT_GT(ratio, 0.45);
  EXPECT_LT(ratio, 0.6);
}

TEST(Nodes, ADistributedCacheCountsRemoteHitsPerNodeAndEpoch) {
  const auto costs = make_cost_model(std::nullopt);
  auto run = [&](pipeline::DistributedCacheKind kind) {
    JobSpec s = gpemu_nodes(2);
    s.data.model.cache_bytes = 25'600'000;  // each node holds the whole dataset
    s.data.distributed_cache = kind;
    auto clock = make_virtual_clock();
    Job job(*clock, *costs, s);
    return job.run();
  };
  const RunRecord part = run(pipeline::DistributedCacheKind::Partitioned);
  const RunRecord local = run(pipeline::DistributedCacheKind::LocalityAware);
  std::uint64_t remote = 0;
  for (int n = 0; n < 2; ++n) {
    const auto& p = part.loader_stats[n].epochs;
    const auto& l = local.loader_stats[n].epochs;
    ASSERT_EQ(p.size(), 2u);
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(p[0].storage_requests, 128u);
    EXPECT_EQ(p[1].storage_requests, 0u);
    EXPECT_EQ(p[1].cache_hits + p[1].remote_hits, 128u);
    EXPECT_EQ(p[1].network_bytes, p[1].remote_hits * 100'000);
    EXPECT_EQ(l[1].cache_hits, 128u);
    EXPECT_EQ(l[1].remote_hits, 0u);
    remote += p[1].remote_hits;
  }
  EXPECT_GT(remote, 64u);
  // Remote reads wait on the network; local ones do not.
  EXPECT_GT(part.epochs[1].end - part.epochs[1].start, local.epochs[1].end - local.epochs[1].start);
}

TEST(Nodes, ValidationNamesWhatADistributedCacheAndSharedStorageNeed) {
  JobSpec s = gpemu_nodes(2);
  s.data.distributed_cache = pipeline::DistributedCacheKind::Partitioned;
  EXPECT_NE(validation_message(s).find("data.model.cache_bytes 0"), std::string::npos) << validation_message(s);
  s.data.model.cache_bytes = 1000;
  EXPECT_EQ(validation_message(s), "");
  s.data.model.storage.reset();
  s.data.shared_storage = true;
  EXPECT_NE(validation_message(s).find("data.shared_storage is one modelled storage server for every node: give a "
                                       "storage device (data.model.storage)"),
            std::string::npos)
      << validation_message(s);
  JobSpec g = gpemu_nodes(2);
  g.cluster.gpus = 4;
  EXPECT_NE(validation_message(g).find("compute.time_divisor 8"), std::string::npos) << validation_message(g);
}

}  // namespace
}  // namespace gpemu
