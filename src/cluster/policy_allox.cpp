// AlloX (Le, Sun, Kang, Hong, Park, Zhang: "AlloX: Compute Allocation in
// Hybrid Clusters", EuroSys 2020): jobs that can run on a GPU or on CPU cores
// are matched to machines by a min-cost bipartite matching that minimises the
// sum of completion times, among the jobs of the alpha share of users of
// least fairness score. As the authors' scheduler does it
// (mengwanguc/kubernetes-allox pkg/scheduler/cache/util.go, OnlineAllox and
// UpdateFairScore), each round:
//  1. a user's fairness score is the sum over its running jobs of the job's
//     dominant share on the configuration it runs on, scaled by (time on its
//     faster configuration / time on this one) when it runs on the slower;
//  2. the waiting jobs of the ceil(alpha x users) users of least score (those
//     with active jobs; ties by name) are the candidates;
//  3. machines: each GPU, and CPU machines of the largest candidate CPU
//     configuration's cores among the cores that 1-GPU jobs on every GPU
//     leave; machine i is free in D_i (the remaining time of its job);
//  4. candidate j at position k from the end of machine i's queue costs
//     D_i + k x P_ij (P: the job's remaining time on that kind of machine);
//     the Hungarian method finds the assignment of least total cost;
//  5. each free machine starts the job first in its queue; the other jobs
//     wait, even on a free machine the matching left idle.
// Running jobs keep their machines (no preemption). Jobs asking more than one
// GPU are outside the matching (AlloX's jobs take one): they follow, oldest
// first, onto GPUs still free. The candidates are at most 64 (the oldest),
// and the matching uses, per kind, the 64 machines free soonest (a queue on
// a machine free later never costs less), so a round costs at most
// O(64^4) whatever the cluster's size.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gpemu/cluster.h"
#include "gpemu/error.h"

namespace gpemu::cluster {
namespace {

constexpr std::size_t kMaxCandidates = 64;
constexpr double kNever = 1e12;  // the cost of a job on a kind of machine it cannot run on

// Min-cost assignment of n rows to distinct columns of an n x m matrix (n <= m)
// by the Hungarian method with potentials, O(n^2 m). Returns each row's column.
template <class Cost>
std::vector<std::size_t> assign(std::size_t n, std::size_t m, const Cost& cost) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(n + 1, 0), v(m + 1, 0);
  std::vector<std::size_t> row_of(m + 1, 0), way(m + 1, 0);
  for (std::size_t i = 1; i <= n; ++i) {
    row_of[0] = i;
    std::size_t j0 = 0;
    std::vector<double> minv(m + 1, inf);
    std::vector<char> used(m + 1, 0);
    do {
      used[j0] = 1;
      const std::size_t i0 = row_of[j0];
      double delta = inf;
      std::size_t j1 = 0;
      for (std::size_t j = 1; j <= m; ++j) {
        if (used[j]) continue;
        const double cur = cost(i0 - 1, j - 1) - u[i0] - v[j];
        if (cur < minv[j]) minv[j] = cur, way[j] = j0;
        if (minv[j] < delta) delta = minv[j], j1 = j;
      }
      for (std::size_t j = 0; j <= m; ++j) {
        if (used[j]) {
          u[row_of[j]] += delta;
          v[j] -= delta;
        } else {
          minv[j] -= delta;
        }
      }
      j0 = j1;
    } while (row_of[j0] != 0);
    do {
      const std::size_t j1 = way[j0];
      row_of[j0] = row_of[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<std::size_t> col(n, 0);
  for (std::size_t j = 1; j <= m; ++j)
    if (row_of[j] != 0) col[row_of[j] - 1] = j - 1;
  return col;
}

class AlloxPolicy final : public Policy {
 public:
  explicit AlloxPolicy(AlloxOptions o) : o_(o) {
    if (!(o_.alpha > 0 && o_.alpha <= 1))
      throw InputError(fmt::format("--allox-alpha {}: expected a share of users above 0 and at most 1", o_.alpha));
  }
  std::string name() const override { return "allox"; }
  void order(const ClusterView& view, std::vector<std::size_t>& order) override {
    auto& jobs = *view.jobs;
    const double G = std::max(1, view.total_gpus), C = std::max(1, view.total_cpus);
    const auto gpu_cores = [&](const JobState& j) { return j.job->cpus > 0 ? j.job->cpus : C * j.job->gpus / G; };
    std::map<std::string, double> score;
    std::vector<std::size_t> running, waiting;
    std::vector<double> gpu_free_in, cpu_free_in;  // machines' D
    for (std::size_t i : order) {
      JobState& j = jobs[i];
      double& s = score[j.job->user];
      if (!j.running) {
        waiting.push_back(i);
        continue;
      }
      running.push_back(i);
      j.use_cpu = j.ran_on_cpu;
      const double gpu_share = std::max(j.job->gpus / G, gpu_cores(j) / C);
      const double cpu_share = j.job->cpu_config_cpus / C;
      const bool has_cpu = j.job->cpu_config_cpus > 0;
      const bool cpu_faster = has_cpu && j.remaining_cpu_s < j.remaining_s;
      if (j.ran_on_cpu) {
        s += cpu_faster ? cpu_share : gpu_share * j.remaining_s / j.remaining_cpu_s;
        cpu_free_in.push_back(j.remaining_cpu_s);
      } else {
        s += cpu_faster ? cpu_share * j.remaining_cpu_s / j.remaining_s : gpu_share;
        gpu_free_in.insert(gpu_free_in.end(), static_cast<std::size_t>(j.job->gpus), j.remaining_s);
      }
    }
    std::stable_sort(running.begin(), running.end(),
                     [&](std::size_t a, std::size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
    order = running;
    std::stable_sort(waiting.begin(), waiting.end(),
                     [&](std::size_t a, std::size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
    // 2. The users of least score among those with waiting jobs.
    std::vector<std::string> users;
    for (std::size_t i : waiting)
      if (std::find(users.begin(), users.end(), jobs[i].job->user) == users.end()) users.push_back(jobs[i].job->user);
    std::stable_sort(users.begin(), users.end(), [&](const std::string& a, const std::string& b) {
      return score[a] != score[b] ? score[a] < score[b] : a < b;
    });
    users.resize(std::min(users.size(),
                          static_cast<std::size_t>(std::ceil(o_.alpha * static_cast<double>(score.size()) - 1e-9))));
    std::vector<std::size_t> cand, wide;
    double gpu_job_cores = 0, cpu_config = 0;
    for (std::size_t i : waiting) {
      const JobState& j = jobs[i];
      if (j.job->gpus > 1) {
        wide.push_back(i);
      } else if (cand.size() < kMaxCandidates && std::find(users.begin(), users.end(), j.job->user) != users.end()) {
        cand.push_back(i);
        gpu_job_cores = std::max(gpu_job_cores, gpu_cores(j));
        cpu_config = std::max(cpu_config, static_cast<double>(j.job->cpu_config_cpus));
      }
    }
    // 3. Machines: every GPU; CPU machines of the largest CPU configuration.
    const int cpu_machines =
        std::max(static_cast<int>(cpu_free_in.size()),
                 cpu_config > 0 ? static_cast<int>(std::floor((C - G * gpu_job_cores) / cpu_config + 1e-9)) : 0);
    gpu_free_in.resize(std::max(gpu_free_in.size(), static_cast<std::size_t>(view.total_gpus)), 0.0);
    cpu_free_in.resize(static_cast<std::size_t>(cpu_machines), 0.0);
    const auto free_gpus = static_cast<std::size_t>(std::count(gpu_free_in.begin(), gpu_free_in.end(), 0.0));
    const auto free_cpus = static_cast<std::size_t>(std::count(cpu_free_in.begin(), cpu_free_in.end(), 0.0));
    if (!cand.empty() && free_gpus + free_cpus > 0) {
      struct Machine {
        double free_in;
        bool cpu;
      };
      std::vector<Machine> machines;
      for (auto* kind : {&gpu_free_in, &cpu_free_in}) {
        std::sort(kind->begin(), kind->end());
        const std::size_t n = std::min(kind->size(), cand.size());
        for (std::size_t k = 0; k < n; ++k) machines.push_back({(*kind)[k], kind == &cpu_free_in});
      }
      const std::size_t M = machines.size(), N = cand.size();
      const auto time_on = [&](std::size_t job, const Machine& m) {
        const JobState& j = jobs[cand[job]];
        return m.cpu ? (j.job->cpu_config_cpus > 0 ? j.remaining_cpu_s : kNever) : j.remaining_s;
      };
      // 4. Column c is position c / M + 1 from the end of machine c % M.
      const auto col = assign(N, M * N, [&](std::size_t job, std::size_t c) {
        const Machine& m = machines[c % M];
        return m.free_in + static_cast<double>(c / M + 1) * time_on(job, m);
      });
      // 5. A free machine starts the job of its highest position.
      std::vector<std::size_t> first(M, N);
      for (std::size_t job = 0; job < N; ++job) {
        const std::size_t m = col[job] % M;
        if (machines[m].free_in == 0 && (first[m] == N || col[job] / M > col[first[m]] / M)) first[m] = job;
      }
      for (std::size_t m = 0; m < M; ++m)
        if (first[m] < N) {
          order.push_back(cand[first[m]]);
          jobs[cand[first[m]]].use_cpu = machines[m].cpu;
        }
    }
    order.insert(order.end(), wide.begin(), wide.end());
  }

 private:
  AlloxOptions o_;
};

}  // namespace

std::unique_ptr<Policy> make_allox_policy(const AlloxOptions& options) {
  return std::make_unique<AlloxPolicy>(options);
}

}  // namespace gpemu::cluster
