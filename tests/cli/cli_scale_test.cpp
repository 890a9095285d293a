// More GPUs than one node holds: refused with what to give, or spread over
// nodes joined by a network; and `gpemu bench scale`.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "support/run_gpemu.h"

namespace {

using gpemu::testing::run_gpemu;

nlohmann::json json_of(const gpemu::testing::GpemuRun& r) {
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliScale, MoreGpusThanANodeHoldsAreRefusedWithWhatToGive) {
  const auto r = run_gpemu("train --synthetic -n 1 --gpus 16 --clock virtual");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--gpus 16"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--nodes 2"), std::string::npos) << r.err;
}

// The engine's rules name the spec's fields; the CLI says them as its flags,
// the rule's other fields too (issue 29).
TEST(CliScale, TheEnginesRulesAreSaidWithTheFlags) {
  auto r = run_gpemu("train --synthetic -n 1 --gpus 16 --clock virtual");
  EXPECT_EQ(r.err,
            "gpemu: error: --gpus 16 is impossible: a node holds at most 8 GPUs and there is 1 node; give --nodes 2 or "
            "more (and --network 25gbe|100gbe|400gbe|FILE) so that each node holds at most 8\n");
  r = run_gpemu("train --synthetic -n 1 --gpus 2 --gpemu-gpus 2 --clock virtual");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err,
            "gpemu: error: --gpemu-gpus 2 is impossible: GPEmu's one process standing for 2 GPUs (one per node) "
            "excludes --gpus 2 on 1 node(s): give one GPU per node (or --gpemu-gpus 1 for 2 data-parallel ranks with "
            "all-reduce)\n");
  // A dataset the pipeline does not know: the spec's data.dataset, said as the flag that gave it.
  r = run_gpemu("train --virtual-dataset imagenet22k --clock virtual -n 1");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.rfind("gpemu: error: --virtual-dataset 'imagenet22k': unknown; accepted imagenet1k, ", 0), 0U)
      << r.err;
}

TEST(CliScale, TwoNodesTrainOverTheNetworkAndASlowerNetworkTakesLonger) {
  const std::string base = "train --synthetic -n 2 --gpus 16 --nodes 2 --clock virtual --json --network ";
  const auto slow = json_of(run_gpemu(base + "25gbe"));
  const auto fast = json_of(run_gpemu(base + "400gbe"));
  EXPECT_EQ(slow["gpus"], 16);
  EXPECT_EQ(slow["nodes"], 2);
  EXPECT_EQ(slow["network"], "25gbe");
  EXPECT_GT(slow["all_reduces"].get<int>(), 0);
  EXPECT_GT(slow["elapsed_s"].get<double>(), fast["elapsed_s"].get<double>());
}

TEST(CliScale, OneNodeSaysSoInItsJson) {
  const auto j = json_of(run_gpemu("train --synthetic -n 1 --gpus 2 --clock virtual --json"));
  EXPECT_EQ(j["nodes"], 1);
  EXPECT_TRUE(j["network"].is_null());
}

// --nodes and --network are a DLIO workload's gpemu.nodes and gpemu.network
// (tests/cli/cli_dlio_test.cpp); --gpus-per-node still does not apply to one.
TEST(CliScale, GpusPerNodeIsRefusedForDlioWorkloads) {
  const auto r = run_gpemu("train --dlio-config /nonexistent.yaml --nodes 2 --gpus-per-node 4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--gpus-per-node does not apply to --dlio-config runs"), std::string::npos) << r.err;
}

TEST(CliScale, AnUnreadableNetworkFileIsOneLineNamingIt) {
  const auto r =
      run_gpemu("train --synthetic -n 1 --gpus 16 --nodes 2 --clock virtual --network /nonexistent/net.json");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("/nonexistent/net.json"), std::string::npos) << r.err;
}

TEST(CliScale, BenchScalePrintsJobsAndTheFittedExponent) {
  const auto j = json_of(run_gpemu("bench scale --gpus 8 16 --steps 1 --epoch-nodes 0 --json"));
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["jobs"][1]["gpus"], 16);
  EXPECT_EQ(j["jobs"][1]["nodes"], 2);
  EXPECT_GT(j["jobs"][1]["timeline"]["ops_issued"].get<double>(), j["jobs"][0]["timeline"]["ops_issued"].get<double>());
  EXPECT_TRUE(j.contains("exponent"));
  // One step and two of warm-up: no steady figures, the fit is of the overall ones.
  EXPECT_TRUE(j["jobs"][0]["steady_steps_per_s"].is_null());
  EXPECT_EQ(j["exponent_of"], "overall");
}

TEST(CliScale, BenchScaleSeparatesTheWarmUpFromTheSteadyRate) {
  const auto j = json_of(run_gpemu("bench scale --gpus 8 16 --steps 3 --warmup 1 --epoch-nodes 0 --json"));
  ASSERT_EQ(j["jobs"].size(), 2u);
  for (const auto& job : j["jobs"]) {
    ASSERT_TRUE(job["steady_steps_per_s"].is_number()) << job.dump();
    EXPECT_GT(job["steady_steps_per_s"].get<double>(), 0);
    EXPECT_GT(job["warmup_s"].get<double>(), 0);
    EXPECT_LT(job["warmup_s"].get<double>(), job["wall_s"].get<double>());
  }
  EXPECT_EQ(j["exponent_of"], "steady");
  EXPECT_EQ(j["largest_steps_per_s"], j["jobs"][1]["steady_steps_per_s"]);
  const auto bad = run_gpemu("bench scale --gpus 8 --warmup -1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--warmup -1"), std::string::npos) << bad.err;
}

// The epoch of several nodes (issue 32's scale target): the second epoch
// reads what the first cached, a node's own shard locally and the other
// nodes' over the network (a partitioned cache that holds the dataset), no
// disk; the counters are those `gpemu train` prints for the configuration.
TEST(CliScale, BenchScaleRunsAnEpochOfNodesWithAPartitionedCache) {
  const auto j = json_of(run_gpemu("bench scale --gpus 8 --steps 1 --epoch-nodes 4 --json"));
  ASSERT_TRUE(j["jobs"].size() == 1u && j["epoch"].is_object()) << j.dump();
  const auto& e = j["epoch"];
  EXPECT_EQ(e["nodes"], 4);
  EXPECT_EQ(e["gpus"], 32);
  EXPECT_EQ(e["storage_reads"], 0) << e.dump();
  EXPECT_GT(e["remote_hits"].get<double>(), 2 * e["cache_hits"].get<double>()) << e.dump();
  // Each of 32 ranks reads its padded share: ceil(87,473 / 32) samples.
  EXPECT_EQ(e["cache_hits"].get<std::uint64_t>() + e["remote_hits"].get<std::uint64_t>(), 32u * 2734u) << e.dump();
  EXPECT_GT(e["network_bytes"].get<double>(), 0);
  const auto t = run_gpemu(
      "train --clock virtual --virtual-dataset imagenette10g --model resnet50 --gpu a100 -b 32 "
      "--nodes 4 --gpus-per-node 8 --workers 4 --cores 32 --storage nvme --page-cache-bytes 0 "
      "--cache-bytes 3GiB --distributed-cache partitioned --epochs 2 --cv 0 --json");
  ASSERT_EQ(t.status, 0) << t.err;
  const auto train = json_of(t);
  std::uint64_t remote = 0;
  for (const auto& r : train["reads"]["per_node_epoch"])
    if (r["epoch"] == 1) remote += r["remote_hits"].get<std::uint64_t>();
  EXPECT_EQ(remote, e["remote_hits"].get<std::uint64_t>());
  const auto bad = run_gpemu("bench scale --gpus 8 --epoch-nodes -1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--epoch-nodes -1"), std::string::npos) << bad.err;
}

}  // namespace
