// The `gpemu` command as a user runs it: exit codes, one-line errors, JSON keys.
#include <gtest/gtest.h>

#include "support/run_gpemu.h"
#include "support/temp_dir.h"

#include <sys/wait.h>

#include <unistd.h>
#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using Result = gpemu::testing::GpemuRun;

Result run(const std::string& args) { return gpemu::testing::run_gpemu(args); }

nlohmann::json json_of(const Result& r) {
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(Cli, HelpOnEveryCommand) {
  for (std::string c : {"", "devices ", "predict ", "train ", "bench ", "share "}) {
    Result r = run(c + "--help");
    EXPECT_EQ(r.status, 0) << c;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << c;
  }
}

TEST(Cli, ShareRunsJobsOnOneGpuAndRefusesBadInputInOneLine) {
  gpemu::testing::TempDir dir;
  const auto jobs = dir.path() / "jobs.json";
  std::ofstream(jobs) << R"({"gpu": "a100", "jobs": [{"name": "a", "model": "resnet18", "batch_size": 32,
    "iterations": 5}, {"name": "b", "compute_s": 0.01, "iterations": 5, "arrival_s": 0.02}]})";
  const auto trace = dir.path() / "share-trace.json";
  const auto report = dir.path() / "share.html";
  auto j = json_of(run("share --jobs " + jobs.string() + " --policy mps --clock virtual --json --trace " +
                       trace.string() + " --report " + report.string()));
  EXPECT_EQ(j["policy"], "mps");
  ASSERT_EQ(j["jobs"].size(), 2u);
  for (const auto& job : j["jobs"]) {
    EXPECT_TRUE(job["finished"].get<bool>()) << job.dump();
    EXPECT_EQ(job["iterations"], 5);
  }
  EXPECT_GT(j["makespan_s"].get<double>(), 0);
  EXPECT_TRUE(std::filesystem::exists(trace));
  std::ifstream html(report);
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("GPU (all jobs)"), std::string::npos);
  EXPECT_NE(page.find("<svg"), std::string::npos);
  Result text = run("share --jobs " + jobs.string() + " --clock virtual");
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("makespan"), std::string::npos);
  for (const std::string& bad : {"share --jobs " + (dir.path() / "missing.json").string(),
                                 "share --jobs " + jobs.string() + " --policy round-robin",
                                 "share --jobs " + jobs.string() + " --policy mig --clock virtual",
                                 "share --jobs " + jobs.string() + " --storage floppy --clock virtual",
                                 "share --jobs " + jobs.string() + " --storage hdd --connect"}) {
    Result r = run(bad);
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << ": " << r.err;
    if (bad.find("--storage") != std::string::npos) {
      EXPECT_NE(r.err.find("--storage"), std::string::npos) << r.err;
    }
  }
}

TEST(Cli, DevicesListsTheCatalog) {
  auto j = json_of(run("devices --json"));
  ASSERT_TRUE(j.is_array());
  EXPECT_GE(j.size(), 16u);
  bool v100 = false;
  for (auto& g : j) v100 |= g["id"] == "V100-PCIE-32GB";
  EXPECT_TRUE(v100);
  Result table = run("devices");
  EXPECT_NE(table.out.find("H200"), std::string::npos);
  EXPECT_NE(table.out.find("MI300X"), std::string::npos);
}

TEST(Cli, PredictReportsTimesMemoryAndFit) {
  auto j = json_of(run("predict --gpu v100 --model resnet50 --batch-size 64 --json"));
  for (const char* k :
       {"forward_ms", "backward_ms", "transfer_ms", "iteration_ms", "peak_allocated_mib", "peak_reserved_mib", "fits"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_GT(j["forward_ms"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["iteration_ms"].get<double>(),
                   j["forward_ms"].get<double>() + j["backward_ms"].get<double>() + j["transfer_ms"].get<double>());
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_GE(j["peak_reserved_mib"].get<double>(), j["peak_allocated_mib"].get<double>());
  EXPECT_EQ(j["provenance"]["forward"], "estimated");
  // An estimate says how far to trust it.
  ASSERT_TRUE(j.contains("expected_error_pct"));
  EXPECT_GT(j["expected_error_pct"]["iteration"].get<double>(), 0);
  EXPECT_FALSE(j["expected_error_pct"]["basis"].get<std::string>().empty());
}

TEST(Cli, PredictSaysAHugeBatchDoesNotFit) {
  auto j = json_of(run("predict --gpu t4 --model vgg16 --batch-size 4096 --json"));
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_NE(j["oom_reason"].get<std::string>().find("CUDA out of memory"), std::string::npos);
}

TEST(Cli, PredictTimesFollowPrecisionAndSequenceLength) {
  auto fp32 = json_of(run("predict --gpu v100 --model resnet50 --batch-size 128 --json"));
  auto amp = json_of(run("predict --gpu v100 --model resnet50 --batch-size 128 --precision amp --json"));
  // FP16 tensor cores (112 TFLOP/s vs 14 FP32) and half the activation bytes.
  EXPECT_LT(amp["forward_ms"].get<double>(), 0.75 * fp32["forward_ms"].get<double>());
  EXPECT_LT(amp["peak_allocated_mib"].get<double>(), fp32["peak_allocated_mib"].get<double>());
  auto s128 = json_of(run("predict --gpu a100 --model bert_base --batch-size 8 --seq-len 128 --json"));
  auto s512 = json_of(run("predict --gpu a100 --model bert_base --batch-size 8 --seq-len 512 --json"));
  EXPECT_GT(s512["forward_ms"].get<double>(), 3 * s128["forward_ms"].get<double>());
}

TEST(Cli, PredictSetsMeasuredFp32ProfilesAsideForOtherPrecisions) {
  const std::filesystem::path shared = GPEMU_SHARED_DIR "/reference/gpemu-profiles";
  if (!std::filesystem::exists(shared)) GTEST_SKIP() << "shared profiles absent: " << shared;
  Result r =
      run("predict --gpu Tesla_V100-PCIE-32GB --model resnet50 --batch-size 64 --precision amp --json "
          "--profiles " +
          shared.string());
  auto j = json_of(r);
  EXPECT_EQ(j["provenance"]["forward"], "estimated");
  EXPECT_NE(r.err.find("not used"), std::string::npos) << r.err;
}

TEST(Cli, PredictReplaysMeasuredProfiles) {
  const std::filesystem::path shared = GPEMU_SHARED_DIR "/reference/gpemu-profiles";
  if (!std::filesystem::exists(shared)) GTEST_SKIP() << "shared profiles absent: " << shared;
  auto j =
      json_of(run("predict --gpu Tesla_V100-PCIE-32GB --model resnet50 --batch-size 64 --host-memory pageable "
                  "--torch 1 --json --profiles " +
                  shared.string()));
  EXPECT_EQ(j["provenance"]["forward"], "measured");
  // The row for batch 64 in time/transfer/Tesla_V100-PCIE-32GB/resnet50.
  EXPECT_NEAR(j["transfer_ms"].get<double>(), 9.31006681919098, 1e-6);
}

TEST(Cli, BadInputIsOneClearLineAndNonZeroExit) {
  Result gpu = run("predict --gpu v1000 --model resnet50 --batch-size 8");
  EXPECT_NE(gpu.status, 0);
  EXPECT_NE(gpu.err.find("unknown GPU 'v1000'"), std::string::npos) << gpu.err;
  EXPECT_EQ(std::count(gpu.err.begin(), gpu.err.end(), '\n'), 1) << gpu.err;
  Result model = run("predict --gpu v100 --model resnet9000 --batch-size 8");
  EXPECT_NE(model.status, 0);
  EXPECT_NE(model.err.find("resnet9000"), std::string::npos) << model.err;
  Result batch = run("predict --gpu v100 --model resnet50 --batch-size 0");
  EXPECT_NE(batch.status, 0);
  EXPECT_NE(batch.err.find("batch"), std::string::npos) << batch.err;
  Result clock = run("train --clock sundial -n 1");
  EXPECT_NE(clock.status, 0);
  EXPECT_NE(clock.err.find("sundial"), std::string::npos) << clock.err;
  // Under either program: PyTorch 1's replays the profiles, PyTorch 2's sets them aside.
  for (const char* torch : {"1", "2"}) {
    Result profiles = run(std::string("predict --gpu v100 --model resnet50 --batch-size 8 --torch ") + torch +
                          " --profiles /nonexistent/dir");
    EXPECT_NE(profiles.status, 0) << torch;
    EXPECT_NE(profiles.err.find("/nonexistent/dir"), std::string::npos) << profiles.err;
  }
}

TEST(Cli, TrainUnderTheVirtualClockSummarisesTheRun) {
  auto j = json_of(run("train --clock virtual -n 20 --json"));
  EXPECT_EQ(j["iterations"], 20);
  EXPECT_EQ(j["samples"], 20 * 64);
  EXPECT_GT(j["samples_per_s"].get<double>(), 0);
  EXPECT_GT(j["gpu_util_pct"].get<double>(), 50);
  EXPECT_LE(j["gpu_util_pct"].get<double>(), 100);
  EXPECT_GT(j["peak_allocated_mib"].get<double>(), 0);
  Result text = run("train --clock virtual -n 5");
  EXPECT_NE(text.out.find("samples/s"), std::string::npos);
}

TEST(Cli, TrainIsDeterministicUnderTheVirtualClock) {
  auto a = json_of(run("train --clock virtual -n 30 --seed 7 --json"));
  auto b = json_of(run("train --clock virtual -n 30 --seed 7 --json"));
  EXPECT_EQ(a["elapsed_s"], b["elapsed_s"]);
  auto c = json_of(run("train --clock virtual -n 30 --seed 8 --json"));
  EXPECT_NE(a["elapsed_s"], c["elapsed_s"]);
}

TEST(Cli, TrainWritesAPerfettoTraceWithEngineAndStreamTracks) {
  const std::string path =
      std::filesystem::temp_directory_path() / ("gpemu_trace_" + std::to_string(::getpid()) + ".json");
  Result r = run("train --clock virtual -n 3 --trace " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  int forward = 0;
  std::set<std::string> tracks;
  for (auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "forward") ++forward;
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(forward, 2 * 3);  // on the compute engine track and on the stream track
  EXPECT_TRUE(tracks.count("compute engine"));
  EXPECT_TRUE(tracks.count("copy H2D engine"));
  EXPECT_TRUE(tracks.count("stream 0 (default)"));
}

TEST(Cli, TrainOutOfMemoryReadsLikePyTorch) {
  Result r = run("train --clock virtual --model vgg16 --gpu t4 --batch-size 4096 -n 1");
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("CUDA out of memory. Tried to allocate"), std::string::npos) << r.err;
}

}  // namespace
