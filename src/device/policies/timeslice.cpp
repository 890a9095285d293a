// timeslice: the driver's time-slicing between processes (CUDA's default
// without MPS). The active processes share the GPU equally, and while two or
// more are active they lose switch / (quantum + switch) of it to context
// switches (a fluid model: exact when kernels are much longer than a quantum).
#include "device/policies/policies.h"

namespace gpemu::policies {
namespace {

class TimeSlice final : public SharingPolicy {
 public:
  std::string_view name() const override { return "timeslice"; }
  std::optional<LinkShare> compute_share(const ShareOptions& o) const override {
    LinkShare share;
    share.rule = ShareRule::TimeSlice;
    share.contended_efficiency = static_cast<double>(o.timeslice) / static_cast<double>(o.timeslice + o.switch_cost);
    return share;
  }
};

}  // namespace

std::shared_ptr<const SharingPolicy> timeslice() { return std::make_shared<TimeSlice>(); }

}  // namespace gpemu::policies
