// FIFO: jobs in arrival order; a running job keeps its GPUs (no preemption),
// and a later job that fits starts when an earlier one does not (backfilling,
// as the simulator places in order). Blox schedulers/fifo_scheduling.py,
// Synergy schedulers/fifo_synergy_new.py.
#include <algorithm>

#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

class FifoPolicy final : public Policy {
 public:
  std::string name() const override { return "fifo"; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    const auto& jobs = *view.jobs;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (jobs[a].running != jobs[b].running) return jobs[a].running;
      return jobs[a].arrival_s < jobs[b].arrival_s;
    });
  }
};

}  // namespace

std::unique_ptr<Policy> make_fifo_policy() { return std::make_unique<FifoPolicy>(); }

}  // namespace gpemu::cluster
