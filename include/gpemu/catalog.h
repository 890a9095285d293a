// GPU catalog: the specifications of the GPUs gpemu can emulate, each with the
// datasheet it was taken from. Names are matched forgivingly: "v100",
// "Tesla_V100-PCIE-32GB" and "V100-PCIE-32GB" all resolve; an unknown name
// raises InputError listing the close matches.
//
// Thread safety: the catalog is immutable after first use; all functions are
// safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpemu {

enum class Precision { FP32, TF32, FP16, BF16, FP8 };

std::string_view to_string(Precision p);
// Accepts "fp32", "tf32", "fp16", "half", "bf16", "fp8" (any case), and the torch
// dtype names "float32", "float", "float16", "bfloat16"; InputError otherwise.
Precision parse_precision(std::string_view s);

struct GpuSpec {
  std::string id;            // canonical id, e.g. "V100-PCIE-32GB"
  std::string name;          // marketing name, e.g. "NVIDIA Tesla V100 PCIe 32 GB"
  std::string vendor;        // "NVIDIA" or "AMD"
  std::string architecture;  // "Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper",
                             // "Blackwell", "CDNA3"
  // The die, e.g. "GV100", "GA100", "GA102": cards of one architecture on
  // different dies (A100's GA100, A10's GA102) are different machines, and a
  // calibration on one die says nothing in-sample about another.
  std::string chip;
  int year = 0;                    // launch year
  std::uint64_t memory_bytes = 0;  // device memory capacity: the marketed "GB" taken as GiB (docs/catalog.md)
  // What the driver reports as the card's total memory: cudaMemGetInfo()'s
  // total, torch.cuda.get_device_properties().total_memory, the "total
  // capacity" of PyTorch's out-of-memory message. It is memory_bytes less the
  // driver's reservation and, on GDDR cards with ECC on (the data-centre
  // default), the 1/16 that ECC takes. The CUDA context comes out of it
  // (docs/zoo-memory.md, "Out-of-memory points"). 0 = not known: use memory_bytes.
  std::uint64_t reported_memory_bytes = 0;
  double memory_bandwidth_gbs = 0;  // GB/s (1e9 bytes/s), peak
  // Peak dense FLOP/s in TFLOP/s (1e12) per precision; 0 means the card has no
  // such mode (e.g. no TF32 before Ampere). Tensor-core figures, without sparsity.
  double fp32_tflops = 0;
  double tf32_tflops = 0;
  double fp16_tflops = 0;
  double bf16_tflops = 0;
  double fp8_tflops = 0;
  int sm_count = 0;  // SMs (NVIDIA) or CUs (AMD)
  int pcie_gen = 3;  // host interface generation
  int pcie_lanes = 16;
  double nvlink_gbs = 0;  // total NVLink / Infinity Fabric bandwidth per GPU, GB/s, both directions summed; 0 = none
  std::vector<std::string> aliases;  // extra names that resolve to this GPU (GPEmu directory names among them)
  std::string source;                // where the figures come from (datasheet title and/or URL)

  // Peak TFLOP/s at a precision; nullopt when the card has no such mode.
  std::optional<double> peak_tflops(Precision p) const;
  // reported_memory_bytes, or memory_bytes where that is not known.
  std::uint64_t reported_memory() const { return reported_memory_bytes ? reported_memory_bytes : memory_bytes; }
};

// All catalogued GPUs, oldest first.
const std::vector<GpuSpec>& gpu_catalog();

// Resolves a name forgivingly (see top of file). Throws InputError naming the
// input and the closest catalogued names.
const GpuSpec& find_gpu(std::string_view name);

// As find_gpu, but returns nullptr instead of throwing.
const GpuSpec* try_find_gpu(std::string_view name);

}  // namespace gpemu
