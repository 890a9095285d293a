// mps: NVIDIA MPS. Kernels of several processes run at once on the SMs, each
// slowed by the busiest resource: max(1, sum of SM demands, sum of memory
// bandwidth demands) of the kernels in flight (KernelDemand; docs/sharing.md
// says what the model leaves out).
#include "device/policies/policies.h"

namespace gpemu::policies {
namespace {

class Mps final : public SharingPolicy {
 public:
  std::string_view name() const override { return "mps"; }
  std::optional<LinkShare> compute_share(const ShareOptions&) const override {
    LinkShare share;
    share.rule = ShareRule::Demand;
    return share;
  }
};

}  // namespace

std::shared_ptr<const SharingPolicy> mps() { return std::make_shared<Mps>(); }

}  // namespace gpemu::policies
