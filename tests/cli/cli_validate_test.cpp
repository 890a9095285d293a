// `gpemu validate`, `gpemu calibrate` and `gpemu bench crossval` as a user
// runs them, on a tiny GPEmu-layout profile folder.
#include <gtest/gtest.h>

#include "support/run_gpemu.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

using Output = gpemu::testing::GpemuRun;

Output gpemu(const std::string& args) { return gpemu::testing::run_gpemu(args); }

// A scratch folder with resnet18 on V100 in GPEmu's layout.
struct TinyDir {
  fs::path root;
  TinyDir() {
    root = fs::temp_directory_path() /
           ("gpemu-cli-validate-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    write("time/compute/forward/Tesla_V100-PCIE-32GB/resnet18/time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0061\n2,0.0063\n4,0.0071\n");
    write("time/compute/backward/Tesla_V100-PCIE-32GB/resnet18/time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0120\n2,0.0125\n4,0.0139\n");
    write("time/transfer/Tesla_V100-PCIE-32GB/resnet18/data_transfer_time_by_batch_size.csv",
          "Batch_Size,Time_In_SECONDS\n1,0.0004\n2,0.0006\n4,0.0009\n");
    write("time/transfer/Tesla_V100-PCIE-32GB/resnet18/model_transfer_time.txt", "0.01\n");
    write("memory/Tesla_V100-PCIE-32GB/resnet18/memory.csv",
          "batch_size,peak,persistent\n1,180.0,134.5\n2,215.0,135.1\n4,290.0,136.2\n");
  }
  ~TinyDir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
};

TEST(CliValidate, JsonHasTheDocumentedKeys) {
  TinyDir d;
  const Output r = gpemu("validate --profiles " + d.root.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* ph : {"forward", "backward", "iteration", "transfer", "peak_memory"})
    for (const char* k : {"median_ape_pct", "mean_ape_pct", "p90_ape_pct", "n"}) {
      EXPECT_TRUE(j["overall"][ph].contains(k)) << ph << "." << k;
      EXPECT_TRUE(j["per_gpu"]["V100-PCIE-32GB"][ph].contains(k)) << ph << "." << k;
    }
  EXPECT_EQ(j["overall"]["forward"]["n"], 3);
  EXPECT_EQ(j["overall"]["peak_memory"]["n"], 3);
  ASSERT_TRUE(j.contains("oom_agreement_pct"));
  EXPECT_DOUBLE_EQ(j["oom_agreement_pct"].get<double>(), 100.0);  // nothing ran out of memory; the model agrees
}

TEST(CliValidate, TableAndPlot) {
  TinyDir d;
  const fs::path svg = d.root / "plot.svg";
  const Output r = gpemu("validate --profiles " + d.root.string() + " --plot " + svg.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("per GPU"), std::string::npos);
  EXPECT_NE(r.out.find("OOM decisions"), std::string::npos);
  std::ifstream in(svg);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("V100-PCIE-32GB"), std::string::npos);
}

TEST(CliValidate, MissingFolderIsAOneLineError) {
  const Output r = gpemu("validate --profiles /nonexistent/gpemu-profiles --json");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("gpemu: error:"), std::string::npos) << r.err;
}

TEST(CliCalibrate, WritesACalibrationThatValidateReads) {
  TinyDir d;
  const fs::path out = d.root / "cal.json";
  const Output r = gpemu("calibrate --profiles " + d.root.string() + " --out " + out.string() + " --no-crossval");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(fs::exists(out));
  const auto cal = nlohmann::json::parse(std::ifstream(out));
  EXPECT_EQ(cal["format"], "gpemu-calibration/1");
  EXPECT_EQ(cal["calibrated_families"], nlohmann::json::array({"Volta"}));
  EXPECT_TRUE(cal["families"].contains("Hopper"));
  const Output v = gpemu("validate --profiles " + d.root.string() + " --json --no-memory --calibration " + out.string());
  ASSERT_EQ(v.status, 0) << v.err;
  EXPECT_LT(nlohmann::json::parse(v.out)["overall"]["iteration"]["median_ape_pct"].get<double>(), 50);
}

TEST(CliBench, CrossvalIsRegistered) {
  const Output r = gpemu("bench crossval --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--profiles"), std::string::npos);
}

}  // namespace
