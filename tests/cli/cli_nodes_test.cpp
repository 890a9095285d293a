// `gpemu train` over several nodes with the modelled loader, as a user runs it:
// --gpus-per-node, shared storage, a distributed cache and what is printed per node and epoch.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "support/run_gpemu.h"

namespace {

using gpemu::testing::run_gpemu;

// Imagenette (9,469 files) on 2 nodes in GPEmu's mode, 2 epochs: small and fast under the virtual clock.
const std::string kBase =
    "train --clock virtual --virtual-dataset imagenette --model alexnet --gpu p100 -b 256 --gpemu-gpus 8 --nodes 2 "
    "--gpus-per-node 1 --workers 4 --cores 4 --storage nfs --storage-shared --page-cache-bytes 0 --epochs 2 "
    "--network 10gbe ";

TEST(CliNodes, APartitionedCacheReportsRemoteHitsPerNodeAndEpoch) {
  const auto r = run_gpemu(kBase + "--cache-bytes 2G --distributed-cache partitioned --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["reads"]["distributed_cache"], "partitioned");
  EXPECT_EQ(j["reads"]["storage_shared"], true);
  const nlohmann::json& rows = j["reads"]["per_node_epoch"];
  ASSERT_EQ(rows.size(), 4u);  // 2 nodes x 2 epochs
  std::uint64_t remote = 0;
  for (const auto& row : rows) {
    if (row["epoch"] == 0) {
      EXPECT_EQ(row["remote_hits"], 0);
      EXPECT_GT(row["storage_reads"], 4000);  // its half, from the server
    } else {
      EXPECT_EQ(row["storage_reads"], 0);  // the two caches hold everything
      EXPECT_GT(row["network_bytes"], 0);
      remote += row["remote_hits"].get<std::uint64_t>();
    }
  }
  EXPECT_GT(remote, 3000u);

  const auto text = run_gpemu(kBase + "--cache-bytes 2G --distributed-cache locality-aware");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("reads per node and epoch (locality-aware distributed cache, shared storage)"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("remote hits"), std::string::npos) << text.out;
}

// Each node's loaders decode on that node's cores: a CPU-bound epoch over two
// nodes takes half one node's (the one-job session had given every node's
// loaders its first node's cores).
TEST(CliNodes, EachNodesLoadersUseThatNodesCores) {
  const std::string cpu_bound =
      "train --clock virtual --virtual-dataset imagenette --model alexnet --gpu p100 -b 256 --gpemu-gpus 8 "
      "--gpus-per-node 1 --workers 4 --cores 1 --decode-us 2000 --epochs 1 --json --nodes ";
  const auto one = run_gpemu(cpu_bound + "1"), two = run_gpemu(cpu_bound + "2");
  ASSERT_EQ(one.status, 0) << one.err;
  ASSERT_EQ(two.status, 0) << two.err;
  const double ratio = nlohmann::json::parse(two.out)["elapsed_s"].get<double>() /
                       nlohmann::json::parse(one.out)["elapsed_s"].get<double>();
  EXPECT_GT(ratio, 0.45);
  EXPECT_LT(ratio, 0.55);
}

TEST(CliNodes, BadNodeFlagsAreRefusedWithWhatToGive) {
  const auto bad_name = run_gpemu(kBase + "--cache-bytes 2G --distributed-cache lru");
  EXPECT_NE(bad_name.status, 0);
  EXPECT_NE(bad_name.err.find("distributed cache 'lru': accepted none, partitioned"), std::string::npos)
      << bad_name.err;
  const auto no_cache = run_gpemu(kBase + "--distributed-cache partitioned");
  EXPECT_NE(no_cache.status, 0);
  EXPECT_NE(no_cache.err.find("--cache-bytes"), std::string::npos) << no_cache.err;
  const auto disagree = run_gpemu(kBase + "--gpus 3");
  EXPECT_NE(disagree.status, 0);
  EXPECT_NE(disagree.err.find("--gpus 3 disagrees with --nodes 2 x --gpus-per-node 1 = 2"), std::string::npos)
      << disagree.err;
  const auto fetch = run_gpemu(kBase + "--remote-fetch-us 5");
  EXPECT_NE(fetch.status, 0);
  EXPECT_NE(fetch.err.find("give --distributed-cache too"), std::string::npos) << fetch.err;
}

}  // namespace
