// priority: stream / process priorities. When a kernel ends the GPU runs the
// highest-priority ready kernel (the first ready among equals); a running
// kernel is never preempted.
#include "device/policies/policies.h"

namespace gpemu::policies {
namespace {

class Priority final : public SharingPolicy {
 public:
  std::string_view name() const override { return "priority"; }
  std::optional<LinkShare> compute_share(const ShareOptions&) const override {
    LinkShare share;
    share.rule = ShareRule::Priority;
    return share;
  }
};

}  // namespace

std::shared_ptr<const SharingPolicy> priority() { return std::make_shared<Priority>(); }

}  // namespace gpemu::policies
