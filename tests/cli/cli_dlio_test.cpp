// `gpemu train --dlio-config`: a DLIO workload from the command line.
#include <gtest/gtest.h>

#include "support/dlio_test_util.h"
#include "support/run_gpemu.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

// --nodes and --network are the workload's gpemu.nodes and gpemu.network: 32
// ranks (megatron_deepspeed's tensor 4 x pipeline 8) run as 4 modelled nodes
// of 8, with the figures of 32 ranks on one node (DLIO's steps cross no link).
TEST_F(CliDlio, ThirtyTwoRanksRunAsFourNodesOfEightWithNodes) {
  const std::string run = "train --clock virtual --json --gpus 32 --dlio-config " + config.string() +
                          " ++workload.reader.batch_size=1 ++workload.train.epochs=2";
  DlioRun one = gpemu_dlio(run);
  ASSERT_EQ(one.status, 0) << one.err;
  DlioRun four = gpemu_dlio(run + " --nodes 4 --network 25gbe");
  ASSERT_EQ(four.status, 0) << four.err;
  const auto j1 = nlohmann::json::parse(one.out), j4 = nlohmann::json::parse(four.out);
  EXPECT_EQ(j1["nodes"], 1);
  EXPECT_TRUE(j1["network"].is_null());
  EXPECT_EQ(j4["nodes"], 4);
  EXPECT_EQ(j4["network"], "25gbe");
  EXPECT_EQ(j4["gpus"], 32);
  EXPECT_EQ(j4["ranks"].size(), 32u);
  for (const char* k : {"steps", "au_pct", "samples_per_s", "mb_per_s", "compute_s", "total_s", "emulated_s"})
    EXPECT_EQ(j4[k], j1[k]) << k;
  DlioRun text = gpemu_dlio("train --clock virtual --gpus 8 --nodes 2 --dlio-config " + config.string());
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("[METRIC] Modelled nodes: 2 of 4 accelerators each, joined by 100gbe"), std::string::npos)
      << text.out;
}

// Uneven nodes, more than 8 ranks a node, an unknown network, the real clock
// and a launcher's processes: one line each, naming the key or the flag and
// what is accepted, before anything is generated.
TEST_F(CliDlio, NodesOutsideTheirRulesAreOneLineErrors) {
  const std::string base = "train --dlio-config " + config.string() + " ";
  struct Case {
    std::string args, env, expect;
  };
  const Case cases[] = {
      {"--clock virtual --gpus 32 --nodes 3", "",
       "gpemu.nodes = 3 is not valid; accepted: a divisor of the world size 32"},
      {"--clock virtual --gpus 32 --nodes 2", "", "so that a node holds at most 8 ranks"},
      {"--clock virtual --gpus 4 --nodes 2 --network 50gbe", "",
       "gpemu.network = '50gbe' is not valid; accepted: 10gbe, 25gbe, 100gbe, 400gbe or a network JSON file"},
      {"--clock real --gpus 4 --nodes 2", "", "accepted: 1 under the real clock"},
      {"--clock virtual --nodes 2",
       "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 "
       "MASTER_ADDR=127.0.0.1 MASTER_PORT=1 ",
       "--nodes 2 under mpirun of 2 processes"},
  };
  for (const Case& c : cases) {
    DlioRun r = gpemu::testing::run_gpemu(base + c.args, c.env);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "data"));  // nothing was generated
}

TEST_F(CliDlio, AnUnwritableReportIsRefusedBeforeTheRun) {
  DlioRun r = gpemu_dlio("train --clock virtual --report " + (dir / "no" / "such" / "r.html").string() +
                         " --dlio-config " + config.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "data"));  // nothing was generated
}

}  // namespace
