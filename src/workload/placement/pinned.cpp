// Placement "pinned": a job starts at its arrival on the GPU it names (GPU 0
// when it names none; a job of N GPUs on the N from there), beside whatever
// runs there; the GPU's sharing policy divides it. `gpemu share` runs its
// jobs so, and `gpemu train` its one job.
#include "workload/placement/policies.h"

namespace gpemu {
namespace {

class Pinned final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "pinned"; }
  int place(const PlacementRequest& job, std::span<const GpuLoad>) const override { return job.gpu >= 0 ? job.gpu : 0; }
  // A job of several GPUs: the ones from the GPU it names on (the session
  // checked they are of one node).
  std::vector<int> place_gpus(const PlacementRequest& job, std::span<const GpuLoad> gpus) const override {
    std::vector<int> out;
    for (int g = place(job, gpus); static_cast<int>(out.size()) < job.gpus; ++g) out.push_back(g);
    return out;
  }
};

}  // namespace

std::shared_ptr<const PlacementPolicy> make_pinned_placement() { return std::make_shared<Pinned>(); }

}  // namespace gpemu
