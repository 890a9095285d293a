// Time slicing as Gandiva suspends and resumes jobs (Xiao et al., OSDI 2018,
// section 4.1), at the round's granularity: each round the jobs that have
// waited longest since they last ran come first (a job that has never run
// has waited since its arrival), and the jobs that just ran go last, so
// jobs that do not all fit take turns; ties by arrival. Each turn pays the
// checkpoint's write and read.
#include <algorithm>

#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

class TimeSlicePolicy final : public Policy {
 public:
  std::string name() const override { return "timeslice"; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    const auto& jobs = *view.jobs;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const JobState &x = jobs[a], &y = jobs[b];
      if (x.running != y.running) return !x.running;
      if (x.last_run_end_s != y.last_run_end_s) return x.last_run_end_s < y.last_run_end_s;
      return x.arrival_s < y.arrival_s;
    });
  }
};

}  // namespace

std::unique_ptr<Policy> make_timeslice_policy() { return std::make_unique<TimeSlicePolicy>(); }

}  // namespace gpemu::cluster
