// Gavel's heterogeneity-aware max-min fairness (Narayanan et al., OSDI 2020,
// section 4.1 "Max-min fairness", section 5 "Round-based scheduling";
// stanford-futuredata/gavel scheduler/policies/max_min_fairness.py,
// MaxMinFairnessPolicyWithPerf, and scheduler.py's priorities, read, not
// copied).
//
// The throughput matrix T[m][j]: job m's iterations per second on its asked
// GPUs of GPU model j, the engine's (ClusterView::iteration_s: consolidated,
// a proportional share of the node's cores), 0 where the model has too few
// GPUs. The allocation X[m][j] (the fraction of time job m runs on model j)
// maximises the least normalised throughput
//     scale_m * sum_j T[m][j] X[m][j] / sum_j T[m][j] Xeq[m][j]
// subject to sum_j X[m][j] <= 1 and sum_m scale_m X[m][j] <= GPUs of model j,
// scale_m the job's GPUs; Xeq is the equal time share, each job the same
// fraction of every model, Xeq[m][j] = GPUs_j / sum_m scale_m (scaled down
// so that its row sums to at most 1), as the paper's X^equal. Multiplying by
// scale_m is Gavel's code's: on one GPU model this is the GPU-share max-min
// of `max-min` (policy_max_min.cpp). Solved as an LP (max_min_lp.h) when the
// set of active jobs changes.
//
// Rounds, as Gavel's scheduler: the priority of (job m, model j) is
// X[m][j] / the fraction of the time since the allocation changed that m has
// run on j (X[m][j] x 1e9 if it has not); in priority order (ties by
// arrival, then model) a job not yet given a model gets model j if j's GPUs
// not yet given this round hold it. Those jobs come first, each on its
// model; the others follow on any model (the simulator backfills).
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "cluster/active_set.h"
#include "cluster/max_min_lp.h"
#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

class MaxMinPerfPolicy final : public Policy {
 public:
  std::string name() const override { return "max-min-perf"; }
  bool every_round() const override { return true; }  // its turns move jobs between models
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    auto& jobs = *view.jobs;
    const std::size_t models = view.gpu_models.size();
    // The time each job ran on each model since the last call.
    for (std::size_t i : order)
      if (jobs[i].running && jobs[i].ran_on_model >= 0)
        received_[{jobs[i].index, jobs[i].ran_on_model}] += view.now_s - last_s_;
    last_s_ = view.now_s;
    if (detail::active_set_changed(jobs, order, ids_)) {  // arrivals or finishes: a new allocation
      reset_s_ = view.now_s;
      received_.clear();
      allocate(view, order);
    }
    const double elapsed = view.now_s - reset_s_;
    std::vector<std::tuple<double, double, std::size_t, int>> ranked;  // -priority, arrival, job, model
    for (std::size_t i : order)
      for (std::size_t j = 0; j < models; ++j) {
        const double x = x_[jobs[i].index][j];
        if (x <= 0) continue;
        const double ran = received_[{jobs[i].index, static_cast<int>(j)}];
        const double p = ran > 0 && elapsed > 0 ? x / (ran / elapsed) : x * 1e9;
        ranked.emplace_back(-p, jobs[i].arrival_s, i, static_cast<int>(j));
      }
    std::sort(ranked.begin(), ranked.end());
    std::vector<double> left;
    for (const auto& m : view.gpu_models) left.push_back(m.gpus);
    std::vector<std::size_t> first;
    std::vector<char> given(jobs.size(), 0);
    for (const auto& [p, arrival, i, j] : ranked) {
      const double need = jobs[i].job->gpus;
      if (given[i] || left[static_cast<std::size_t>(j)] < need) continue;
      given[i] = 1;
      left[static_cast<std::size_t>(j)] -= need;
      jobs[i].gpu_model = j;
      first.push_back(i);
    }
    std::vector<std::size_t> rest;
    for (std::size_t i : order)
      if (!given[i]) rest.push_back(i);
    std::stable_sort(rest.begin(), rest.end(),
                     [&](std::size_t a, std::size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
    order = std::move(first);
    order.insert(order.end(), rest.begin(), rest.end());
  }

 private:
  void allocate(const ClusterView& view, const std::vector<std::size_t>& order) {
    const auto& jobs = *view.jobs;
    const std::size_t models = view.gpu_models.size();
    std::vector<double> workers, scale;
    double asked = 0, all = 0;
    for (const auto& m : view.gpu_models) workers.push_back(m.gpus), all += m.gpus;
    for (std::size_t i : order) scale.push_back(jobs[i].job->gpus), asked += jobs[i].job->gpus;
    // Xeq's row: each model's GPUs over the GPUs asked, at most 1 in all.
    const double eq = std::min(1.0 / all, 1.0 / asked);
    std::vector<std::vector<double>> c;
    for (std::size_t i : order) {
      std::vector<double> t(models, 0.0);
      double isolated = 0;
      for (std::size_t j = 0; j < models; ++j) {
        const double s = view.iteration_s(i, static_cast<int>(j));
        t[j] = std::isfinite(s) && s > 0 ? 1 / s : 0;
        isolated += t[j] * workers[j] * eq;
      }
      for (double& v : t) v = isolated > 0 ? jobs[i].job->gpus * v / isolated : 0;
      c.push_back(std::move(t));
    }
    const auto x = detail::solve_max_min(c, scale, workers);
    x_.clear();
    for (std::size_t k = 0; k < order.size(); ++k) x_[jobs[order[k]].index] = x[k];
  }

  std::vector<std::size_t> ids_;  // the active jobs the allocation is for
  double reset_s_ = 0, last_s_ = 0;
  std::map<std::size_t, std::vector<double>> x_;            // by trace index: X[m][j]
  std::map<std::pair<std::size_t, int>, double> received_;  // (trace index, model): seconds run since the reset
};

}  // namespace

std::unique_ptr<Policy> make_max_min_perf_policy() { return std::make_unique<MaxMinPerfPolicy>(); }

}  // namespace gpemu::cluster
