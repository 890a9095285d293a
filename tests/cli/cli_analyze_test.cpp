// `gpemu analyze` and `gpemu bench datastall`, as a user runs them.
#include <gtest/gtest.h>

#include "support/run_gpemu.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using Outcome = gpemu::testing::GpemuRun;

using gpemu::testing::run_gpemu;

class TinyDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gpemu-cli-analyze-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    const Outcome r = run_gpemu("dataset synth --out " + (dir_ / "ds").string() + " --images 64");
    ASSERT_EQ(r.status, 0) << r.err;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string data() const { return (dir_ / "ds").string(); }
  std::filesystem::path dir_;
};

TEST_F(TinyDataset, AnalyzeJsonHasTheThreeTimesAndTheShares) {
  const Outcome r = run_gpemu("analyze --clock virtual --json --batch-size 8 --workers 2 --data " + data());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"gpu_bound_s", "prep_bound_s", "cold_s", "prep_stall_pct", "fetch_stall_pct"})
    ASSERT_TRUE(j.contains(key)) << key;
  const double g = j["gpu_bound_s"], p = j["prep_bound_s"], c = j["cold_s"];
  EXPECT_GT(g, 0);
  EXPECT_GE(p, g);  // 64 images, 8 batches: the modelled loader is slower than the GPU
  EXPECT_GT(c, p);  // and reading from storage slower still
  EXPECT_NEAR(j["prep_stall_pct"].get<double>(), 100 * (p - g) / c, 1e-6);
  EXPECT_NEAR(j["fetch_stall_pct"].get<double>(), 100 * (c - p) / c, 1e-6);
  EXPECT_EQ(j["passes"]["cold"]["samples"], 64);
  EXPECT_EQ(j["loader"], "modelled");
}

TEST_F(TinyDataset, AnalyzeIsDeterministicUnderTheVirtualClock) {
  const std::string args = "analyze --clock virtual --json --batch-size 8 --data " + data();
  const Outcome a = run_gpemu(args), b = run_gpemu(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(TinyDataset, AnalyzePrintsATable) {
  const Outcome r = run_gpemu("analyze --clock virtual --batch-size 8 --data " + data());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("gpu-bound"), std::string::npos);
  EXPECT_NE(r.out.find("fetch stall"), std::string::npos);
  EXPECT_NE(r.out.find("prep stall"), std::string::npos);
}

TEST_F(TinyDataset, AnalyzeTakesAVirtualDatasetOfTheFoldersSizes) {
  // The folder's own sizes as a sizes file: the modelled loader needs nothing else.
  std::ofstream sizes(dir_ / "sizes.txt");
  for (const auto& e : std::filesystem::recursive_directory_iterator(data()))
    if (e.is_regular_file()) sizes << e.file_size() << '\n';
  sizes.close();
  const Outcome r = run_gpemu("analyze --clock virtual --json --batch-size 8 --virtual-dataset sizes=" +
                              (dir_ / "sizes.txt").string());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["virtual_dataset"], true);
  EXPECT_EQ(j["dataset_images"], 64);
  EXPECT_EQ(j["data"], "virtual:" + (dir_ / "sizes.txt").string());
  EXPECT_EQ(j["passes"]["cold"]["samples"], 64);
  EXPECT_GT(j["cold_s"].get<double>(), j["gpu_bound_s"].get<double>());
  const Outcome real = run_gpemu("analyze --clock real --virtual-dataset imagenette10g");
  EXPECT_NE(real.status, 0);
  EXPECT_NE(real.err.find("give --clock virtual"), std::string::npos) << real.err;
}

TEST(CliAnalyze, RejectsAMissingFolder) {
  const Outcome r = run_gpemu("analyze --clock virtual --data /nonexistent/gpemu-analyze");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

TEST(CliAnalyze, BenchDatastallListsFiveModelsBesideThePaper) {
  const Outcome r = run_gpemu("bench datastall --json --cores 24 --batches 4");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 5u);
  EXPECT_EQ(j["gpus"], 8);
  EXPECT_EQ(j["cores"], 24);
  EXPECT_EQ(j["workers"], 3);
  EXPECT_EQ(j["rows"][0]["model"], "alexnet");
  EXPECT_EQ(j["rows"][0]["paper_fetch_stall_pct"], 41.0);
  EXPECT_EQ(j["rows"][4]["paper_fetch_stall_pct"], 2.0);
  EXPECT_EQ(j["paper_only"][0]["model"], "shufflenet_v2");
  for (const auto& row : j["rows"]) {
    EXPECT_GE(row["fetch_stall_pct"].get<double>(), 0);
    EXPECT_GE(row["prep_stall_pct"].get<double>(), 0);
  }
  EXPECT_TRUE(j.contains("ordering_matches"));
}

}  // namespace
