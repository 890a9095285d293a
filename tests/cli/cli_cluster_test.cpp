// `gpemu cluster` and `gpemu cluster trace` as a user runs them (docs/cluster.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_gpemu.h"
#include "support/temp_dir.h"

namespace {

using gpemu::testing::run_gpemu;

TEST(CliCluster, TraceThenRunGivesByteIdenticalJson) {
  gpemu::testing::TempDir dir;
  const auto cluster = dir.write("c.json", R"({"nodes": [{"gpu": "v100", "gpus": 4, "cpus": 16, "count": 2}]})");
  const auto trace = dir.path() / "t.csv";
  const auto made =
      run_gpemu("cluster trace --jobs 25 --seed 3 --load 30 --dataset imagenette --out " + trace.string());
  ASSERT_EQ(made.status, 0) << made.err;
  const std::string args =
      "cluster --cluster " + cluster.string() + " --trace " + trace.string() + " --policy srtf --json -";
  const auto a = run_gpemu(args), b = run_gpemu(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  const auto j = nlohmann::json::parse(a.out);
  EXPECT_EQ(j["policy"], "srtf");
  EXPECT_EQ(j["jobs"].size(), 25u);
  EXPECT_EQ(j["summary"]["finished"], 25);
  for (const auto& job : j["jobs"]) EXPECT_GE(job["start_s"].get<double>(), job["arrival_s"].get<double>());
}

TEST(CliCluster, AJobLargerThanTheClusterIsOneLineNamingIt) {
  gpemu::testing::TempDir dir;
  const auto cluster = dir.write("c.json", R"({"nodes": [{"gpu": "v100", "gpus": 2}]})");
  const auto trace = dir.write("t.csv", "job,arrival_s,model,batch,gpus,iterations\nbig,0,resnet50,64,4,10\n");
  const auto r = run_gpemu("cluster --cluster " + cluster.string() + " --trace " + trace.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("t.csv:2: job 'big' asks for 4 GPUs; the cluster has at most 2"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(CliCluster, IterationFidelityStepsTheEngineAndABadOneIsOneLine) {
  gpemu::testing::TempDir dir;
  const auto cluster = dir.write("c.json", R"({"nodes": [{"gpu": "v100", "gpus": 2}]})");
  const auto trace = dir.write("t.csv", "job,arrival_s,model,batch,gpus,iterations\na,0,resnet18,64,1,40\n");
  const std::string args = "cluster --cluster " + cluster.string() + " --trace " + trace.string();
  const auto r = run_gpemu(args + " --fidelity iteration");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("iterations stepped by the engine: 40"), std::string::npos) << r.out;
  const auto bad = run_gpemu(args + " --fidelity exact");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--fidelity 'exact': unknown; accepted: speed"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

TEST(CliCluster, AnUnknownPolicyNamesTheAcceptedOnes) {
  gpemu::testing::TempDir dir;
  const auto cluster = dir.write("c.json", R"({"nodes": [{"gpu": "v100", "gpus": 2}]})");
  const auto trace = dir.write("t.csv", "job,arrival_s,gpus,iterations,step_s\na,0,1,10,1\n");
  const auto r =
      run_gpemu("cluster --cluster " + cluster.string() + " --trace " + trace.string() + " --policy lottery");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(
                "--policy 'lottery': unknown; accepted: fifo, srtf, las, drf-fifo, drf, allox, es, max-min, timeslice"),
            std::string::npos)
      << r.err;
}

}  // namespace
