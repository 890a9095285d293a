// fifo: GPEmu's sharing manager. One process's iteration at a time, in the
// order asked: a step holds the GPU from its first kernel to its last, and
// steps go in the order their first kernels were issued; kernels keep their
// costs.
#include "device/policies/policies.h"

namespace gpemu::policies {
namespace {

class Fifo final : public SharingPolicy {
 public:
  std::string_view name() const override { return "fifo"; }
  bool exclusive_steps() const override { return true; }
};

}  // namespace

std::shared_ptr<const SharingPolicy> fifo() { return std::make_shared<Fifo>(); }

}  // namespace gpemu::policies
