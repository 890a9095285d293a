// Max-min fairness as Gavel defines it (Narayanan et al., OSDI 2020, §4.1;
// stanford-futuredata/gavel scheduler/policies/max_min_fairness.py,
// MaxMinFairnessPolicy, read, not copied): the allocation X maximises the
// least share scale_m * X_m over the active jobs (scale: the job's GPUs;
// X_m: the fraction of time it runs, at most 1), subject to sum scale_m * X_m
// <= GPUs. The policy's GPUs are one pool (Gavel's heterogeneity-agnostic
// form, throughputs taken as 1); its solution with every job at its least
// is water-filling: X_m = min(1, t / scale_m), t filling the GPUs.
// Gavel's round mechanism turns X into rounds: priority = X_m / the fraction
// of the time since the allocation last changed that the job has run (X_m x
// 1e9 if it has not run), highest first, ties by arrival; the simulator
// places in that order. The allocation is recomputed, and the fractions
// restarted, when the set of active jobs changes (Gavel also carries each
// job's deficit over the restart; this does not).
#include <algorithm>
#include <unordered_map>

#include "cluster/active_set.h"
#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

class MaxMinPolicy final : public Policy {
 public:
  std::string name() const override { return "max-min"; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    const auto& jobs = *view.jobs;
    if (detail::active_set_changed(jobs, order, ids_)) {  // arrivals or finishes: a new allocation
      reset_s_ = view.now_s;
      run_at_reset_.clear();
      for (std::size_t i : order) run_at_reset_[jobs[i].index] = jobs[i].run_s;
      // Water-filling over the GPU demands, smallest first.
      std::vector<double> scale;
      for (std::size_t i : order) scale.push_back(jobs[i].job->gpus);
      std::sort(scale.begin(), scale.end());
      double left = view.total_gpus;
      level_ = scale.empty() ? 0 : scale.back();
      for (std::size_t k = 0; k < scale.size(); ++k) {
        const double share = left / static_cast<double>(scale.size() - k);
        if (scale[k] > share) {
          level_ = share;
          break;
        }
        left -= scale[k];
      }
    }
    const double elapsed = view.now_s - reset_s_;
    const auto priority = [&](const JobState& j) {
      const double x = std::min(1.0, level_ / j.job->gpus);
      const double ran = j.run_s - run_at_reset_[j.index];
      return ran > 0 && elapsed > 0 ? x / (ran / elapsed) : x * 1e9;
    };
    std::vector<double> p(jobs.size());
    for (std::size_t i : order) p[i] = priority(jobs[i]);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (p[a] != p[b]) return p[a] > p[b];
      return jobs[a].arrival_s < jobs[b].arrival_s;
    });
  }

 private:
  std::vector<std::size_t> ids_;  // the active jobs the allocation is for
  double reset_s_ = 0, level_ = 0;
  std::unordered_map<std::size_t, double> run_at_reset_;
};

}  // namespace

std::unique_ptr<Policy> make_max_min_policy() { return std::make_unique<MaxMinPolicy>(); }

}  // namespace gpemu::cluster
