// The session (session.h): its construction and its world (the GPUs, each
// node's links, the network, the CPU pools, the storage), a job's look-ups
// and the session's run. Adding jobs is session_jobs.cpp, the queue and
// placement session_queue.cpp, a job's run and end session_job.cpp, pause,
// preemption and resume session_control.cpp, clients session_client.cpp, the
// one-job case session_alone.cpp; what they share is session_impl.h.
#include "gpemu/session.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "workload/session_impl.h"
#include "workload/session_storage.h"

namespace gpemu {

std::string_view to_string(JobState s) {
  switch (s) {
    case JobState::Added: return "added";
    case JobState::Queued: return "queued";
    case JobState::Running: return "running";
    case JobState::Paused: return "paused";
    case JobState::Preempted: return "preempted";
    case JobState::Finished: return "finished";
    case JobState::Failed: return "failed";
  }
  return "?";
}

Session::Session(Clock& clock, const CostModel& costs, SessionSpec spec)
    : clock_(clock), costs_(costs), spec_(std::move(spec)), timeline_(std::make_unique<Timeline>(clock)) {
  if (!spec_.gpu) throw InputError("session: no GPU given; give one of 'gpemu devices'");
  if (spec_.nodes < 1 || spec_.gpus_per_node < 1 ||
      static_cast<std::int64_t>(spec_.nodes) * spec_.gpus_per_node > 65536)
    throw InputError(
        fmt::format("session: {} node(s) of {} GPU(s): give 1 to 65536 GPUs in all", spec_.nodes, spec_.gpus_per_node));
  if (spec_.cpu_cores_per_node < 0)
    throw InputError(fmt::format("session: {} CPU cores per node: give a positive count, or 0 for this machine's",
                                 spec_.cpu_cores_per_node));
  if (spec_.open && clock_.is_virtual())
    throw InputError(
        "session: open (jobs added while it runs) under the virtual clock: its host threads are all known when it "
        "runs; add every job before run(), or give the real clock");
  if (!spec_.placement) spec_.placement = placement_policy("pinned");
  if (spec_.trace) timeline_->enable_trace(true);
  const int cores = spec_.cpu_cores_per_node > 0 ? spec_.cpu_cores_per_node
                                                 : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  gpu_count_ = spec_.nodes * spec_.gpus_per_node;
  for (int n = 0; n < spec_.nodes; ++n) {
    cpu_pools_.push_back(std::make_shared<pipeline::CpuPool>(cores));
    if (spec_.exclusive) continue;
    for (int g = 0; g < spec_.gpus_per_node; ++g)
      gpus_.push_back(std::make_unique<SharedGpu>(*timeline_, *spec_.gpu, spec_.share));
  }
  nodes_.resize(static_cast<std::size_t>(spec_.nodes));
  gpu_jobs_.assign(static_cast<std::size_t>(gpu_count_), 0);
  if (spec_.checkpoint_storage) {
    try {
      checkpoint_storage_ = std::make_unique<pipeline::StorageServer>(*spec_.checkpoint_storage);
    } catch (const InputError& e) {
      throw InputError(fmt::format("session: checkpoint storage: {}", e.what()));
    }
  }
  if (spec_.data_storage) {
    try {
      pipeline::validate(*spec_.data_storage);
    } catch (const InputError& e) {
      throw InputError(fmt::format("session: data storage: {}", e.what()));
    }
    for (int n = 0; n < spec_.nodes; ++n)
      data_shares_.push_back(spec_.data_storage_shared && n > 0 ? data_shares_.front()
                                                                : std::make_shared<pipeline::StorageShare>());
  }
}

Session::~Session() {
  // A session destroyed while open jobs still run (its run() never called,
  // or left by an exception) waits for their threads.
  std::vector<std::unique_ptr<LiveThread>> threads;
  {
    std::lock_guard live(live_mu_);
    threads = std::move(live_threads_);
  }
  for (auto& t : threads) t->thread.join();
}

SharedGpu& Session::gpu(int index) {
  if (index < 0 || index >= gpus())
    throw InputError(fmt::format("session: GPU {}: it has GPUs 0 to {}", index, gpus() - 1));
  if (spec_.exclusive) throw std::logic_error("Session::gpu: an exclusive session's GPUs are not shared");
  return *gpus_[static_cast<std::size_t>(index)];
}

// The network joining the nodes, made the first time a job needs it (before run()).
const NetworkLinks& Session::network() {
  if (!network_) network_ = std::make_unique<NetworkLinks>(make_network_links(*timeline_, spec_.network, spec_.nodes));
  return *network_;
}

// The node's links, made the first time a job needs them (before run()).
const Node& Session::node(int index) {
  std::unique_ptr<Node>& n = nodes_[static_cast<std::size_t>(index)];
  if (!n) {
    NodeOptions o = spec_.node;
    o.gpus = spec_.gpus_per_node;
    o.first_device_index = index * spec_.gpus_per_node;
    o.devices = false;
    n = std::make_unique<Node>(*timeline_, *spec_.gpu, o);
  }
  return *n;
}

void Session::at(Time t, std::function<void(Session&)> action) {
  std::lock_guard live(live_mu_);
  if (ran_) throw std::logic_error("Session::at after run()");
  if (t < 0) throw InputError(fmt::format("session: an action at {} ns is before the start", t));
  actions_.emplace_back(t, std::move(action));
}

void Session::on_job_end(std::function<void(Session&, const JobOutcome&)> observer) {
  end_observers_.push_back(std::move(observer));
}

Session::Slot& Session::slot(JobId id) const {
  std::lock_guard live(live_mu_);
  if (id < 0 || static_cast<std::size_t>(id) >= slots_.size())
    throw InputError(fmt::format("session: job {}: it has jobs 0 to {}", id, static_cast<int>(slots_.size()) - 1));
  return *slots_[static_cast<std::size_t>(id)];
}

std::size_t Session::jobs() const {
  std::lock_guard live(live_mu_);
  return slots_.size();
}
const JobOutcome& Session::outcome(JobId id) const { return slot(id).out; }

JobOutcome Session::take_outcome(JobId id) {
  Slot& s = slot(id);
  if (!s.ended.is_set()) throw std::logic_error(fmt::format("Session::take_outcome: job {} has not ended", id));
  std::optional<RunRecord> record = std::move(s.out.record);
  s.out.record.reset();
  JobOutcome out = s.out;
  out.record = std::move(record);
  return out;
}

ClockEvent& Session::ended(JobId id) { return slot(id).ended; }

JobState Session::state(JobId id) const {
  Slot& s = slot(id);
  std::lock_guard lock(mu_);
  return s.out.state;
}

void Session::run() {
  std::vector<std::function<void()>> bodies;
  {
    std::lock_guard live(live_mu_);
    if (ran_) throw std::logic_error("Session::run called twice");
    ran_ = true;
    bodies.reserve(slots_.size() + 1);
    for (auto& s : slots_)
      for (std::function<void()>& b : bodies_of(*s)) bodies.push_back(std::move(b));
  }
  if (!actions_.empty()) {
    std::stable_sort(actions_.begin(), actions_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    bodies.push_back([this] {
      for (auto& [t, action] : actions_) {
        clock_.sleep_until(t);
        action(*this);
      }
    });
  }
  clock_.run_concurrently(std::move(bodies));
  if (!spec_.open) return;
  std::vector<std::unique_ptr<LiveThread>> threads;
  std::exception_ptr error;
  {
    std::unique_lock live(live_mu_);
    live_cv_.wait(live, [this] { return closed_ && live_running_ == 0; });
    threads = std::move(live_threads_);
    error = live_error_;
  }
  for (auto& t : threads) t->thread.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace gpemu
