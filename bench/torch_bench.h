// `gpemu bench torch`: the torch backend (docs/torch.md) measured side by side
// with `gpemu predict`, in one run.
//
// It runs bench/torch_bench.py (torchvision resnet50 with SGD, pinned batches,
// loss.item() every iteration) under `gpemu torch --model resnet50` four
// times: a V100 at batch 64 and an H100 at batch 8 (launch-bound: small
// kernels on a fast GPU), each under the virtual and the real clock. It
// prints, per run, the emulated forward, backward + step and iteration times
// against predict()'s for the same GPU, model and batch, the wall time per
// iteration and its ratio to the emulated time, and the emulator's own cost
// per op; then the virtual-vs-real difference of the emulated iteration per
// GPU. The targets (issue 11): <= 10 us per op, an iteration issued in
// <= 15 % of its emulated V100 time, the launch-bound H100 run within 15 % of
// predict under the real clock, virtual and real within 0.5 %.
//
// Needs the torch backend (libtorch-dev at build time); reports why when it
// cannot run. The real-clock runs are only as faithful as the machine is
// idle: a busy CPU delays the host's pacing.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace gpemu {

struct TorchBenchOptions {
  int iters = 5;   // measured iterations per run
  int warmup = 2;  // iterations before them
  static TorchBenchOptions quick() { return {3, 1}; }
};

nlohmann::json run_torch_bench(const TorchBenchOptions& options);
void print_torch_bench(const nlohmann::json& result, std::ostream& os);

}  // namespace gpemu
