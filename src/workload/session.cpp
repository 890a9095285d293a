#include "gpemu/session.h"

#include <algorithm>
#include <exception>
#include <new>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "common/message_text.h"
#include "gpemu/error.h"

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

namespace {

enum class Request { None, Pause, Preempt };

std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    throw;  // the host's memory, not the job's: the run cannot go on
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown error";
  }
}

}  // namespace

struct Session::Slot {
  explicit Slot(Clock& clock) : ended(clock) {}
  SessionJob job;
  JobOutcome out;
  ClockEvent ended;
  // One-shot events of the current wait: placed on a GPU, resumed.
  std::unique_ptr<ClockEvent> placed, resumed;
  PlacementRequest request;
  Request pending = Request::None;
  bool on_gpu = false;  // placed and not left (a preempted job has left)
};

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
  if (!spec_.placement) spec_.placement = placement_policy("pinned");
  if (spec_.trace) timeline_->enable_trace(true);
  const int cores = spec_.cpu_cores_per_node > 0 ? spec_.cpu_cores_per_node
                                                 : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int n = 0; n < spec_.nodes; ++n) {
    cpu_pools_.push_back(std::make_shared<pipeline::CpuPool>(cores));
    for (int g = 0; g < spec_.gpus_per_node; ++g)
      gpus_.push_back(std::make_unique<SharedGpu>(*timeline_, *spec_.gpu, spec_.share));
  }
  gpu_jobs_.assign(gpus_.size(), 0);
}

Session::~Session() = default;

SharedGpu& Session::gpu(int index) {
  if (index < 0 || index >= gpus())
    throw InputError(fmt::format("session: GPU {}: it has GPUs 0 to {}", index, gpus() - 1));
  return *gpus_[static_cast<std::size_t>(index)];
}

JobId Session::add_job(SessionJob job) {
  if (ran_) throw std::logic_error("Session::add_job after run()");
  const auto id = static_cast<JobId>(slots_.size());
  const std::string who = fmt::format("session: job {} ('{}')", id, one_line_message(job.name));
  if (job.gpu < -1 || job.gpu >= gpus())
    throw InputError(
        fmt::format("{}: gpu {}: give -1 (the placement policy's choice) or 0 to {}", who, job.gpu, gpus() - 1));
  if (job.after && (*job.after < 0 || *job.after >= id))
    throw InputError(fmt::format("{}: after {}: name an earlier job (0 to {})", who, *job.after, id - 1));
  if (job.arrival < 0) throw InputError(fmt::format("{}: arrival {} ns is before the start", who, job.arrival));
  if (job.checkpoint_save < 0 || job.checkpoint_restore < 0)
    throw InputError(fmt::format("{}: checkpoint save {} ns / restore {} ns: give 0 or more", who, job.checkpoint_save,
                                 job.checkpoint_restore));
  if (job.job.cluster.gpus != 1 || job.job.cluster.nodes != 1)
    throw InputError(fmt::format("{}: cluster.gpus {} on {} node(s): a session's job runs on one GPU", who,
                                 job.job.cluster.gpus, job.job.cluster.nodes));
  auto s = std::make_unique<Slot>(clock_);
  s->out.id = id;
  s->out.name = job.name;
  s->out.arrival = job.arrival;
  s->out.start = job.arrival;
  s->out.end = job.arrival;
  if (job.trace_row < 0) job.trace_row = id;
  s->job = std::move(job);
  slots_.push_back(std::move(s));
  return id;
}

void Session::at(Time t, std::function<void(Session&)> action) {
  if (ran_) throw std::logic_error("Session::at after run()");
  if (t < 0) throw InputError(fmt::format("session: an action at {} ns is before the start", t));
  actions_.emplace_back(t, std::move(action));
}

void Session::on_job_end(std::function<void(Session&, const JobOutcome&)> observer) {
  end_observers_.push_back(std::move(observer));
}

Session::Slot& Session::slot(JobId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= slots_.size())
    throw InputError(fmt::format("session: job {}: it has jobs 0 to {}", id, static_cast<int>(slots_.size()) - 1));
  return *slots_[static_cast<std::size_t>(id)];
}

std::size_t Session::jobs() const { return slots_.size(); }
const JobOutcome& Session::outcome(JobId id) const { return slot(id).out; }
ClockEvent& Session::ended(JobId id) { return slot(id).ended; }

JobState Session::state(JobId id) const {
  Slot& s = slot(id);
  std::lock_guard lock(mu_);
  return s.out.state;
}

void Session::run() {
  if (ran_) throw std::logic_error("Session::run called twice");
  ran_ = true;
  std::vector<std::function<void()>> bodies;
  bodies.reserve(slots_.size() + 1);
  for (auto& s : slots_) bodies.push_back([this, p = s.get()] { run_job(*p); });
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
}

// ---- placement ------------------------------------------------------------------

void Session::enqueue(Slot& s) {
  std::lock_guard lock(mu_);
  s.request.job = s.out.id;
  s.request.queued = clock_.now();
  s.placed = std::make_unique<ClockEvent>(clock_);
  if (s.out.state == JobState::Added) s.out.state = JobState::Queued;
  queue_.push_back(&s);
}

void Session::dispatch() {
  std::vector<ClockEvent*> wake;
  {
    std::lock_guard lock(mu_);
    if (queue_.empty()) return;
    std::vector<GpuLoad> loads(gpus_.size());
    for (std::size_t g = 0; g < gpus_.size(); ++g)
      loads[g] = {static_cast<int>(g), static_cast<int>(g) / spec_.gpus_per_node, gpu_jobs_[g]};
    std::erase_if(queue_, [&](Slot* s) {
      const int g = spec_.placement->place(s->request, loads);
      if (g < 0) return false;
      if (g >= gpus() || (s->request.gpu >= 0 && g != s->request.gpu))
        throw std::logic_error(fmt::format("placement policy '{}' placed job {} on GPU {} (asked: {}, GPUs: {})",
                                           spec_.placement->name(), s->out.id, g, s->request.gpu, gpus()));
      ++gpu_jobs_[static_cast<std::size_t>(g)];
      ++loads[static_cast<std::size_t>(g)].jobs;
      s->out.gpu = g;
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
    --gpu_jobs_[static_cast<std::size_t>(s.out.gpu)];
  }
  dispatch();
}

// ---- control ----------------------------------------------------------------------

void Session::pause(JobId id) {
  Slot& s = slot(id);
  std::lock_guard lock(mu_);
  if (s.out.state == JobState::Running && s.pending == Request::None) s.pending = Request::Pause;
}

void Session::preempt(JobId id) {
  Slot& s = slot(id);
  std::lock_guard lock(mu_);
  if (s.out.state == JobState::Running && s.pending != Request::Preempt) s.pending = Request::Preempt;
}

void Session::resume(JobId id) {
  Slot& s = slot(id);
  ClockEvent* wake = nullptr;
  {
    std::lock_guard lock(mu_);
    s.pending = Request::None;  // a request not yet taken is withdrawn
    if ((s.out.state == JobState::Paused || s.out.state == JobState::Preempted) && s.resumed) wake = s.resumed.get();
  }
  if (wake) wake->set();
}

// At the job's step boundary: a pause waits there holding the GPU; a
// preemption drains the GPU, writes its checkpoint, gives its tensors back
// and leaves the GPU, then on resume waits for the placement policy to give
// it its GPU again (its Device, the process's context, stays), reads the
// checkpoint and allocates its state again.
void Session::between_steps(Slot& s, const StepBoundary& b) {
  std::unique_lock lock(mu_);
  const Request r = s.pending;
  if (r == Request::None) return;
  s.pending = Request::None;
  JobPause p;
  p.preempted = r == Request::Preempt;
  s.out.state = p.preempted ? JobState::Preempted : JobState::Paused;
  s.resumed = std::make_unique<ClockEvent>(clock_);
  ClockEvent& resumed = *s.resumed;
  lock.unlock();
  if (p.preempted) {
    b.drain();
    p.from = clock_.now();
    b.sleep_until(clock_.now() + s.job.checkpoint_save);
    b.release_memory();
    leave_gpu(s);
  } else {
    p.from = clock_.now();
  }
  resumed.wait();
  if (p.preempted) {
    {
      std::lock_guard relock(mu_);
      s.request.gpu = s.out.gpu;  // its Device is on that GPU
    }
    enqueue(s);
    dispatch();
    s.placed->wait();
    b.sleep_until(clock_.now() + s.job.checkpoint_restore);
    b.restore_memory();
  }
  lock.lock();
  p.to = clock_.now();
  s.out.pauses.push_back(p);
  s.out.state = JobState::Running;
}

// ---- a job's life -----------------------------------------------------------------

void Session::run_job(Slot& s) {
  JobOutcome& out = s.out;
  try {
    if (s.job.after) {
      Slot& before = slot(*s.job.after);
      before.ended.wait();
      out.arrival = std::max(clock_.now(), before.out.end + s.job.arrival);
    }
    clock_.sleep_until(out.arrival);
    out.start = out.end = out.arrival;
    s.request.gpu = s.job.gpu;
    enqueue(s);
    dispatch();
    s.placed->wait();
  } catch (const std::logic_error& e) {
    // Every other job has ended and the placement policy still keeps it queued.
    out.error =
        fmt::format("never started: placement policy '{}' kept it queued ({})", spec_.placement->name(), e.what());
    out.start = out.end = clock_.now();
    end_job(s);
    return;
  }
  {
    std::lock_guard lock(mu_);
    out.state = JobState::Running;
  }
  out.start = out.end = clock_.now();
  const int g = out.gpu;
  JobSpec j = s.job.job;
  if (j.data.source == DataSource::Modelled)
    j.data.model.cpu_pool = cpu_pools_[static_cast<std::size_t>(g / spec_.gpus_per_node)];
  j.cluster.gpu = spec_.gpu;
  j.cluster.gpus = 1;
  j.cluster.nodes = 1;
  j.cluster.node.first_device_index = s.job.trace_row;
  j.cluster.device.share = ShareContext{gpus_[static_cast<std::size_t>(g)].get(), s.job.priority, s.job.mig};
  j.schedule.keep_partial = true;
  j.schedule.between_steps = [this, &s](const StepBoundary& b) { between_steps(s, b); };
  j.trace = spec_.trace;
  try {
    // Made when it starts, so its context and weights take the GPU's memory
    // from then; destroyed at its end, giving them back.
    Job job(clock_, s.job.costs ? *s.job.costs : costs_, j);
    std::vector<std::function<void()>> threads = job.host_threads();
    threads.front()();            // one GPU: one host thread, this one
    job.device(0).synchronize();  // its work completes before its process exits
    out.record = job.record();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    out.error = e.what();  // at its start: no context, no slice, no room for its weights
  }
  if (out.record) {
    const RunRecord& rec = *out.record;
    if (rec.stopped) out.error = error_text(rec.stopped);
    // Its end: its last GPU work (train steps and kernels).
    const RankRecord& rank = rec.ranks.front();
    if (rank.train.steps > 0) out.end = std::max(out.end, rank.train.end);
    out.end = std::max(out.end, rank.last_kernel_end);
  }
  end_job(s);
}

void Session::end_job(Slot& s) {
  {
    std::lock_guard lock(mu_);
    s.out.state = s.out.error.empty() ? JobState::Finished : JobState::Failed;
    s.pending = Request::None;
  }
  leave_gpu(s);
  for (const auto& observe : end_observers_) observe(*this, s.out);
  s.ended.set();
}

}  // namespace gpemu
