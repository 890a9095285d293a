// `gpemu models` and the model-zoo parts of `gpemu predict` (--max-batch,
// --seq-len, --precision, --optimizer, memory from the zoo replay).
#include <gtest/gtest.h>

#include "support/run_gpemu.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using ZooCliResult = gpemu::testing::GpemuRun;

// `env` is prepended to the command line ("NAME=value ").
ZooCliResult run_zoo_cli(const std::string& args, const std::string& env = "") {
  return gpemu::testing::run_gpemu(args, env);
}

nlohmann::json zoo_json_of(const ZooCliResult& r) {
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliModels, ListsTheZooAsJson) {
  auto j = zoo_json_of(run_zoo_cli("models --json"));
  ASSERT_TRUE(j.is_array());
  EXPECT_GE(j.size(), 40u);
  bool resnet50 = false, bert = false;
  for (const auto& m : j) {
    for (const char* k : {"name", "family", "params", "forward_gflops_per_sample", "default_batch", "default_seq_len"})
      EXPECT_TRUE(m.contains(k)) << k;
    if (m["name"] == "resnet50") {
      resnet50 = true;
      EXPECT_EQ(m["family"], "cnn");
      EXPECT_EQ(m["params"], 25557032);
      EXPECT_NEAR(m["forward_gflops_per_sample"].get<double>(), 8.2, 0.3);  // 4.1 GMACs
      EXPECT_EQ(m["default_batch"], 32);
      EXPECT_TRUE(m["default_seq_len"].is_null());
    }
    if (m["name"] == "bert_base") {
      bert = true;
      EXPECT_EQ(m["family"], "transformer");
      EXPECT_EQ(m["default_seq_len"], 128);
    }
  }
  EXPECT_TRUE(resnet50);
  EXPECT_TRUE(bert);
}

TEST(CliModels, ListsTheZooAsATable) {
  ZooCliResult r = run_zoo_cli("models");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("llama2_7b"), std::string::npos);
  EXPECT_NE(r.out.find("GFLOPs"), std::string::npos);
  EXPECT_NE(run_zoo_cli("models --help").out.find("Usage"), std::string::npos);
}

TEST(CliModels, FollowsGpemuDataDir) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpemu_cli_empty_zoo_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto j = zoo_json_of(run_zoo_cli("models --json", "GPEMU_DATA_DIR=" + dir.string() + " "));
  EXPECT_EQ(j, nlohmann::json::array());
  ZooCliResult text = run_zoo_cli("models", "GPEMU_DATA_DIR=" + dir.string() + " ");
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("holds no models"), std::string::npos) << text.out;
  std::filesystem::remove_all(dir);
}

TEST(CliPredictZoo, MemoryComesFromTheZooReplay) {
  auto j = zoo_json_of(run_zoo_cli("predict --gpu v100 --model resnet50 --batch-size 64 --json"));
  EXPECT_EQ(j["memory_source"], "model zoo replay");
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["optimizer"], "sgd");
  // GPEmu measured 5599 MiB on a V100 at batch 64 (docs/zoo-memory.md).
  EXPECT_NEAR(j["peak_allocated_mib"].get<double>(), 5599.3, 0.03 * 5599.3);
  EXPECT_GE(j["peak_reserved_mib"].get<double>(), j["peak_allocated_mib"].get<double>());
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_FALSE(j.contains("max_batch"));
}

TEST(CliPredictZoo, PrecisionAndOptimizerChangeMemory) {
  auto fp32 = zoo_json_of(run_zoo_cli("predict --gpu a100 --model resnet50 -b 64 --json"));
  auto amp = zoo_json_of(run_zoo_cli("predict --gpu a100 --model resnet50 -b 64 --precision amp --json"));
  auto adam = zoo_json_of(run_zoo_cli("predict --gpu a100 --model resnet50 -b 64 --optimizer adam --json"));
  auto bf16 = zoo_json_of(run_zoo_cli("predict --gpu a100 --model resnet50 -b 64 --precision bf16 --json"));
  EXPECT_LT(amp["peak_allocated_mib"].get<double>(), fp32["peak_allocated_mib"].get<double>());
  EXPECT_GT(adam["peak_allocated_mib"].get<double>(), fp32["peak_allocated_mib"].get<double>());
  EXPECT_EQ(amp["precision"], "amp");
  EXPECT_EQ(bf16["precision"], "bf16");
  EXPECT_EQ(adam["optimizer"], "adam");
  ZooCliResult bad = run_zoo_cli("predict --gpu a100 --model resnet50 -b 64 --precision int4");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("int4"), std::string::npos) << bad.err;
  ZooCliResult bad_opt = run_zoo_cli("predict --gpu a100 --model resnet50 -b 64 --optimizer lamb");
  EXPECT_NE(bad_opt.status, 0);
  EXPECT_NE(bad_opt.err.find("lamb"), std::string::npos) << bad_opt.err;
}

TEST(CliPredictZoo, MaxBatchIsTheLargestThatFits) {
  auto j = zoo_json_of(run_zoo_cli("predict --gpu v100 --model resnet50 --max-batch --json"));
  const int best = j["max_batch"].get<int>();
  // ~42 MiB per sample on a ~31 GiB card
  EXPECT_GT(best, 150);
  EXPECT_LT(best, 400);
  EXPECT_LE(j["peak_reserved_mib"].get<double>(), j["capacity_mib"].get<double>());
  auto at = zoo_json_of(run_zoo_cli("predict --gpu v100 --model resnet50 -b " + std::to_string(best) + " --json"));
  EXPECT_TRUE(at["fits"].get<bool>());
  auto over =
      zoo_json_of(run_zoo_cli("predict --gpu v100 --model resnet50 -b " + std::to_string(best + 1) + " --json"));
  EXPECT_FALSE(over["fits"].get<bool>());
  EXPECT_NE(over["oom_reason"].get<std::string>().find("CUDA out of memory"), std::string::npos);
  // With a batch size too: the full prediction plus max_batch.
  auto both = zoo_json_of(run_zoo_cli("predict --gpu v100 --model resnet50 -b 32 --max-batch --json"));
  EXPECT_EQ(both["max_batch"].get<int>(), best);
  EXPECT_TRUE(both.contains("forward_ms"));
  // Text output.
  ZooCliResult text = run_zoo_cli("predict --gpu v100 --model resnet50 --max-batch");
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("largest batch that fits"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(std::to_string(best)), std::string::npos) << text.out;
}

TEST(CliPredictZoo, MeasuredOomEvidenceCapsMaxBatch) {
  const std::filesystem::path shared = GPEMU_SHARED_DIR "/reference/gpemu-profiles";
  if (!std::filesystem::exists(shared)) GTEST_SKIP() << "shared profiles absent: " << shared;
  // GPEmu's P100 ran resnet50 up to batch 179 (180 did not fit), a PyTorch 1.x program (--torch 1).
  auto j = zoo_json_of(
      run_zoo_cli("predict --gpu P100 --model resnet50 --max-batch --torch 1 --json --profiles " + shared.string()));
  EXPECT_EQ(j["max_batch"], 179);
  auto zoo_only = zoo_json_of(run_zoo_cli("predict --gpu P100 --model resnet50 --max-batch --json"));
  EXPECT_GE(zoo_only["max_batch"].get<int>(), 179);
}

TEST(CliPredictZoo, MaxBatchForSequenceModels) {
  auto s128 = zoo_json_of(run_zoo_cli("predict --gpu A100-SXM4-40GB --model bert_base --max-batch --json"));
  auto s512 =
      zoo_json_of(run_zoo_cli("predict --gpu A100-SXM4-40GB --model bert_base --max-batch --seq-len 512 --json"));
  EXPECT_EQ(s128["seq_len"], 128);
  EXPECT_EQ(s512["seq_len"], 512);
  EXPECT_GT(s128["max_batch"].get<int>(), 4 * s512["max_batch"].get<int>());
  auto llama = zoo_json_of(run_zoo_cli("predict --gpu A100-SXM4-40GB --model llama2_7b --max-batch --json"));
  EXPECT_EQ(llama["max_batch"], 0);  // 7B parameters with SGD momentum need > 80 GB
  EXPECT_NE(llama["oom_reason"].get<std::string>().find("CUDA out of memory"), std::string::npos);
}

TEST(CliPredictZoo, BadInputIsOneClearLine) {
  ZooCliResult none = run_zoo_cli("predict --gpu v100 --model resnet50");
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("--batch-size"), std::string::npos) << none.err;
  EXPECT_EQ(std::count(none.err.begin(), none.err.end(), '\n'), 1) << none.err;
  ZooCliResult unknown = run_zoo_cli("predict --gpu v100 --model resnet9000 --max-batch");
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.err.find("resnet9000"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("resnet50"), std::string::npos) << unknown.err;  // lists the zoo
  ZooCliResult seq = run_zoo_cli("predict --gpu v100 --model bert_base --max-batch --seq-len -4");
  EXPECT_NE(seq.status, 0);
  EXPECT_NE(seq.err.find("-4"), std::string::npos) << seq.err;
}

}  // namespace
