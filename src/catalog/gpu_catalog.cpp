// The catalogued GPUs and their datasheet figures. docs/catalog.md is the
// readable copy of this table and lists the figures that are uncertain.
//
// Conventions every entry follows (so the cost and device layers can compare
// cards without special cases):
//  - memory_bytes: the datasheet's "GB" taken as GiB. GPU memory is built in
//    binary sizes (a "32 GB" V100 reports 32,510 MiB in nvidia-smi: 32 GiB less
//    the driver's reservation), so GiB is the size of the chips.
//  - reported_memory_bytes: what the driver reports as total (cudaMemGetInfo,
//    PyTorch's "total capacity"), from nvidia-smi listings and PyTorch
//    out-of-memory messages: memory_bytes less the driver's reservation (0.6%
//    on a V100-32GB, 1% on an A100-40GB) and, on GDDR cards with ECC on, the
//    1/16 ECC takes (a 12 GB M40 reports 11,448 MiB). It varies by a few
//    hundred MiB with the driver; entries marked "estimate" are inferred from
//    cards of the same memory type.
//  - bandwidth: the datasheet's peak, GB/s (1e9 bytes/s).
//  - TFLOP/s: dense peaks at boost clock. Where the datasheet quotes only "with
//    sparsity" figures (Ampere and later) the dense figure is half of it. FP16,
//    BF16, TF32 and FP8 are tensor-core (matrix-core) rates where the card has
//    them; P100 has no tensor cores, so its FP16 is the packed-FP16 vector rate.
//    0 = no native mode: Kepler and Maxwell do FP16 arithmetic at their FP32
//    rate at best, no TF32/BF16 before Ampere, no FP8 before Ada/Hopper/CDNA3.
//  - nvlink_gbs: all links of one GPU, both directions summed; PCIe cards with an
//    NVLink bridge carry the bridge's figure.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "catalog/gpu_json.h"
#include "gpemu/catalog.h"

namespace gpemu {
namespace {

constexpr std::uint64_t GiB(std::uint64_t n) { return n << 30; }
constexpr std::uint64_t MiB(std::uint64_t n) { return n << 20; }

std::vector<GpuSpec> build_catalog() {
  std::vector<GpuSpec> gpus = {
      // A K80 board carries two GK210 dies that the host sees as two GPUs;
      // GPEmu's K80 profiles are one die, so this entry is one die: half the
      // board's 24 GB, 480 GB/s and 8.73 TFLOP/s (boost), 13 of 26 SMX.
      {.id = "K80",
       .name = "NVIDIA Tesla K80 (one GK210 die of the dual-GPU board)",
       .vendor = "NVIDIA",
       .architecture = "Kepler",
       .chip = "GK210",
       .year = 2014,
       .memory_bytes = GiB(12),
       .reported_memory_bytes = MiB(11441),  // nvidia-smi 11441 MiB per die, ECC on; PyTorch "11.17 GiB total capacity"
       .memory_bandwidth_gbs = 240,
       .fp32_tflops = 4.37,
       .sm_count = 13,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .aliases = {"Tesla_K80", "Tesla K80", "GK210"},
       .source = "NVIDIA Tesla K80 GPU Accelerator datasheet (2014): board figures 24 GB GDDR5, "
                 "480 GB/s, 8.73 TFLOP/s FP32 with GPU Boost, 4992 CUDA cores; halved per die"},

      // GPEmu's "Tesla_M40" directory is the 12 GB card: ResNet-50 stops at
      // batch 124 with 10.6 GB allocated (reference/gpemu-profiles memory
      // tables), which a 24 GB card would hold twice over.
      {.id = "M40",
       .name = "NVIDIA Tesla M40 12 GB",
       .vendor = "NVIDIA",
       .architecture = "Maxwell",
       .chip = "GM200",
       .year = 2015,
       .memory_bytes = GiB(12),
       .reported_memory_bytes = MiB(11448),  // nvidia-smi 11448 MiB with ECC on (12215 MiB with ECC off)
       .memory_bandwidth_gbs = 288,
       .fp32_tflops = 7.0,
       .sm_count = 24,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .aliases = {"Tesla_M40", "Tesla M40", "M40-12GB"},
       .source = "NVIDIA Tesla M40 GPU Accelerator datasheet (2015): 12 GB GDDR5, 288 GB/s, 7 TFLOP/s FP32"},

      {.id = "M40-24GB",
       .name = "NVIDIA Tesla M40 24 GB",
       .vendor = "NVIDIA",
       .architecture = "Maxwell",
       .chip = "GM200",
       .year = 2016,
       .memory_bytes = GiB(24),
       .reported_memory_bytes = MiB(22945),  // nvidia-smi 22945 MiB with ECC on
       .memory_bandwidth_gbs = 288,
       .fp32_tflops = 7.0,
       .sm_count = 24,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .aliases = {"Tesla M40 24GB"},
       .source = "NVIDIA Tesla M40 24GB GPU Accelerator datasheet (2016)"},

      {.id = "P100-PCIE-16GB",
       .name = "NVIDIA Tesla P100 PCIe 16 GB",
       .vendor = "NVIDIA",
       .architecture = "Pascal",
       .chip = "GP100",
       .year = 2016,
       .memory_bytes = GiB(16),
       .reported_memory_bytes = MiB(16280),  // PyTorch "15.90 GiB total capacity"
       .memory_bandwidth_gbs = 732,
       .fp32_tflops = 9.3,
       .fp16_tflops = 18.7,
       .sm_count = 56,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .aliases = {"Tesla_P100-PCIE-16GB", "Tesla P100-PCIE-16GB", "P100 PCIe 16GB"},
       .source = "NVIDIA Tesla P100 PCIe datasheet (2016)"},

      {.id = "V100-PCIE-16GB",
       .name = "NVIDIA Tesla V100 PCIe 16 GB",
       .vendor = "NVIDIA",
       .architecture = "Volta",
       .chip = "GV100",
       .year = 2017,
       .memory_bytes = GiB(16),
       .reported_memory_bytes = MiB(16160),  // PyTorch "15.78 GiB total capacity"
       .memory_bandwidth_gbs = 900,
       .fp32_tflops = 14.0,
       .fp16_tflops = 112,
       .sm_count = 80,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .aliases = {"Tesla_V100-PCIE-16GB", "Tesla V100-PCIE-16GB"},
       .source = "NVIDIA Tesla V100 GPU Accelerator datasheet (2018), PCIe column"},

      {.id = "V100-SXM2-16GB",
       .name = "NVIDIA Tesla V100 SXM2 16 GB",
       .vendor = "NVIDIA",
       .architecture = "Volta",
       .chip = "GV100",
       .year = 2017,
       .memory_bytes = GiB(16),
       .reported_memory_bytes = MiB(16160),  // PyTorch "15.78 GiB total capacity"
       .memory_bandwidth_gbs = 900,
       .fp32_tflops = 15.7,
       .fp16_tflops = 125,
       .sm_count = 80,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .nvlink_gbs = 300,
       .aliases = {"Tesla_V100-SXM2-16GB", "Tesla V100-SXM2-16GB"},
       .source = "NVIDIA Tesla V100 GPU Accelerator datasheet (2018), SXM2 column"},

      {.id = "V100-PCIE-32GB",
       .name = "NVIDIA Tesla V100 PCIe 32 GB",
       .vendor = "NVIDIA",
       .architecture = "Volta",
       .chip = "GV100",
       .year = 2018,
       .memory_bytes = GiB(32),
       .reported_memory_bytes = MiB(32510),  // PyTorch "31.75 GiB total capacity"
       .memory_bandwidth_gbs = 900,
       .fp32_tflops = 14.0,
       .fp16_tflops = 112,
       .sm_count = 80,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .aliases = {"Tesla_V100-PCIE-32GB", "Tesla V100-PCIE-32GB"},
       .source = "NVIDIA Tesla V100 GPU Accelerator datasheet (2018), PCIe column"},

      {.id = "V100-SXM2-32GB",
       .name = "NVIDIA Tesla V100 SXM2 32 GB",
       .vendor = "NVIDIA",
       .architecture = "Volta",
       .chip = "GV100",
       .year = 2018,
       .memory_bytes = GiB(32),
       .reported_memory_bytes = MiB(32510),  // PyTorch "31.75 GiB total capacity"
       .memory_bandwidth_gbs = 900,
       .fp32_tflops = 15.7,
       .fp16_tflops = 125,
       .sm_count = 80,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .nvlink_gbs = 300,
       .aliases = {"Tesla_V100-SXM2-32GB", "Tesla V100-SXM2-32GB"},
       .source = "NVIDIA Tesla V100 GPU Accelerator datasheet (2018), SXM2 column"},

      // FP16 is the Quadro's full-rate FP16-with-FP32-accumulate tensor figure
      // (GeForce TU102 cards run that at half rate).
      {.id = "RTX6000",
       .name = "NVIDIA Quadro RTX 6000",
       .vendor = "NVIDIA",
       .architecture = "Turing",
       .chip = "TU102",
       .year = 2018,
       .memory_bytes = GiB(24),
       .reported_memory_bytes = MiB(24218),  // PyTorch "23.65 GiB total capacity" (24 GB Turing, ECC off)
       .memory_bandwidth_gbs = 672,
       .fp32_tflops = 16.3,
       .fp16_tflops = 130.5,
       .sm_count = 72,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .nvlink_gbs = 100,
       .aliases = {"Quadro_RTX_6000", "Quadro RTX 6000", "RTX-6000"},
       .source = "NVIDIA Quadro RTX 6000 datasheet (2018)"},

      {.id = "T4",
       .name = "NVIDIA T4",
       .vendor = "NVIDIA",
       .architecture = "Turing",
       .chip = "TU104",
       .year = 2018,
       .memory_bytes = GiB(16),
       // PyTorch "14.75 GiB total capacity" (ECC on; newer drivers report ~14.56 GiB).
       .reported_memory_bytes = MiB(15104),
       .memory_bandwidth_gbs = 320,
       .fp32_tflops = 8.1,
       .fp16_tflops = 65,
       .sm_count = 40,
       .pcie_gen = 3,
       .pcie_lanes = 16,
       .aliases = {"Tesla_T4", "Tesla T4", "NVIDIA T4"},
       .source = "NVIDIA T4 Tensor Core GPU datasheet (2019)"},

      {.id = "A100-SXM4-40GB",
       .name = "NVIDIA A100 SXM4 40 GB",
       .vendor = "NVIDIA",
       .architecture = "Ampere",
       .chip = "GA100",
       .year = 2020,
       .memory_bytes = GiB(40),
       .reported_memory_bytes = MiB(40536),  // PyTorch "39.59 GiB total capacity"
       .memory_bandwidth_gbs = 1555,
       .fp32_tflops = 19.5,
       .tf32_tflops = 156,
       .fp16_tflops = 312,
       .bf16_tflops = 312,
       .sm_count = 108,
       .pcie_gen = 4,
       .pcie_lanes = 16,
       .nvlink_gbs = 600,
       .aliases = {"NVIDIA_A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"},
       .source = "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 40GB SXM column"},

      // NVLink: the datasheet's 2-GPU NVLink bridge. The 250 W PCIe card has
      // the SXM4 card's peaks at boost clock (it sustains lower clocks under load).
      {.id = "A100-PCIE-40GB",
       .name = "NVIDIA A100 PCIe 40 GB",
       .vendor = "NVIDIA",
       .architecture = "Ampere",
       .chip = "GA100",
       .year = 2020,
       .memory_bytes = GiB(40),
       .reported_memory_bytes = MiB(40536),  // estimate: as the SXM4 40 GB card, PyTorch "39.59 GiB total capacity"
       .memory_bandwidth_gbs = 1555,
       .fp32_tflops = 19.5,
       .tf32_tflops = 156,
       .fp16_tflops = 312,
       .bf16_tflops = 312,
       .sm_count = 108,
       .pcie_gen = 4,
       .pcie_lanes = 16,
       .nvlink_gbs = 600,
       .aliases = {"NVIDIA_A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB", "A100-PCIE-40G"},
       .source = "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 40GB PCIe column"},

      {.id = "A100-SXM4-80GB",
       .name = "NVIDIA A100 SXM4 80 GB",
       .vendor = "NVIDIA",
       .architecture = "Ampere",
       .chip = "GA100",
       .year = 2020,
       .memory_bytes = GiB(80),
       .reported_memory_bytes = MiB(81254),  // PyTorch "79.35 GiB total capacity" (79.15-79.35 GiB by driver)
       .memory_bandwidth_gbs = 2039,
       .fp32_tflops = 19.5,
       .tf32_tflops = 156,
       .fp16_tflops = 312,
       .bf16_tflops = 312,
       .sm_count = 108,
       .pcie_gen = 4,
       .pcie_lanes = 16,
       .nvlink_gbs = 600,
       .aliases = {"NVIDIA_A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"},
       .source = "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM column"},

      {.id = "A10",
       .name = "NVIDIA A10",
       .vendor = "NVIDIA",
       .architecture = "Ampere",
       .chip = "GA102",
       .year = 2021,
       .memory_bytes = GiB(24),
       // Estimate: PyTorch reports 22.03-22.15 GiB on 24 GB Ampere/Ada GDDR6 cards with ECC on.
       .reported_memory_bytes = MiB(22589),
       .memory_bandwidth_gbs = 600,
       .fp32_tflops = 31.2,
       .tf32_tflops = 62.5,
       .fp16_tflops = 125,
       .bf16_tflops = 125,
       .sm_count = 72,
       .pcie_gen = 4,
       .pcie_lanes = 16,
       .aliases = {"NVIDIA_A10", "NVIDIA A10"},
       .source = "NVIDIA A10 Tensor Core GPU datasheet (2021)"},

      // NVLink: the datasheet's 2-GPU NVLink bridge.
      {.id = "A100-PCIE-80GB",
       .name = "NVIDIA A100 PCIe 80 GB",
       .vendor = "NVIDIA",
       .architecture = "Ampere",
       .chip = "GA100",
       .year = 2021,
       .memory_bytes = GiB(80),
       // Estimate: PyTorch "79.15 GiB total capacity" (79.15-79.35 GiB by driver).
       .reported_memory_bytes = MiB(81050),
       .memory_bandwidth_gbs = 1935,
       .fp32_tflops = 19.5,
       .tf32_tflops = 156,
       .fp16_tflops = 312,
       .bf16_tflops = 312,
       .sm_count = 108,
       .pcie_gen = 4,
       .pcie_lanes = 16,
       .nvlink_gbs = 600,
       .aliases = {"NVIDIA_A100_80GB_PCIe", "NVIDIA A100 80GB PCIe", "A100-PCIE"},
       .source = "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB PCIe column"},

      {.id = "H100-SXM5-80GB",
       .name = "NVIDIA H100 SXM5 80 GB",
       .vendor = "NVIDIA",
       .architecture = "Hopper",
       .chip = "GH100",
       .year = 2022,
       .memory_bytes = GiB(80),
       .reported_memory_bytes = MiB(81050),  // PyTorch "79.15 GiB total capacity" (79.11-79.25 GiB by driver)
       .memory_bandwidth_gbs = 3350,
       .fp32_tflops = 67,
       .tf32_tflops = 494.5,
       .fp16_tflops = 989.5,
       .bf16_tflops = 989.5,
       .fp8_tflops = 1979,
       .sm_count = 132,
       .pcie_gen = 5,
       .pcie_lanes = 16,
       .nvlink_gbs = 900,
       .aliases = {"NVIDIA_H100_80GB_HBM3", "NVIDIA H100 80GB HBM3", "H100-SXM"},
       .source = "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column; SM count "
                 "from the NVIDIA H100 Tensor Core GPU Architecture whitepaper"},

      // NVLink: the datasheet's 2-GPU NVLink bridge.
      {.id = "H100-PCIE-80GB",
       .name = "NVIDIA H100 PCIe 80 GB",
       .vendor = "NVIDIA",
       .architecture = "Hopper",
       .chip = "GH100",
       .year = 2022,
       .memory_bytes = GiB(80),
       .reported_memory_bytes = MiB(81050),  // estimate: as the SXM5 card, PyTorch "79.15 GiB total capacity"
       .memory_bandwidth_gbs = 2000,
       .fp32_tflops = 51,
       .tf32_tflops = 378,
       .fp16_tflops = 756.5,
       .bf16_tflops = 756.5,
       .fp8_tflops = 1513,
       .sm_count = 114,
       .pcie_gen = 5,
       .pcie_lanes = 16,
       .nvlink_gbs = 600,
       .aliases = {"NVIDIA_H100_PCIe", "NVIDIA H100 PCIe", "H100-PCIE"},
       .source = "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 PCIe column; SM count "
                 "from the NVIDIA H100 Tensor Core GPU Architecture whitepaper"},

      {.id = "L4",
       .name = "NVIDIA L4",
       .vendor = "NVIDIA",
       .architecture = "Ada",
       .chip = "AD104",
       .year = 2023,
       .memory_bytes = GiB(24),
       .reported_memory_bytes = MiB(22559),  // PyTorch "22.03 GiB total capacity" (ECC on)
       .memory_bandwidth_gbs = 300,
       .fp32_tflops = 30.3,
       .tf32_tflops = 60,
       .fp16_tflops = 121,
       .bf16_tflops = 121,
       .fp8_tflops = 242.5,
       .sm_count = 58,
       .pcie_gen = 4,
       .pcie_lanes = 16,
       .aliases = {"NVIDIA_L4", "NVIDIA L4"},
       .source = "NVIDIA L4 Tensor Core GPU datasheet (2023)"},

      // FP32 is the packed (dual-issue) vector rate AMD quotes; unpacked FP32 is
      // half of it. Matrix rates are dense. Link figure: 7 Infinity Fabric links
      // x 128 GB/s.
      {.id = "MI300X",
       .name = "AMD Instinct MI300X",
       .vendor = "AMD",
       .architecture = "CDNA3",
       .chip = "Aqua Vanjaram (MI300X)",
       .year = 2023,
       .memory_bytes = GiB(192),
       .reported_memory_bytes = MiB(196588),  // PyTorch (ROCm) "191.98 GiB total capacity"
       .memory_bandwidth_gbs = 5300,
       .fp32_tflops = 163.4,
       .tf32_tflops = 653.7,
       .fp16_tflops = 1307.4,
       .bf16_tflops = 1307.4,
       .fp8_tflops = 2614.9,
       .sm_count = 304,
       .pcie_gen = 5,
       .pcie_lanes = 16,
       .nvlink_gbs = 896,
       .aliases = {"AMD_Instinct_MI300X", "AMD Instinct MI300X", "MI300X-OAM"},
       .source = "AMD Instinct MI300X accelerator data sheet (2023)"},

      // The Hopper GPU of a GH200 Grace Hopper Superchip with 96 GB HBM3 (the
      // 144 GB HBM3e version has 4.9 TB/s). The GPU reaches the Grace CPU's
      // memory over NVLink-C2C (900 GB/s), not PCIe; pcie_gen/lanes describe
      // the superchip's PCIe Gen5 x16 links, which gpemu's host-copy model uses.
      {.id = "GH200-96GB",
       .name = "NVIDIA GH200 Grace Hopper Superchip (96 GB HBM3)",
       .vendor = "NVIDIA",
       .architecture = "Hopper",
       .chip = "GH100",
       .year = 2023,
       .memory_bytes = GiB(96),
       // Estimate: 96 GiB less the H100's driver reservation (~870 MiB).
       .reported_memory_bytes = MiB(97434),
       .memory_bandwidth_gbs = 4000,
       .fp32_tflops = 67,
       .tf32_tflops = 494.5,
       .fp16_tflops = 989.5,
       .bf16_tflops = 989.5,
       .fp8_tflops = 1979,
       .sm_count = 132,
       .pcie_gen = 5,
       .pcie_lanes = 16,
       .nvlink_gbs = 900,
       .aliases = {"GH200", "NVIDIA_GH200_480GB", "NVIDIA GH200 480GB", "GH200-480GB"},
       .source = "NVIDIA GH200 Grace Hopper Superchip datasheet (2023), 96 GB HBM3 column; dense (half of "
                 "the with-sparsity) tensor-core figures"},

      {.id = "H200-SXM-141GB",
       .name = "NVIDIA H200 SXM 141 GB",
       .vendor = "NVIDIA",
       .architecture = "Hopper",
       .chip = "GH100",
       .year = 2024,
       .memory_bytes = GiB(141),
       .reported_memory_bytes = MiB(143155),  // PyTorch "139.80 GiB total capacity"
       .memory_bandwidth_gbs = 4800,
       .fp32_tflops = 67,
       .tf32_tflops = 494.5,
       .fp16_tflops = 989.5,
       .bf16_tflops = 989.5,
       .fp8_tflops = 1979,
       .sm_count = 132,
       .pcie_gen = 5,
       .pcie_lanes = 16,
       .nvlink_gbs = 900,
       .aliases = {"NVIDIA_H200", "NVIDIA H200", "H200", "H200-SXM"},
       .source = "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column"},

      // The B200 of an HGX/DGX B200 board at 1000 W (the B200 in a GB200
      // superchip runs at 1200 W and higher clocks). 180 GB of the package's
      // 192 GB are enabled; the SM count is what CUDA reports, not a datasheet
      // figure. The GPU has a PCIe Gen6 interface, but HGX B200 hosts run Gen5.
      {.id = "B200",
       .name = "NVIDIA B200 (HGX/DGX B200)",
       .vendor = "NVIDIA",
       .architecture = "Blackwell",
       .chip = "GB100",
       .year = 2024,
       .memory_bytes = GiB(180),
       .reported_memory_bytes = MiB(182630),  // PyTorch "178.35 GiB total capacity"
       .memory_bandwidth_gbs = 8000,
       .fp32_tflops = 80,
       .tf32_tflops = 1100,
       .fp16_tflops = 2250,
       .bf16_tflops = 2250,
       .fp8_tflops = 4500,
       .sm_count = 148,
       .pcie_gen = 5,
       .pcie_lanes = 16,
       .nvlink_gbs = 1800,
       .aliases = {"NVIDIA_B200", "NVIDIA B200", "B200-SXM"},
       .source = "NVIDIA Blackwell architecture technical brief (2024), HGX B200 per-GPU "
                 "figures; NVIDIA DGX B200 datasheet (2024) for memory and bandwidth, 8-GPU "
                 "totals divided by 8"},
  };
  // Oldest first is the contract; sorting here keeps it true whatever order
  // entries are added in, and a stable sort keeps the written order within a year.
  std::stable_sort(gpus.begin(), gpus.end(), [](const GpuSpec& a, const GpuSpec& b) { return a.year < b.year; });
  return gpus;
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> catalog = build_catalog();
  return catalog;
}

std::optional<double> GpuSpec::peak_tflops(Precision p) const {
  double tflops = 0;
  switch (p) {
    case Precision::FP32: tflops = fp32_tflops; break;
    case Precision::TF32: tflops = tf32_tflops; break;
    case Precision::FP16: tflops = fp16_tflops; break;
    case Precision::BF16: tflops = bf16_tflops; break;
    case Precision::FP8: tflops = fp8_tflops; break;
  }
  if (tflops <= 0) return std::nullopt;
  return tflops;
}

nlohmann::json gpu_json(const GpuSpec& g) {
  return {{"id", g.id},
          {"name", g.name},
          {"vendor", g.vendor},
          {"architecture", g.architecture},
          {"chip", g.chip},
          {"year", g.year},
          {"memory_bytes", g.memory_bytes},
          {"memory_gib", static_cast<double>(g.memory_bytes) / (1ull << 30)},
          {"reported_memory_bytes", g.reported_memory()},
          {"memory_bandwidth_gbs", g.memory_bandwidth_gbs},
          {"fp32_tflops", g.fp32_tflops},
          {"tf32_tflops", g.tf32_tflops},
          {"fp16_tflops", g.fp16_tflops},
          {"bf16_tflops", g.bf16_tflops},
          {"fp8_tflops", g.fp8_tflops},
          {"sm_count", g.sm_count},
          {"pcie_gen", g.pcie_gen},
          {"pcie_lanes", g.pcie_lanes},
          {"nvlink_gbs", g.nvlink_gbs},
          {"aliases", g.aliases},
          {"source", g.source}};
}

}  // namespace gpemu
