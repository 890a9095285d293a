// `gpemu train --dlio-config`: a DLIO workload from the command line.
#include <gtest/gtest.h>

#include "support/dlio_test_util.h"
#include "support/run_gpemu.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using DlioRun = gpemu::testing::GpemuRun;

DlioRun gpemu_dlio(const std::string& args) { return gpemu::testing::run_gpemu(args); }

struct CliDlio : ::testing::Test {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("gpemu_cli_dlio_" + std::to_string(::getpid()));
  std::filesystem::path config = dir / "tiny.yaml";
  void SetUp() override {
    std::filesystem::create_directories(dir);
    gpemu::dlio::testing::write_tiny_workload(config, dir / "data");
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
};

TEST_F(CliDlio, RunsTheWorkloadAndReportsDliosMetrics) {
  DlioRun r = gpemu_dlio("train --clock virtual --json --dlio-config " + config.string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"au_pct", "samples_per_s", "mb_per_s", "au_pass"}) EXPECT_TRUE(j.contains(k)) << k;
  // Under the virtual clock real reads take no emulated time: the accelerator never waits.
  EXPECT_DOUBLE_EQ(j["au_pct"].get<double>(), 100.0);
  EXPECT_TRUE(j["au_pass"].get<bool>());
}

TEST_F(CliDlio, OverridesApplyAndUnknownKeysAreReported) {
  DlioRun r = gpemu_dlio("train --clock virtual --json --dlio-config " + config.string() +
                         " ++workload.train.computation_time=0.02");
  ASSERT_EQ(r.status, 0) << r.err;
  DlioRun bad = gpemu_dlio("train --clock virtual --dlio-config " + config.string() + " ++workload.train.epoch=2");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("epoch"), std::string::npos) << bad.err;
  DlioRun stray = gpemu_dlio("train --clock virtual ++workload.train.epochs=2");
  EXPECT_NE(stray.status, 0);
  EXPECT_NE(stray.err.find("--dlio-config"), std::string::npos) << stray.err;
}

// The flags that mean something for a DLIO run are honoured; the others are
// refused by name, never silently dropped.
TEST_F(CliDlio, GpusSeedReportAndTraceAreHonouredOtherFlagsRefused) {
  const std::string report = (dir / "run.html").string();
  const std::string trace = (dir / "run.json").string();
  DlioRun r = gpemu_dlio("train --clock virtual --json --gpus 2 --seed 9 --report " + report + " --trace " + trace +
                         " --dlio-config " + config.string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["ranks"].size(), 2u);
  EXPECT_TRUE(std::filesystem::file_size(report) > 0);
  std::ifstream t(trace);
  EXPECT_NO_THROW(nlohmann::json::parse(t));
  std::ifstream h(report);
  const std::string html((std::istreambuf_iterator<char>(h)), {});
  EXPECT_NE(html.find("accelerator utilization (AU)"), std::string::npos);
  for (const char* flag : {"--batch-size 8", "--epochs 2", "--model vgg11", "--workers 3", "--precision amp"}) {
    DlioRun bad = gpemu_dlio(std::string("train --clock virtual ") + flag + " --dlio-config " + config.string());
    EXPECT_NE(bad.status, 0) << flag;
    const std::string name = std::string(flag).substr(0, std::string(flag).find(' '));
    EXPECT_NE(bad.err.find(name), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("does not apply"), std::string::npos) << bad.err;
  }
}

TEST_F(CliDlio, AnUnwritableReportIsRefusedBeforeTheRun) {
  DlioRun r = gpemu_dlio("train --clock virtual --report " + (dir / "no" / "such" / "r.html").string() +
                         " --dlio-config " + config.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "data"));  // nothing was generated
}

}  // namespace
