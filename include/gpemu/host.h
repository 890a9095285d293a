// Host profiles: what the host side of a training step costs on one machine
// with one software stack, independent of the GPU.
//
// A CUDA training step is issued by the host: Python calls a module, the
// dispatcher picks a kernel, the CUDA runtime launches it; autograd's C++
// engine issues the backward kernels; the optimizer issues its update. How
// long that takes per op is a property of the CPU and of the PyTorch version
// and mode (eager), not of the GPU, so it lives here and not in the GPU
// family's factors (cost_model.h, FamilyFactors). The analytical model runs
// the host's issue times against the GPU's kernel times (a phase is host- or
// GPU-bound, docs/analytical-model.md); a HostProfile supplies the former.
//
// Where profiles come from (docs/host.md):
//  - "h200-2026": the 16-core host of the NVIDIA H200 measured for this
//    project with PyTorch 2.11 (shared/reference/measured/h200-2026-12-04/),
//    fitted by `gpemu calibrate --fit-step-times` and stored in the
//    calibration file; the default host ("modern").
//  - "gpemu-2022-<family>": the hosts of GPEmu's 2022 profiles (PyTorch 1.x),
//    the launch factors fitted per GPU family on those profiles.
//  - a JSON file written by `gpemu bench host` (this machine's own dispatch
//    cost per op, CPU only, plus what a CUDA launch adds).
//
// Thread safety: plain values.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpemu {

inline constexpr std::string_view kHostProfileFormat = "gpemu-host/1";

struct HostProfile {
  std::string name;         // "h200-2026", "gpemu-2022-volta", or the file's own name
  std::string description;  // for people: CPU, cores, PyTorch version, mode
  std::string source;       // how it was measured or fitted, with the rows it was fitted on
  std::string torch = "2";  // the PyTorch major.minor the costs describe ("2.11", "1.x")
  // Host time per op issued (microseconds), per section of a step:
  double forward_us = 49;    // a forward or loss kernel: Python module call + dispatcher + launch
  double backward_us = 4;    // an autograd backward kernel (the C++ engine's issue)
  double optimizer_us = 28;  // an optimizer or zero_grad kernel of a per-parameter (for-loop) optimizer
  double foreach_us = 28;    // one call of a foreach (multi-tensor) optimizer, over every parameter
  double view_us = 3;        // a view op (dispatcher only, no kernel)
  // What a sync point costs the host after the GPU has drained
  // (cudaStreamSynchronize / a value read back: .item(), GradScaler's inf check).
  double sync_us = 20;
  // How many launched kernels CUDA queues before a launch blocks the host.
  int launch_queue_depth = 1024;
  bool operator==(const HostProfile&) const = default;
};

// The documented default host ("h200-2026" of the product's calibration, or
// built-in values of that host when the calibration file lacks it).
inline constexpr std::string_view kDefaultHost = "h200-2026";

// Reads a host profile file (kHostProfileFormat). Throws InputError naming
// the file and the field for malformed input.
HostProfile read_host_profile(const std::filesystem::path& file);
// Writes it atomically (temporary file and rename).
void write_host_profile(const HostProfile& host, const std::filesystem::path& file);

}  // namespace gpemu
