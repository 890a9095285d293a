// Placement "pinned": a job starts at its arrival on the GPU it names (GPU 0
// when it names none), beside whatever runs there; the GPU's sharing policy
// divides it. `gpemu share` runs its jobs so.
#include "workload/placement/policies.h"

namespace gpemu {
namespace {

class Pinned final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "pinned"; }
  int place(const PlacementRequest& job, std::span<const GpuLoad>) const override { return job.gpu >= 0 ? job.gpu : 0; }
};

}  // namespace

std::shared_ptr<const PlacementPolicy> make_pinned_placement() { return std::make_shared<Pinned>(); }

}  // namespace gpemu
