// `gpemu predict --torch/--host` and `gpemu bench host` as a user runs them
// (docs/host.md).
#include <gtest/gtest.h>

#include "support/run_gpemu.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

gpemu::testing::GpemuRun gpemu(const std::string& args) { return gpemu::testing::run_gpemu(args); }

nlohmann::json predict_json(const std::string& args) {
  const auto r = gpemu("predict --gpu h200 --model resnet50 -b 64 --precision amp --json " + args);
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliHost, TorchTwoIsTheDefaultProgramOnTheDefaultHostAndFlagsStillOverride) {
  const auto one = predict_json("--torch 1");
  const auto two = predict_json("");
  EXPECT_EQ(predict_json("--torch 2"), two);
  EXPECT_EQ(one["zero_grad"], "zero");
  EXPECT_EQ(one["step_sync"], "phases");
  EXPECT_EQ(two["zero_grad"], "none");
  EXPECT_EQ(two["step_sync"], "pipelined");
  EXPECT_EQ(two["host_profile"], "h200-2026");
  EXPECT_NE(two["program_variant"].get<std::string>().find("foreach optimizer"), std::string::npos);
  EXPECT_EQ(two["syncs_per_step"], 1);  // GradScaler's found_inf.item()
  EXPECT_TRUE(two["bound"]["forward"] == "host" || two["bound"]["forward"] == "gpu");
  const auto overridden = predict_json("--torch 2 --zero-grad zero --foreach off");
  EXPECT_EQ(overridden["zero_grad"], "zero");
  EXPECT_EQ(overridden["program_variant"].get<std::string>().find("foreach"), std::string::npos);
  // ViT's nn.MultiheadAttention takes SDPA under PyTorch 2 only.
  const auto vit = gpemu("predict --gpu h200 --model vit_b_16 -b 32 --json");
  ASSERT_EQ(vit.status, 0) << vit.err;
  EXPECT_EQ(nlohmann::json::parse(vit.out)["model"], "vit_b_16_sdpa");
  const auto vit1 = gpemu("predict --gpu h200 --model vit_b_16 -b 32 --torch 1 --json");
  EXPECT_EQ(nlohmann::json::parse(vit1.out)["model"], "vit_b_16");
}

// train says which program and host its step times are of.
TEST(CliHost, TrainNamesItsProgramAndHost) {
  const auto two = gpemu("train --clock virtual --synthetic -n 2");
  ASSERT_EQ(two.status, 0) << two.err;
  EXPECT_NE(two.out.find("foreach optimizer, 1 micro-step, zero_grad to None, steps pipelined, host h200-2026"),
            std::string::npos)
      << two.out;
  const auto one = gpemu("train --clock virtual --synthetic -n 2 --torch 1");
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.out.find("zero_grad keeps grads, steps phases, host the GPU family's calibrated launch times"),
            std::string::npos)
      << one.out;
}

TEST(CliHost, AHostNamesTheLaunchTimesAndABadOneIsAOneLineError) {
  const auto volta_host = predict_json("--torch 2 --host gpemu-2022-volta");
  const auto modern = predict_json("--torch 2");
  EXPECT_EQ(volta_host["host_profile"], "gpemu-2022-volta");
  EXPECT_NE(volta_host["host_ms"]["forward"], modern["host_ms"]["forward"]);
  const auto bad = gpemu("predict --gpu h200 --model resnet50 -b 8 --host nosuch");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--host 'nosuch'"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find('\n'), bad.err.size() - 1) << bad.err;
  const auto torch3 = gpemu("predict --gpu h200 --model resnet50 -b 8 --torch 3");
  EXPECT_NE(torch3.status, 0);
  EXPECT_NE(torch3.err.find("--torch '3'"), std::string::npos) << torch3.err;
}

TEST(CliHost, BenchHostWritesAProfileThatPredictTakes) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 absent";
  const fs::path file = fs::temp_directory_path() / ("gpemu-bench-host-" + std::to_string(::getpid()) + ".json");
  const auto r = gpemu("bench host --quick --name vm --out " + file.string());
  if (r.status != 0 && r.err.find("cannot import torch") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("forward kernel (module call)"), std::string::npos) << r.out;
  ASSERT_TRUE(fs::exists(file));
  const auto p = predict_json("--torch 2 --host " + file.string());
  EXPECT_EQ(p["host_profile"], "vm");
  // Every launch time is the CPU dispatch plus the CUDA launch's 5 us.
  std::ifstream in(file);
  const auto h = nlohmann::json::parse(in);
  for (const char* k : {"forward_us", "backward_us", "optimizer_us", "foreach_us"})
    EXPECT_GT(h[k].get<double>(), 5) << k;
  EXPECT_LT(h["view_us"].get<double>(), h["forward_us"].get<double>());
  fs::remove(file);
}

}  // namespace
