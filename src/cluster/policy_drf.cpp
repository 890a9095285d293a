// DRF-FIFO: Dominant Resource Fairness between users (Ghodsi et al., NSDI
// 2011), FIFO within a user, as AlloX's DRFFIFO baseline orders pods
// (mengwanguc/kubernetes-allox pkg/scheduler/cache/util.go, SCHEDULER =
// DRFFIFO). Running jobs keep their GPUs (no preemption); the waiting jobs
// are ordered by progressive filling: the user with the least dominant share
// (the larger of its GPUs over the cluster's and its cores over the
// cluster's, counting its running jobs and the jobs already ordered) gets its
// earliest waiting job next. A job's cores are its trace `cpus`, else a
// GPU-proportional share of the cluster's.
#include <algorithm>
#include <map>

#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

class DrfFifoPolicy final : public Policy {
 public:
  std::string name() const override { return "drf-fifo"; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    const auto& jobs = *view.jobs;
    const double gpus = std::max(1, view.total_gpus), cpus = std::max(1, view.total_cpus);
    const auto cpu_share = [&](const JobState& j) {
      return (j.job->cpus > 0 ? j.job->cpus : cpus * j.job->gpus / gpus) / cpus;
    };
    // Per user: its dominant share so far and its waiting jobs by arrival.
    struct User {
      double gpu = 0, cpu = 0;
      std::vector<std::size_t> waiting;
      std::size_t next = 0;
    };
    std::map<std::string, User> users;
    std::vector<std::size_t> running;
    for (std::size_t i : order) {
      const JobState& j = jobs[i];
      User& u = users[j.job->user];
      if (j.running) {
        running.push_back(i);
        u.gpu += j.job->gpus / gpus;
        u.cpu += cpu_share(j);
      } else {
        u.waiting.push_back(i);
      }
    }
    std::stable_sort(running.begin(), running.end(),
                     [&](std::size_t a, std::size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
    for (auto& [name, u] : users)
      std::stable_sort(u.waiting.begin(), u.waiting.end(),
                       [&](std::size_t a, std::size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
    order = running;
    for (;;) {
      User* pick = nullptr;
      for (auto& [name, u] : users)  // by name on ties: the map's order
        if (u.next < u.waiting.size() && (!pick || std::max(u.gpu, u.cpu) < std::max(pick->gpu, pick->cpu))) pick = &u;
      if (!pick) break;
      const std::size_t i = pick->waiting[pick->next++];
      order.push_back(i);
      pick->gpu += jobs[i].job->gpus / gpus;
      pick->cpu += cpu_share(jobs[i]);
    }
  }
};

}  // namespace

std::unique_ptr<Policy> make_drf_fifo_policy() { return std::make_unique<DrfFifoPolicy>(); }

}  // namespace gpemu::cluster
