// A session's queue and placement: jobs queued for GPUs, the placement
// policy asked whenever the queue or the GPUs change, its choice checked,
// and a job leaving its GPUs.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpemu/session.h"
#include "workload/session_impl.h"

namespace gpemu {

namespace session_detail {

// A placement the policy may not make (not the GPUs asked for, not all of
// one node, not as many on each of its nodes, repeated or out of range):
// logic_error naming it.
void check_placement(const PlacementPolicy& policy, JobId id, const PlacementRequest& r, const std::vector<int>& gs,
                     int gpus, int per_node) {
  bool ok =
      static_cast<int>(gs.size()) == r.gpus && (r.gpu < 0 || gs.front() == r.gpu) && (r.want.empty() || gs == r.want);
  const auto per = static_cast<std::size_t>(r.gpus / std::max(1, r.nodes));
  for (std::size_t i = 0; ok && i < gs.size(); ++i)
    ok = gs[i] >= 0 && gs[i] < gpus && gs[i] / per_node == gs[i - i % per] / per_node &&
         (i < per || gs[i] / per_node > gs[i - per] / per_node) && std::count(gs.begin(), gs.end(), gs[i]) == 1;
  if (!ok)
    throw std::logic_error(
        fmt::format("placement policy '{}' placed job {} on GPU(s) {} (asked: {} from GPU {}; the "
                    "session has {} GPUs, {} a node)",
                    policy.name(), id, fmt::join(gs, ", "), r.gpus, r.gpu, gpus, per_node));
}

}  // namespace session_detail

using session_detail::check_placement;

void Session::enqueue(Slot& s) {
  std::lock_guard lock(mu_);
  s.request.job = s.out.id;
  s.request.queued = clock_.now();
  s.request.gpus = s.job.job.cluster.gpus;
  s.request.nodes = s.job.job.cluster.nodes;
  s.placed = std::make_unique<ClockEvent>(clock_);
  if (s.out.state == JobState::Added) s.out.state = JobState::Queued;
  queue_.push_back(&s);
}

void Session::dispatch() {
  std::vector<ClockEvent*> wake;
  {
    std::lock_guard lock(mu_);
    if (queue_.empty()) return;
    std::vector<GpuLoad> loads = loads_locked();
    std::erase_if(queue_, [&](Slot* s) {
      const std::vector<int> gs = spec_.placement->place_gpus(s->request, loads);
      if (!gs.empty()) check_placement(*spec_.placement, s->out.id, s->request, gs, gpus(), spec_.gpus_per_node);
      if (gs.empty()) return false;
      if (spec_.exclusive && std::any_of(gs.begin(), gs.end(), [&](int g) { return gpu_jobs_[g] > 0; })) return false;
      for (const int g : gs) {
        ++gpu_jobs_[static_cast<std::size_t>(g)];
        ++loads[static_cast<std::size_t>(g)].jobs;
      }
      s->out.gpu = gs.front();
      s->out.gpus = gs;
      s->on_gpu = true;
      wake.push_back(s->placed.get());
      return true;
    });
  }
  for (ClockEvent* e : wake) e->set();
}

// The job leaves its GPU (it ended, or was preempted): the queue may use it.
// A job that ends while queued (its wait failed) leaves the queue.
void Session::leave_gpu(Slot& s) {
  {
    std::lock_guard lock(mu_);
    std::erase(queue_, &s);
    if (!s.on_gpu) return;
    s.on_gpu = false;
    for (const int g : s.out.gpus) --gpu_jobs_[static_cast<std::size_t>(g)];
  }
  dispatch();
}

std::vector<GpuLoad> Session::loads_locked() const {
  std::vector<GpuLoad> loads(gpu_jobs_.size());
  for (std::size_t g = 0; g < gpu_jobs_.size(); ++g)
    loads[g] = {static_cast<int>(g), static_cast<int>(g) / spec_.gpus_per_node, gpu_jobs_[g]};
  return loads;
}

std::vector<GpuLoad> Session::loads() const {
  std::lock_guard lock(mu_);
  return loads_locked();
}

}  // namespace gpemu
