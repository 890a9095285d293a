// `gpemu train --prep-workers ...` (a modelled preprocessing service) and
// `--prep-offload fastflow`, as a user runs them, under the virtual clock.
#include <gtest/gtest.h>

#include "support/run_gpemu.h"

#include <string>

#include <nlohmann/json.hpp>

namespace {

using gpemu::testing::run_gpemu;

// One worker on one core, ResNet-18 on an A100: the client's CPU is the bottleneck.
const std::string kRun =
    "train --clock virtual --virtual-dataset imagenette --model resnet18 --gpu a100 -b 64 -n 40 --workers 1 "
    "--cores 1 --json --image-size 64";

nlohmann::json json_of(const std::string& args) {
  const auto r = run_gpemu(args);
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliPrepService, RemoteWorkersSpeedUpACpuBoundJobAndSayWhatTheyRun) {
  const nlohmann::json local = json_of(kRun);
  EXPECT_TRUE(local["prep_service"].is_null());
  const nlohmann::json remote = json_of(kRun + " --prep-workers 4 --prep-worker-cpus 4 --prep-offload all");
  EXPECT_EQ(remote["prep_service"]["workers"], 4);
  EXPECT_EQ(remote["prep_service"]["offload"], "all");
  EXPECT_NE(remote["source"].get<std::string>().find("preprocessing service: 4 remote workers of 4 CPUs, offload "
                                                     "all"),
            std::string::npos)
      << remote["source"];
  // Sixteen remote cores against one: the epoch's 40 steps take much less than half the time.
  EXPECT_LT(remote["elapsed_s"].get<double>(), 0.5 * local["elapsed_s"].get<double>());
}

TEST(CliPrepService, FastFlowProfilesTheJobAndPrintsItsChoice) {
  const nlohmann::json j = json_of(kRun + " --prep-workers 1 --prep-worker-cpus 2 --prep-offload fastflow");
  const nlohmann::json& ff = j["prep_service"]["fastflow"];
  ASSERT_TRUE(ff.is_object()) << j["prep_service"];
  EXPECT_TRUE(ff["bottleneck"].get<bool>());
  EXPECT_GT(ff["gthp"].get<double>(), 1.3 * ff["lthp"].get<double>());
  EXPECT_EQ(ff["candidates"].size(), 3u);
  // Whatever it chose is what the job trained with.
  EXPECT_EQ(j["prep_service"]["offload"], ff["offload"]);
  EXPECT_EQ(j["prep_service"]["local_share"], ff["local_share"]);
  bool noted = false;
  for (const auto& n : j["notes"]) noted = noted || n.get<std::string>().rfind("FastFlow: offload ", 0) == 0;
  EXPECT_TRUE(noted) << j["notes"];
}

TEST(CliPrepService, WhatTheServiceCannotServeIsRefusedInOneLine) {
  auto r = run_gpemu("train --synthetic -n 1 --prep-offload all");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--prep-offload all sends work to remote workers: give --prep-workers N too"), std::string::npos)
      << r.err;
  r = run_gpemu("train --synthetic -n 1 --prep-local-share 0.5");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--prep-local-share requires --prep-workers"), std::string::npos) << r.err;
  r = run_gpemu("train --synthetic --clock virtual -n 1 --prep-workers 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--prep-workers 2 is a modelled preprocessing service: give --clock virtual and a dataset"),
            std::string::npos)
      << r.err;
  r = run_gpemu(kRun + " --prep-workers 2 --prep-offload half");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("unknown --prep-offload 'half': accepted none, read, decode, all, or fastflow"),
            std::string::npos)
      << r.err;
  r = run_gpemu(kRun + " --gpus 2 --prep-workers 2 --prep-offload all");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("serves one training process"), std::string::npos) << r.err;
  r = run_gpemu(kRun + " --prep-workers 2 --prep-offload all --storage hdd");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("does not combine with a storage device"), std::string::npos) << r.err;
}

}  // namespace
