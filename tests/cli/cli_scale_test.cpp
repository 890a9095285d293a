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

TEST(CliScale, NodesAreRefusedForDlioWorkloads) {
  const auto r = run_gpemu("train --dlio-config /nonexistent.yaml --nodes 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--nodes"), std::string::npos) << r.err;
}

TEST(CliScale, AnUnreadableNetworkFileIsOneLineNamingIt) {
  const auto r =
      run_gpemu("train --synthetic -n 1 --gpus 16 --nodes 2 --clock virtual --network /nonexistent/net.json");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("/nonexistent/net.json"), std::string::npos) << r.err;
}

TEST(CliScale, BenchScalePrintsJobsAndTheFittedExponent) {
  const auto j = json_of(run_gpemu("bench scale --gpus 8 16 --steps 1 --json"));
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["jobs"][1]["gpus"], 16);
  EXPECT_EQ(j["jobs"][1]["nodes"], 2);
  EXPECT_GT(j["jobs"][1]["timeline"]["ops_issued"].get<double>(), j["jobs"][0]["timeline"]["ops_issued"].get<double>());
  EXPECT_TRUE(j.contains("exponent"));
}

}  // namespace
