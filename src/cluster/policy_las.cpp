// LAS as Tiresias' discretised two-dimensional least-attained service
// (Gu et al., NSDI 2019, section 4.2; SymbioticLab/Tiresias): a job's service
// is GPUs x time run (GPU-seconds); the queue limits split jobs into priority
// queues (a job moves down as its service passes each limit), FIFO by
// arrival within a queue, preemptive between queues; the starvation guard
// puts a job that has waited starvation_factor times its run time back in
// the top queue. With no limits it is continuous LAS (Synergy
// schedulers/las_synergy_new.py sorts by attained service, then arrival).
#include <algorithm>

#include <fmt/format.h>

#include "gpemu/cluster.h"
#include "gpemu/error.h"

namespace gpemu::cluster {
namespace {

class LasPolicy final : public Policy {
 public:
  explicit LasPolicy(LasOptions o) : o_(std::move(o)) {
    for (std::size_t i = 0; i < o_.queue_limits_gpu_s.size(); ++i)
      if (!(o_.queue_limits_gpu_s[i] > 0) || (i > 0 && o_.queue_limits_gpu_s[i] <= o_.queue_limits_gpu_s[i - 1]))
        throw InputError(fmt::format("--las-queues: limit {} is {}: expected increasing positive GPU-seconds", i + 1,
                                     o_.queue_limits_gpu_s[i]));
    if (!(o_.starvation_factor >= 0))
      throw InputError(fmt::format("--starvation {}: expected 0 (off) or a positive factor", o_.starvation_factor));
  }
  std::string name() const override { return "las"; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    auto& jobs = *view.jobs;
    const bool continuous = o_.queue_limits_gpu_s.empty();
    for (std::size_t i : order) {
      JobState& j = jobs[i];
      int q = 0;
      while (q < static_cast<int>(o_.queue_limits_gpu_s.size()) &&
             j.attained_gpu_s >= o_.queue_limits_gpu_s[static_cast<std::size_t>(q)])
        ++q;
      const double waited = view.now_s - j.last_run_end_s;
      if (o_.starvation_factor > 0 && !j.running && j.run_s > 0 && waited >= view.round_s &&
          waited >= o_.starvation_factor * j.run_s) {
        q = 0;
        j.attained_gpu_s = 0;  // Tiresias resets the promoted job's service
      }
      j.queue = q;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const JobState &x = jobs[a], &y = jobs[b];
      if (continuous && x.attained_gpu_s != y.attained_gpu_s) return x.attained_gpu_s < y.attained_gpu_s;
      if (x.queue != y.queue) return x.queue < y.queue;
      return x.arrival_s < y.arrival_s;
    });
  }

 private:
  LasOptions o_;
};

}  // namespace

std::unique_ptr<Policy> make_las_policy(const LasOptions& options) { return std::make_unique<LasPolicy>(options); }

}  // namespace gpemu::cluster
