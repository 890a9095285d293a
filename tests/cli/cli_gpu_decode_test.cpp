// `gpemu train --decode gpu` (DALI-style GPU decode, virtual clock), as a user runs it.
#include <gtest/gtest.h>

#include "support/run_gpemu.h"
#include "support/temp_dir.h"

#include <string>

#include <nlohmann/json.hpp>

namespace {

using gpemu::testing::run_gpemu;

const std::string kRun =
    "train --clock virtual --virtual-dataset imagenette --model resnet18 --gpu p100 -b 256 -n 4 "
    "--workers 4 --cores 4 --json --decode ";

nlohmann::json json_of(const std::string& args) {
  const auto r = run_gpemu(args);
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliGpuDecode, ThePipelineHoldsGpuMemoryAndSaysWhereItDecodes) {
  const nlohmann::json cpu = json_of(kRun + "cpu");
  const nlohmann::json gpu = json_of(kRun + "gpu");
  EXPECT_NE(gpu["source"].get<std::string>().find(
                "; GPU decode (DALI-style) on P100-PCIE-16GB's SMs, entropy decoding on the host"),
            std::string::npos)
      << gpu["source"];
  EXPECT_EQ(cpu["source"].get<std::string>().find("GPU decode"), std::string::npos);
  // At least its two decoded float batches of 256 x 3 x 224 x 224 (294 MiB) on the device.
  EXPECT_GE(gpu["peak_allocated_mib"].get<double>() - cpu["peak_allocated_mib"].get<double>(),
            2.0 * 256 * 602112 / 1048576.0);
  // The decode kernels count as GPU work: the GPU is busier.
  EXPECT_GT(gpu["gpu_util_pct"].get<double>(), cpu["gpu_util_pct"].get<double>());
}

TEST(CliGpuDecode, AnOutOfMemoryCanComeFromThePipeline) {
  // 9,000 images: 10.1 GiB of decoded float batches and 5.4 GiB of decode buffers beside the model on 16 GB.
  const auto r = run_gpemu(
      "train --clock virtual --virtual-dataset imagenette --model resnet18 --gpu p100 -b 9000 -n 1 --workers 1 "
      "--cores 1 --decode gpu");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("the GPU decode pipeline's buffers"), std::string::npos) << r.err;
}

TEST(CliGpuDecode, AnUnknownPlaceOrNothingToDecodeIsRefusedInOneLine) {
  auto r = run_gpemu("train --synthetic -n 1 --decode tpu");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("unknown --decode 'tpu': accepted 'cpu'"), std::string::npos) << r.err;
  r = run_gpemu("train --synthetic --clock virtual -n 1 --decode gpu");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--decode gpu decodes a dataset's JPEGs"), std::string::npos) << r.err;
}

// The real clock: 300 tiny JPEGs, the workers parse and entropy-decode them, the emulated P100 decodes.
TEST(CliGpuDecode, RealClockOnTinyImages) {
  gpemu::testing::TempDir dir;
  const std::string data = (dir.path() / "images").string();
  ASSERT_EQ(run_gpemu("dataset synth --out " + data + " --images 300 --classes 3 --median-kb 3").status, 0);
  const nlohmann::json j =
      json_of("train --data " + data + " --model resnet18 --gpu p100 -b 32 -n 4 --workers 2 --json --decode gpu");
  EXPECT_EQ(j["clock"], "real");
  EXPECT_EQ(j["iterations"], 4);
  EXPECT_NE(j["source"].get<std::string>().find("real loader"), std::string::npos) << j["source"];
  EXPECT_NE(j["source"].get<std::string>().find("GPU decode (DALI-style) on P100-PCIE-16GB's SMs"), std::string::npos)
      << j["source"];
  // The pipeline's two decoded float batches of 32 are on the device beside training.
  const nlohmann::json cpu = json_of("train --data " + data +
                                     " --model resnet18 --gpu p100 -b 32 -n 4 --workers 2 "
                                     "--json --decode cpu");
  EXPECT_GE(j["peak_allocated_mib"].get<double>() - cpu["peak_allocated_mib"].get<double>(),
            2.0 * 32 * 602112 / 1048576.0);
}

// `gpemu bench loader` prints the GPU-decode loader beside the others: its host part measured, its GPU part
// modelled for the card named.
TEST(CliGpuDecode, TheLoaderBenchRunsItBesideTheOthers) {
  gpemu::testing::TempDir dir;
  const std::string args = "bench loader --images 24 --workers 1 --no-torch --no-ffcv --dataset-dir " +
                           (dir.path() / "images").string() + " --gpu-decode a100 --service-workers 0";
  const nlohmann::json j = json_of(args + " --json");
  ASSERT_TRUE(j["gpu_decode"].is_object()) << j.dump();
  EXPECT_EQ(j["gpu_decode"]["gpu"], "A100-SXM4-40GB");
  EXPECT_EQ(j["gpu_decode"]["engine"], true);
  EXPECT_EQ(j["gpu_decode"]["images"], 24);
  EXPECT_GT(j["gpu_decode"]["gpu_s"].get<double>(), 0);
  EXPECT_GT(j["gpu_decode_images_per_s"].get<double>(), 0);
  const auto text = run_gpemu(args);
  EXPECT_NE(text.out.find("gpemu GPU decode (DALI-style, A100-SXM4-40GB modelled)"), std::string::npos) << text.out;
}

}  // namespace
