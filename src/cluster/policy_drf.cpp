// Dominant Resource Fairness between users (Ghodsi et al., NSDI 2011) over
// GPUs and cores, as AlloX's two DRF baselines order pods
// (mengwanguc/kubernetes-allox pkg/scheduler/cache/util.go, OnlineDRF):
//  - drf-fifo (DRFFIFO): the user's earliest waiting job, on its GPUs;
//  - drf (the figure's DRFS): the user's waiting job of shortest time on
//    either configuration (its GPUs, or its CPU configuration when it has
//    one), on that configuration.
// Running jobs keep their GPUs or cores (no preemption); the waiting jobs are
// ordered by progressive filling: the user with the least dominant share (the
// larger of its GPUs over the cluster's and its cores over the cluster's,
// counting its running jobs and the jobs already ordered) gets its next job.
// A GPU job's cores are its trace `cpus`, else a GPU-proportional share of
// the cluster's; a job on its CPU configuration holds cpu_config_cpus.
#include <algorithm>
#include <map>

#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

class DrfPolicy final : public Policy {
 public:
  explicit DrfPolicy(bool shortest) : shortest_(shortest) {}
  std::string name() const override { return shortest_ ? "drf" : "drf-fifo"; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    auto& jobs = *view.jobs;
    const double gpus = std::max(1, view.total_gpus), cpus = std::max(1, view.total_cpus);
    const auto on_cpu = [&](const JobState& j) {
      return shortest_ && j.job->cpu_config_cpus > 0 && j.remaining_cpu_s < j.remaining_s;
    };
    struct User {
      double gpu = 0, cpu = 0;
      std::vector<std::size_t> waiting;
      std::size_t next = 0;
    };
    const auto hold = [&](User& u, JobState& j, bool cpu) {
      j.use_cpu = cpu;
      if (cpu) {
        u.cpu += j.job->cpu_config_cpus / cpus;
      } else {
        u.gpu += j.job->gpus / gpus;
        u.cpu += (j.job->cpus > 0 ? j.job->cpus : cpus * j.job->gpus / gpus) / cpus;
      }
    };
    std::map<std::string, User> users;
    std::vector<std::size_t> running;
    for (std::size_t i : order) {
      JobState& j = jobs[i];
      User& u = users[j.job->user];
      if (j.running) {
        running.push_back(i);
        hold(u, j, j.ran_on_cpu);
      } else {
        u.waiting.push_back(i);
      }
    }
    // Within a user: by arrival (FIFO), or by the shortest time on either configuration.
    const auto key = [&](std::size_t i) {
      const JobState& j = jobs[i];
      return shortest_ ? std::min(j.remaining_s, on_cpu(j) ? j.remaining_cpu_s : j.remaining_s) : j.arrival_s;
    };
    std::stable_sort(running.begin(), running.end(),
                     [&](std::size_t a, std::size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
    for (auto& [name, u] : users)
      std::stable_sort(u.waiting.begin(), u.waiting.end(), [&](std::size_t a, std::size_t b) {
        if (key(a) != key(b)) return key(a) < key(b);
        return jobs[a].arrival_s < jobs[b].arrival_s;
      });
    order = running;
    for (;;) {
      User* pick = nullptr;
      for (auto& [name, u] : users)  // by name on ties: the map's order
        if (u.next < u.waiting.size() && (!pick || std::max(u.gpu, u.cpu) < std::max(pick->gpu, pick->cpu))) pick = &u;
      if (!pick) break;
      const std::size_t i = pick->waiting[pick->next++];
      order.push_back(i);
      hold(*pick, jobs[i], on_cpu(jobs[i]));
    }
  }

 private:
  bool shortest_;
};

}  // namespace

std::unique_ptr<Policy> make_drf_fifo_policy() { return std::make_unique<DrfPolicy>(false); }
std::unique_ptr<Policy> make_drf_policy() { return std::make_unique<DrfPolicy>(true); }

}  // namespace gpemu::cluster
