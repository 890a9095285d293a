// SRTF: shortest remaining time first, preemptive: each round the jobs with
// the least remaining time (its remaining iterations at its speed on the GPUs
// it asks) come first; ties by arrival. Synergy schedulers/srtf_synergy_new.py
// sorts by remaining time the same way.
#include <algorithm>

#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

class SrtfPolicy final : public Policy {
 public:
  std::string name() const override { return "srtf"; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    const auto& jobs = *view.jobs;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (jobs[a].remaining_s != jobs[b].remaining_s) return jobs[a].remaining_s < jobs[b].remaining_s;
      return jobs[a].arrival_s < jobs[b].arrival_s;
    });
  }
};

}  // namespace

std::unique_ptr<Policy> make_srtf_policy() { return std::make_unique<SrtfPolicy>(); }

}  // namespace gpemu::cluster
