// Placement "first-fit": a GPU to each job alone, the lowest-numbered free one
// (the one it names, when it names one), to the queued jobs in the order they
// were queued; a job that does not fit waits and the ones behind it may go
// (a cluster's FIFO scheduler with backfilling of jobs that name a GPU). A
// job of N GPUs gets N free ones of one node (free_gpus_of_one_node).
#include "workload/placement/policies.h"

namespace gpemu {
namespace {

class FirstFit final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "first-fit"; }
  int place(const PlacementRequest& job, std::span<const GpuLoad> gpus) const override {
    if (job.gpu >= 0) return gpus[static_cast<std::size_t>(job.gpu)].jobs == 0 ? job.gpu : -1;
    for (const GpuLoad& g : gpus)
      if (g.jobs == 0) return g.index;
    return -1;
  }
};

}  // namespace

std::shared_ptr<const PlacementPolicy> make_first_fit_placement() { return std::make_shared<FirstFit>(); }

}  // namespace gpemu
