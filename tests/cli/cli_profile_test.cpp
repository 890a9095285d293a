// `gpemu profile` on this machine's CPU: the same code path a GPU run takes,
// writing gpemu's profile layout and a step-times CSV that gpemu's readers
// take (docs/profiles.md).
#include <gtest/gtest.h>

#include "support/run_gpemu.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

gpemu::testing::GpemuRun gpemu(const std::string& args) { return gpemu::testing::run_gpemu(args); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CliProfile, ACpuRunWritesTheProfileLayoutAndStepTimesMarkedAsCpu) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 absent";
  const fs::path dir = fs::temp_directory_path() / ("gpemu-profile-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto r =
      gpemu("profile --device cpu --model resnet18 --batch-sizes 1,2 --warmup 0 --steps 1 --out " + dir.string());
  if (r.status != 0 && r.err.find("cannot import torch") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("measured on the CPU"), std::string::npos) << r.out;
  // The profile: gpemu-profile/1, both rows, the environment in its comment.
  const auto prof = nlohmann::json::parse(slurp(dir / "cpu" / "resnet18.json"));
  EXPECT_EQ(prof["format"], "gpemu-profile/1");
  EXPECT_EQ(prof["gpu"], "cpu");
  ASSERT_EQ(prof["rows"].size(), 2u);
  EXPECT_GT(prof["rows"][0]["forward_s"].get<double>(), 0);
  EXPECT_NE(prof["comment"].get<std::string>().find("CPU timings, not a GPU's"), std::string::npos);
  // The per-op section: CPU timings, both batch sizes, forward and backward
  // convolutions with their input shapes, every op with calls and a time.
  EXPECT_EQ(prof["op_timer"], "cpu");
  ASSERT_TRUE(prof["ops"].is_array());
  bool forward_conv = false, backward_conv = false, batch2 = false;
  for (const auto& op : prof["ops"]) {
    EXPECT_GT(op["calls_per_step"].get<double>(), 0) << op.dump();
    EXPECT_GE(op["seconds_per_call"].get<double>(), 0) << op.dump();
    EXPECT_FALSE(op.contains("kernels")) << op.dump();  // CUDA kernels only
    batch2 = batch2 || op["batch_size"] == 2;
    if (op["class"] != "conv") continue;
    forward_conv = forward_conv || (op["phase"] == "forward" && op["op"] == "aten::conv2d" &&
                                    op["shapes"][0] == nlohmann::json::parse("[1,3,224,224]") &&
                                    op["shapes"][1] == nlohmann::json::parse("[64,3,7,7]"));
    backward_conv = backward_conv || (op["phase"] == "backward" && op["op"] == "aten::convolution_backward" &&
                                      op["shapes"][0].size() == 4 && op["seconds_per_call"].get<double>() > 0);
  }
  EXPECT_TRUE(forward_conv) << prof["ops"].dump();
  EXPECT_TRUE(backward_conv) << prof["ops"].dump();
  EXPECT_TRUE(batch2);
  // The same file with a GPU's name is what the profile readers take: the
  // layout a GPU run writes.
  const fs::path as_gpu = dir / "as-gpu" / "H200-SXM-141GB";
  fs::create_directories(as_gpu);
  std::ofstream(as_gpu / "resnet18.json")
      << std::regex_replace(slurp(dir / "cpu" / "resnet18.json"), std::regex("\"gpu\": \"cpu\""),
                            "\"gpu\": \"H200-SXM-141GB\"");
  const auto v = gpemu("validate --profiles " + (dir / "as-gpu").string() + " --json");
  ASSERT_EQ(v.status, 0) << v.err;
  // validate reads the per-op section back: measured time per phase and kind
  // beside the model's kernels of resnet18's zoo graph, marked as CPU time.
  const auto j = nlohmann::json::parse(v.out);
  bool compared = false;
  for (const auto& pt : j["op_classes"]) {
    EXPECT_EQ(pt["timer"], "cpu");
    compared = compared || (pt["phase"] == "forward" && pt["kind"] == "conv" && pt["batch_size"] == 1 &&
                            pt["measured_s"].get<double>() > 0 && pt["predicted_s"].get<double>() > 0 &&
                            pt["predicted_ops"].get<int>() == 20);
  }
  EXPECT_TRUE(compared) << j["op_classes"].dump();
  // The step times: the published columns, one row per batch, gpemu's own
  // source (what --fit-step-times takes), the CPU named as the device.
  const auto s = gpemu("validate --step-times " + (dir / "steps.csv").string());
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_NE(s.out.find("GPU 'cpu' is not in the catalog"), std::string::npos) << s.out;
  const std::string csv = slurp(dir / "steps.csv");
  EXPECT_NE(csv.find("gpemu reference measurement (gpemu profile on the CPU"), std::string::npos) << csv;
  fs::remove_all(dir);
}

TEST(CliProfile, BadInputIsAOneLineError) {
  const auto r = gpemu("profile --out /tmp/x --steps 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--steps 0"), std::string::npos) << r.err;
  const auto o = gpemu("profile --out /tmp/x --op-steps 101");
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.err.find("--op-steps 101: 0 (no per-op times) to 100"), std::string::npos) << o.err;
  const auto p = gpemu("profile --out /tmp/x --python /nonexistent/python");
  EXPECT_NE(p.status, 0);
}

}  // namespace
