// mig: Multi-Instance GPU. Each process on a fixed slice of the card's MIG
// profiles (device.h, mig_profiles) with its own SMs, memory and bandwidth:
// no interference in compute; a kernel slowed by the slice's share of what
// bounds it.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "device/policies/policies.h"
#include "gpemu/error.h"

namespace gpemu::policies {
namespace {

class Mig final : public SharingPolicy {
 public:
  std::string_view name() const override { return "mig"; }
  void check(const GpuSpec& gpu, const ShareOptions&) const override {
    if (mig_profiles(gpu).empty())
      throw InputError(
          fmt::format("sharing policy mig: {} has no MIG; cards with MIG: A100, H100, GH200, H200, B200", gpu.id));
  }
  bool slices() const override { return true; }
  // A slice has 1/7 of the SMs and 1/8 of the memory bandwidth per unit: the
  // kernel slows by its busier resource's shortfall (docs/sharing.md).
  Duration kernel_on_slice(Duration alone, KernelDemand demand, const MigProfile& slice) const override {
    const double slow =
        std::max({1.0, demand.sm * 7.0 / slice.compute_sevenths, demand.bw * 8.0 / slice.memory_eighths});
    return std::llround(static_cast<double>(alone) * slow);
  }
};

}  // namespace

std::shared_ptr<const SharingPolicy> mig() { return std::make_shared<Mig>(); }

}  // namespace gpemu::policies
