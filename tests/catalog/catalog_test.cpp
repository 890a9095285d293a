// The GPU catalog, as a specification: what it holds, how names resolve, and
// what a user sees when a name does not.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "gpemu/catalog.h"
#include "gpemu/error.h"

namespace gpemu {
namespace {

// The InputError message for a name, or "" when it resolves.
std::string error_for(std::string_view name) {
  try {
    find_gpu(name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// --- What the catalog holds ------------------------------------------------

TEST(Catalog, HoldsAtLeastSixteenGpus) { EXPECT_GE(gpu_catalog().size(), 16u); }

TEST(Catalog, HoldsEveryGpuTheProjectNeeds) {
  for (const char* id :
       {"K80", "M40", "P100-PCIE-16GB", "V100-PCIE-32GB", "V100-SXM2-32GB", "RTX6000", "T4", "A10", "A100-SXM4-40GB",
        "A100-SXM4-80GB", "L4", "H100-SXM5-80GB", "H100-PCIE-80GB", "H200-SXM-141GB", "B200", "MI300X"}) {
    EXPECT_EQ(find_gpu(id).id, id);
  }
}

TEST(Catalog, EveryGpuHasItsCoreFiguresAndASource) {
  for (const GpuSpec& gpu : gpu_catalog()) {
    SCOPED_TRACE(gpu.id);
    EXPECT_FALSE(gpu.name.empty());
    EXPECT_TRUE(gpu.vendor == "NVIDIA" || gpu.vendor == "AMD");
    EXPECT_FALSE(gpu.architecture.empty());
    EXPECT_GE(gpu.year, 2014);
    EXPECT_GT(gpu.memory_bytes, 0u);
    EXPECT_GT(gpu.memory_bandwidth_gbs, 0);
    EXPECT_GT(gpu.fp32_tflops, 0);
    EXPECT_GT(gpu.sm_count, 0);
    EXPECT_GE(gpu.pcie_gen, 3);
    EXPECT_GT(gpu.pcie_lanes, 0);
    EXPECT_FALSE(gpu.source.empty());
  }
}

TEST(Catalog, IsOrderedOldestFirst) {
  const auto& gpus = gpu_catalog();
  for (std::size_t i = 1; i < gpus.size(); ++i) {
    EXPECT_LE(gpus[i - 1].year, gpus[i].year) << gpus[i - 1].id << " before " << gpus[i].id;
  }
  EXPECT_EQ(gpus.front().id, "K80");
}

TEST(Catalog, IdsAreUnique) {
  std::set<std::string> ids;
  for (const GpuSpec& gpu : gpu_catalog()) EXPECT_TRUE(ids.insert(gpu.id).second) << gpu.id;
}

TEST(Catalog, NoNameResolvesToTwoGpus) {
  // Every id and alias resolves to the GPU that lists it, so no alias of one
  // GPU normalises to another GPU's name.
  for (const GpuSpec& gpu : gpu_catalog()) {
    EXPECT_EQ(find_gpu(gpu.id).id, gpu.id);
    for (const std::string& alias : gpu.aliases) {
      EXPECT_EQ(find_gpu(alias).id, gpu.id) << "alias '" << alias << "'";
    }
  }
}

TEST(Catalog, K80IsOneDieOfTheBoard) {
  const GpuSpec& k80 = find_gpu("K80");
  EXPECT_EQ(k80.memory_bytes, 12ull << 30);
  EXPECT_DOUBLE_EQ(k80.memory_bandwidth_gbs, 240);
}

TEST(Catalog, MemoryIsTheMarketedSizeInGiB) {
  EXPECT_EQ(find_gpu("M40").memory_bytes, 12ull << 30);  // the 2015 card GPEmu measured
  EXPECT_EQ(find_gpu("M40-24GB").memory_bytes, 24ull << 30);
  EXPECT_EQ(find_gpu("V100-PCIE-32GB").memory_bytes, 32ull << 30);
  EXPECT_EQ(find_gpu("A100-SXM4-40GB").memory_bytes, 40ull << 30);
  EXPECT_EQ(find_gpu("H200").memory_bytes, 141ull << 30);
  EXPECT_EQ(find_gpu("MI300X").memory_bytes, 192ull << 30);
}

TEST(Catalog, NvlinkOnlyWhereTheCardHasIt) {
  EXPECT_EQ(find_gpu("V100-PCIE-32GB").nvlink_gbs, 0);
  EXPECT_EQ(find_gpu("T4").nvlink_gbs, 0);
  EXPECT_DOUBLE_EQ(find_gpu("V100-SXM2-32GB").nvlink_gbs, 300);
  EXPECT_DOUBLE_EQ(find_gpu("A100-SXM4-40GB").nvlink_gbs, 600);
  EXPECT_DOUBLE_EQ(find_gpu("H100-SXM5-80GB").nvlink_gbs, 900);
}

// --- Peak throughput by precision -------------------------------------------

TEST(PeakTflops, IsAbsentForModesTheCardLacks) {
  EXPECT_EQ(find_gpu("V100").peak_tflops(Precision::TF32), std::nullopt);
  EXPECT_EQ(find_gpu("V100").peak_tflops(Precision::BF16), std::nullopt);
  EXPECT_EQ(find_gpu("A100").peak_tflops(Precision::FP8), std::nullopt);
  EXPECT_EQ(find_gpu("K80").peak_tflops(Precision::FP16), std::nullopt);
}

TEST(PeakTflops, IsTheDatasheetDenseFigure) {
  EXPECT_EQ(find_gpu("A100").peak_tflops(Precision::TF32), 156);
  EXPECT_EQ(find_gpu("A100").peak_tflops(Precision::BF16), 312);
  EXPECT_EQ(find_gpu("V100").peak_tflops(Precision::FP16), 112);
  EXPECT_EQ(find_gpu("V100").peak_tflops(Precision::FP32), 14);
  EXPECT_TRUE(find_gpu("H100").peak_tflops(Precision::FP8).has_value());
}

TEST(PeakTflops, Fp32IsPresentEverywhere) {
  for (const GpuSpec& gpu : gpu_catalog()) {
    EXPECT_TRUE(gpu.peak_tflops(Precision::FP32).has_value()) << gpu.id;
  }
}

TEST(PeakTflops, TensorModesAreNeverSlowerThanFp32) {
  for (const GpuSpec& gpu : gpu_catalog()) {
    for (Precision p : {Precision::TF32, Precision::FP16, Precision::BF16, Precision::FP8}) {
      if (auto t = gpu.peak_tflops(p)) {
        EXPECT_GE(*t, gpu.fp32_tflops) << gpu.id << " " << to_string(p);
      }
    }
  }
}

// --- Name matching: every alias form ---------------------------------------

TEST(FindGpu, AcceptsGpemuProfileDirectoryNames) {
  EXPECT_EQ(find_gpu("Tesla_K80").id, "K80");
  EXPECT_EQ(find_gpu("Tesla_M40").id, "M40");  // GPEmu's M40 directory is the 12 GB card
  EXPECT_EQ(find_gpu("Tesla_P100-PCIE-16GB").id, "P100-PCIE-16GB");
  EXPECT_EQ(find_gpu("Tesla_V100-PCIE-32GB").id, "V100-PCIE-32GB");
  EXPECT_EQ(find_gpu("Quadro_RTX_6000").id, "RTX6000");
  EXPECT_EQ(find_gpu("NVIDIA_A100-SXM4-40GB").id, "A100-SXM4-40GB");
}

TEST(FindGpu, AcceptsWhatTorchCudaGetDeviceNamePrints) {
  EXPECT_EQ(find_gpu("Tesla K80").id, "K80");
  EXPECT_EQ(find_gpu("Tesla M40 24GB").id, "M40-24GB");
  EXPECT_EQ(find_gpu("Tesla P100-PCIE-16GB").id, "P100-PCIE-16GB");
  EXPECT_EQ(find_gpu("Tesla V100-PCIE-32GB").id, "V100-PCIE-32GB");
  EXPECT_EQ(find_gpu("Tesla V100-SXM2-32GB").id, "V100-SXM2-32GB");
  EXPECT_EQ(find_gpu("Quadro RTX 6000").id, "RTX6000");
  EXPECT_EQ(find_gpu("Tesla T4").id, "T4");
  EXPECT_EQ(find_gpu("NVIDIA A10").id, "A10");
  EXPECT_EQ(find_gpu("NVIDIA A100-SXM4-40GB").id, "A100-SXM4-40GB");
  EXPECT_EQ(find_gpu("NVIDIA A100-SXM4-80GB").id, "A100-SXM4-80GB");
  EXPECT_EQ(find_gpu("NVIDIA A100 80GB PCIe").id, "A100-PCIE-80GB");
  EXPECT_EQ(find_gpu("NVIDIA A100-PCIE-40GB").id, "A100-PCIE-40GB");
  EXPECT_EQ(find_gpu("NVIDIA GH200 480GB").id, "GH200-96GB");
  EXPECT_EQ(find_gpu("NVIDIA L4").id, "L4");
  EXPECT_EQ(find_gpu("NVIDIA H100 80GB HBM3").id, "H100-SXM5-80GB");
  EXPECT_EQ(find_gpu("NVIDIA H100 PCIe").id, "H100-PCIE-80GB");
  EXPECT_EQ(find_gpu("NVIDIA H200").id, "H200-SXM-141GB");
  EXPECT_EQ(find_gpu("NVIDIA B200").id, "B200");
  EXPECT_EQ(find_gpu("AMD Instinct MI300X").id, "MI300X");
}

TEST(FindGpu, IgnoresCaseAndSeparators) {
  EXPECT_EQ(find_gpu("v100-pcie-32gb").id, "V100-PCIE-32GB");
  EXPECT_EQ(find_gpu("V100 PCIE 32GB").id, "V100-PCIE-32GB");
  EXPECT_EQ(find_gpu("v100_pcie_32gb").id, "V100-PCIE-32GB");
  EXPECT_EQ(find_gpu("V100PCIE32GB").id, "V100-PCIE-32GB");
  EXPECT_EQ(find_gpu("rtx 6000").id, "RTX6000");
  EXPECT_EQ(find_gpu("mi300x").id, "MI300X");
}

TEST(FindGpu, StripsVendorAndSeriesPrefixes) {
  EXPECT_EQ(find_gpu("NVIDIA Tesla T4").id, "T4");
  EXPECT_EQ(find_gpu("nvidia h100-sxm5-80gb").id, "H100-SXM5-80GB");
  EXPECT_EQ(find_gpu("Tesla P100").id, "P100-PCIE-16GB");
  EXPECT_EQ(find_gpu("Instinct MI300X").id, "MI300X");
  EXPECT_EQ(find_gpu("AMD MI300X").id, "MI300X");
}

TEST(FindGpu, ShortFamilyNamesResolveToTheDocumentedDefault) {
  EXPECT_EQ(find_gpu("v100").id, "V100-PCIE-32GB");  // GPEmu's V100 profiles
  EXPECT_EQ(find_gpu("p100").id, "P100-PCIE-16GB");  // GPEmu's P100 profiles
  EXPECT_EQ(find_gpu("a100").id, "A100-SXM4-40GB");  // GPEmu's A100 profiles
  EXPECT_EQ(find_gpu("h100").id, "H100-SXM5-80GB");  // the DGX/HGX form
  EXPECT_EQ(find_gpu("Tesla V100").id, "V100-PCIE-32GB");
  EXPECT_EQ(find_gpu("NVIDIA A100").id, "A100-SXM4-40GB");
}

TEST(FindGpu, UnambiguousPartialNamesResolve) {
  EXPECT_EQ(find_gpu("h200").id, "H200-SXM-141GB");
  EXPECT_EQ(find_gpu("mi300").id, "MI300X");
  EXPECT_EQ(find_gpu("a100-pcie").id, "A100-PCIE-80GB");
  EXPECT_EQ(find_gpu("h100-pcie").id, "H100-PCIE-80GB");
  // Several match, and the family default is one of them.
  EXPECT_EQ(find_gpu("v100-pcie").id, "V100-PCIE-32GB");
  EXPECT_EQ(find_gpu("a100-sxm4").id, "A100-SXM4-40GB");
}

TEST(FindGpu, ExactIdsWinOverLongerIdsTheyBegin) {
  EXPECT_EQ(find_gpu("a10").id, "A10");  // not one of the A100s
}

// --- Name matching: what a user sees when it fails -------------------------

TEST(FindGpu, UnknownNameThrowsInputErrorNamingTheInputAndCloseMatches) {
  EXPECT_THROW(find_gpu("v1000"), InputError);
  std::string message = error_for("v1000");
  EXPECT_NE(message.find("unknown GPU 'v1000'"), std::string::npos) << message;
  EXPECT_NE(message.find("close matches: "), std::string::npos) << message;
  EXPECT_NE(message.find("V100-PCIE-32GB"), std::string::npos) << message;
  EXPECT_NE(message.find("V100-SXM2-32GB"), std::string::npos) << message;
  EXPECT_EQ(message.find("A100"), std::string::npos) << message;
  EXPECT_NE(message.find("gpemu devices"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
}

TEST(FindGpu, AmbiguousSizesAreSuggestedNotGuessed) {
  // Two catalogued cards are "V100 ... 32GB"; gpemu does not pick one.
  std::string message = error_for("V100 32GB");
  EXPECT_NE(message.find("'V100 32GB'"), std::string::npos) << message;
  EXPECT_NE(message.find("V100-PCIE-32GB, V100-SXM2-32GB"), std::string::npos) << message;
  EXPECT_NE(error_for("A100 80GB").find("A100-SXM4-80GB"), std::string::npos);
  EXPECT_NE(error_for("A100 80GB").find("A100-PCIE-80GB"), std::string::npos);
}

TEST(FindGpu, AmbiguousPartialNameListsTheCandidates) {
  std::string message = error_for("v100-sxm2");
  EXPECT_NE(message.find("ambiguous GPU 'v100-sxm2'"), std::string::npos) << message;
  EXPECT_NE(message.find("V100-SXM2-16GB, V100-SXM2-32GB"), std::string::npos) << message;
}

TEST(FindGpu, NothingCloseListsEveryGpu) {
  std::string message = error_for("potato");
  EXPECT_NE(message.find("unknown GPU 'potato'"), std::string::npos) << message;
  for (const GpuSpec& gpu : gpu_catalog()) {
    EXPECT_NE(message.find(gpu.id), std::string::npos) << gpu.id;
  }
}

TEST(FindGpu, EmptyAndPrefixOnlyNamesAreUnknown) {
  EXPECT_THROW(find_gpu(""), InputError);
  EXPECT_THROW(find_gpu("NVIDIA"), InputError);
  EXPECT_THROW(find_gpu("Tesla"), InputError);
}

TEST(TryFindGpu, ReturnsNullInsteadOfThrowing) {
  EXPECT_EQ(try_find_gpu("v1000"), nullptr);
  EXPECT_EQ(try_find_gpu("v100-sxm2"), nullptr);
  ASSERT_NE(try_find_gpu("t4"), nullptr);
  EXPECT_EQ(try_find_gpu("t4")->id, "T4");
  EXPECT_EQ(try_find_gpu("t4"), &find_gpu("T4"));  // the catalog's own entry
}

// --- Precisions --------------------------------------------------------------

TEST(Precision, ParsesTheDocumentedSpellingsInAnyCase) {
  EXPECT_EQ(parse_precision("fp32"), Precision::FP32);
  EXPECT_EQ(parse_precision("FP32"), Precision::FP32);
  EXPECT_EQ(parse_precision("tf32"), Precision::TF32);
  EXPECT_EQ(parse_precision("fp16"), Precision::FP16);
  EXPECT_EQ(parse_precision("Half"), Precision::FP16);
  EXPECT_EQ(parse_precision("bf16"), Precision::BF16);
  EXPECT_EQ(parse_precision("FP8"), Precision::FP8);
}

TEST(Precision, ParsesTorchDtypeNames) {
  EXPECT_EQ(parse_precision("float32"), Precision::FP32);
  EXPECT_EQ(parse_precision("float16"), Precision::FP16);
  EXPECT_EQ(parse_precision("bfloat16"), Precision::BF16);
}

TEST(Precision, RoundTripsThroughToString) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16, Precision::FP8}) {
    EXPECT_EQ(parse_precision(to_string(p)), p);
  }
  EXPECT_EQ(to_string(Precision::BF16), "bf16");
}

TEST(Precision, UnknownSpellingThrowsInputErrorListingTheAccepted) {
  EXPECT_THROW(parse_precision("fp64"), InputError);
  try {
    parse_precision("fp64");
  } catch (const InputError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("'fp64'"), std::string::npos) << message;
    EXPECT_NE(message.find("bf16"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace gpemu
