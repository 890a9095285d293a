// AlloX's equal-share baseline, ES (mengwanguc/kubernetes-allox@f2bb961
// pkg/scheduler/cache/util.go, EqualShare; read, not copied): each user has a
// static share of the GPUs (GPUs / users) and of the CPU configurations'
// cores, and the scheduler starts pods one at a time while they fit it:
//  - while a GPU is free: the user with waiting jobs that holds the fewest
//    GPUs (the first on ties), if it holds fewer than its share, starts its
//    waiting job of shortest time on its GPUs, there;
//  - otherwise, while cores are free: the user with waiting jobs that holds
//    the fewest cores (its GPU jobs' cores counted), if it holds fewer CPU
//    configurations' worth than its share, floor(held / c) < floor(share / c)
//    for c its next job's CPU configuration cores, starts its waiting job of
//    shortest time on its CPU configuration, there;
//  - else nothing more starts this round (a GPU may stay idle: the shares are static).
// A user's CPU share is the cores that 1-GPU jobs on every GPU leave, over
// the users (the scheduler's (capacity - the GPU nodes' cores) / users).
// Users are those that have submitted a job so far; users' order on ties is
// their first waiting job's. Running jobs keep their configuration.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

class EqualSharePolicy final : public Policy {
 public:
  std::string name() const override { return "es"; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    auto& jobs = *view.jobs;
    const double G = std::max(1, view.total_gpus), C = std::max(1, view.total_cpus);
    const auto gpu_cores = [&](const JobState& j) { return j.job->cpus > 0 ? j.job->cpus : C * j.job->gpus / G; };
    struct User {
      double gpus = 0, cores = 0;
      std::vector<std::size_t> waiting;
    };
    std::map<std::string, User> users;
    std::vector<std::string> queue_order;  // users by their first waiting job
    std::vector<std::size_t> running, waiting;
    double free_gpus = G, free_cores = C, widest_gpu_cores = 0;
    for (std::size_t i : order) {
      JobState& j = jobs[i];
      seen_.insert(j.job->user);
      (j.running ? running : waiting).push_back(i);
      if (j.job->gpus == 1) widest_gpu_cores = std::max(widest_gpu_cores, gpu_cores(j));
    }
    std::stable_sort(running.begin(), running.end(),
                     [&](std::size_t a, std::size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
    std::stable_sort(waiting.begin(), waiting.end(),
                     [&](std::size_t a, std::size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
    const auto hold = [&](JobState& j, bool cpu) {
      User& u = users[j.job->user];
      j.use_cpu = cpu;
      const double cores = cpu ? j.job->cpu_config_cpus : gpu_cores(j);
      if (!cpu) u.gpus += j.job->gpus, free_gpus -= j.job->gpus;
      u.cores += cores;
      free_cores -= cores;
    };
    for (std::size_t i : running) hold(jobs[i], jobs[i].ran_on_cpu);
    for (std::size_t i : waiting) {
      User& u = users[jobs[i].job->user];
      if (u.waiting.empty()) queue_order.push_back(jobs[i].job->user);
      u.waiting.push_back(i);
    }
    order = running;
    const double n_users = static_cast<double>(std::max<std::size_t>(1, seen_.size()));
    const double gpu_share = std::max(1.0, std::floor(G / n_users));
    const double cpu_share = std::max(0.0, C - G * widest_gpu_cores) / n_users;
    // A user's waiting job of least time on one configuration (the first on ties).
    const auto shortest = [&](User& u, bool cpu) {
      auto best = u.waiting.end();
      for (auto it = u.waiting.begin(); it != u.waiting.end(); ++it) {
        const JobState& j = jobs[*it];
        if (cpu && j.job->cpu_config_cpus == 0) continue;
        const double t = cpu ? j.remaining_cpu_s : j.remaining_s;
        if (best == u.waiting.end() || t < (cpu ? jobs[*best].remaining_cpu_s : jobs[*best].remaining_s)) best = it;
      }
      return best;
    };
    // The user with waiting jobs holding the least of a resource (the first on ties).
    const auto least = [&](bool cpu) -> User* {
      User* pick = nullptr;
      for (const auto& name : queue_order) {
        User& u = users[name];
        if (!u.waiting.empty() && (!pick || (cpu ? u.cores < pick->cores : u.gpus < pick->gpus))) pick = &u;
      }
      return pick;
    };
    for (;;) {
      bool started = false;
      if (free_gpus > 0) {
        User* u = least(false);
        if (u && u->gpus < gpu_share) {
          const auto it = shortest(*u, false);
          if (jobs[*it].job->gpus <= free_gpus) {
            order.push_back(*it);
            hold(jobs[*it], false);
            u->waiting.erase(it);
            started = true;
          }
        }
      }
      if (!started && free_cores > 0) {
        User* u = least(true);
        const auto it = u ? shortest(*u, true) : std::vector<std::size_t>::iterator{};
        if (u && it != u->waiting.end()) {
          const double c = jobs[*it].job->cpu_config_cpus;
          if (std::floor(u->cores / c) < std::floor(cpu_share / c)) {
            order.push_back(*it);
            hold(jobs[*it], true);
            u->waiting.erase(it);
            started = true;
          }
        }
      }
      if (!started) break;
    }
  }

 private:
  std::set<std::string> seen_;
};

}  // namespace

std::unique_ptr<Policy> make_es_policy() { return std::make_unique<EqualSharePolicy>(); }

}  // namespace gpemu::cluster
