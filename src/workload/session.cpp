#include "gpemu/session.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/message_text.h"
#include "gpemu/error.h"
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

}  // namespace

std::vector<int> PlacementPolicy::place_gpus(const PlacementRequest& job, std::span<const GpuLoad> gpus) const {
  if (job.nodes > 1) return free_gpus_of_nodes(job, gpus);
  if (job.gpus > 1) return free_gpus_of_one_node(job, gpus);
  const int g = place(job, gpus);
  return g < 0 ? std::vector<int>{} : std::vector<int>{g};
}

std::vector<int> free_gpus_of_one_node(const PlacementRequest& job, std::span<const GpuLoad> gpus) {
  if (!job.want.empty()) {
    for (const int g : job.want)
      if (g < 0 || static_cast<std::size_t>(g) >= gpus.size() || gpus[static_cast<std::size_t>(g)].jobs > 0) return {};
    return job.want;
  }
  std::vector<int> out;
  for (const GpuLoad& g : gpus) {
    if (job.gpu >= 0 && g.index < job.gpu) continue;
    if (!out.empty() && gpus[static_cast<std::size_t>(out.front())].node != g.node) {
      if (job.gpu >= 0) break;
      out.clear();
    }
    if (g.jobs == 0) {
      out.push_back(g.index);
    } else if (job.gpu >= 0) {
      break;  // the GPUs from the one it names must all be free
    }
    if (static_cast<int>(out.size()) == job.gpus) return out;
  }
  return {};
}

std::vector<int> free_gpus_of_nodes(const PlacementRequest& job, std::span<const GpuLoad> gpus) {
  if (!job.want.empty()) return free_gpus_of_one_node(job, gpus);  // its own GPUs, all free
  const int per = job.gpus / std::max(1, job.nodes);
  std::vector<int> out, node;  // the GPUs taken; the current node's free ones
  for (std::size_t i = 0; i < gpus.size() && static_cast<int>(out.size()) < job.gpus; ++i) {
    if (gpus[i].jobs == 0 && static_cast<int>(node.size()) < per) node.push_back(gpus[i].index);
    if (i + 1 == gpus.size() || gpus[i + 1].node != gpus[i].node) {  // the node's last GPU
      if (static_cast<int>(node.size()) == per) out.insert(out.end(), node.begin(), node.end());
      node.clear();
    }
  }
  return static_cast<int>(out.size()) == job.gpus ? out : std::vector<int>{};
}

struct Session::Slot {
  explicit Slot(Clock& clock) : ended(clock) {}
  SessionJob job;
  JobOutcome out;
  ClockEvent ended;
  // A job of several GPUs: ranks 1.. run on host threads of their own, which
  // wait for `started` (set when the job is built, or when it ends unbuilt)
  // and run bodies[rank] (none when it failed to start), then set their done.
  std::unique_ptr<ClockEvent> started;
  std::vector<std::function<void()>> bodies;
  std::vector<std::unique_ptr<ClockEvent>> rank_done;
  // One-shot events of the current wait: placed on a GPU, resumed.
  std::unique_ptr<ClockEvent> placed, resumed;
  PlacementRequest request;
  Request pending = Request::None;
  std::int64_t stop_at = 0;             // the step before which the pending request stops every rank
  std::vector<std::int64_t> last_step;  // per rank, the last step it started (-1: none)
  // A pause or preemption as the job's ranks reach it (each before step `at`).
  struct Stop {
    explicit Stop(Clock& clock) : restarted(clock) {}
    std::int64_t at = 0;
    int arrived = 0, released = 0, left = 0;  // ranks
    JobPause pause;
    Time write_end = 0, restore_end = 0;
    ClockEvent restarted;  // preempted: its GPUs again and the checkpoint read (restore_end set)
  };
  std::unique_ptr<Stop> stop;
  bool on_gpu = false;  // placed and not left (a preempted job has left)
  bool client = false;  // attached (Session::attach): no host thread of the session's
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

// A live job's host thread (a job added while an open session runs).
struct Session::LiveThread {
  std::thread thread;
  std::atomic<bool> done{false};
};

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

JobId Session::add_job(SessionJob job) {
  std::lock_guard live(live_mu_);
  const bool running = ran_;  // a live arrival
  // From one of the session's host threads (an action, an observer, a job's
  // thread: a scheduler), under either clock, its threads join the session's
  // (Clock::spawn); from another thread, an open session's (start_live).
  const bool spawned = running && clock_.on_host_thread();
  if (running && !spawned && !spec_.open)
    throw std::logic_error(
        "Session::add_job while the session runs (or after run() returned) from a thread that is not one of its host "
        "threads: add a job before run(), or from a host thread of the session (an at() action, an on_job_end "
        "observer, a job's observer or hooks), or from any thread while an open session runs under the real clock");
  if (closed_) throw std::logic_error("Session::add_job after close()");
  const auto id = static_cast<JobId>(slots_.size());
  const std::string who = fmt::format("session: job {} ('{}')", id, one_line_message(job.name));
  if (job.gpu < -1 || job.gpu >= gpus())
    throw InputError(
        fmt::format("{}: gpu {}: give -1 (the placement policy's choice) or 0 to {}", who, job.gpu, gpus() - 1));
  if (job.after && (*job.after < 0 || *job.after >= id))
    throw InputError(fmt::format("{}: after {}: name an earlier job (0 to {})", who, *job.after, id - 1));
  if (job.arrival < 0) throw InputError(fmt::format("{}: arrival {} ns is before the start", who, job.arrival));
  if (running) {
    if (job.job.cluster.nodes > 1 && !spawned)
      throw InputError(fmt::format(
          "{}: cluster.nodes {}: a job of several nodes is added before the session runs or from its host threads", who,
          job.job.cluster.nodes));
    if (!job.after) job.arrival = std::max(job.arrival, clock_.now());  // with `after`, a delay after that job's end
  }
  if (job.checkpoint_save < 0 || job.checkpoint_restore < 0)
    throw InputError(fmt::format("{}: checkpoint save {} ns / restore {} ns: give 0 or more", who, job.checkpoint_save,
                                 job.checkpoint_restore));
  const int gpn = spec_.gpus_per_node, want = job.job.cluster.gpus, nodes = job.job.cluster.nodes;
  if (nodes < 1 || nodes > spec_.nodes)
    throw InputError(fmt::format("{}: cluster.nodes {}: a session's job runs on GPUs of one node, or of 2 to {} nodes",
                                 who, nodes, spec_.nodes));
  if (nodes > 1 && job.gpu >= 0 && job.gpu % gpn != 0)
    throw InputError(
        fmt::format("{}: gpu {}: a job of several nodes starts at a node's first GPU, or -1", who, job.gpu));
  if (nodes > 1 && (want % nodes != 0 || want / nodes > gpn))
    throw InputError(fmt::format("{}: cluster.gpus {} on {} nodes: give as many on each node, 1 to {} (a node's GPUs)",
                                 who, want, nodes, gpn));
  if (want < 1 || (want > gpn && nodes == 1))
    throw InputError(fmt::format("{}: cluster.gpus {}: give 1 to {} (a node's GPUs)", who, want, gpn));
  if (job.gpu >= 0 && nodes == 1 && job.gpu % gpn + want > gpn)
    throw InputError(
        fmt::format("{}: gpu {} and {} GPUs from it: they pass node {}'s last GPU ({}); give a GPU "
                    "from which {} GPUs fit in its node, or -1",
                    who, job.gpu, want, job.gpu / gpn, (job.gpu / gpn + 1) * gpn - 1, want));
  auto s = std::make_unique<Slot>(clock_);
  if (want > 1 && uses_links(job.job) && !spec_.exclusive && gpus_.front()->exclusive_steps())
    throw InputError(fmt::format(
        "{}: {} GPUs on GPUs shared under '{}', which gives a step the GPU alone, while a data-parallel rank waits "
        "for its peers inside its step: give the session exclusive GPUs, or a policy that divides kernels "
        "(timeslice, priority, mps)",
        who, want, to_string(spec_.share.policy)));
  if (want > 1 && nodes > 1 && uses_links(job.job)) {
    try {
      for (int n = 0; n < spec_.nodes; ++n) node(n);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: its nodes: {}", who, e.what()));
    }
    try {
      network();
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: the session's network (SessionSpec::network): {}", who, e.what()));
    }
  }
  if (want > 1 && nodes == 1 && uses_links(job.job)) {
    try {
      for (int n = 0; n < spec_.nodes; ++n) node(n);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: its node: {}", who, e.what()));
    }
  }
  if (want > 1) {
    s->started = std::make_unique<ClockEvent>(clock_);
    for (int r = 0; r < want; ++r) s->rank_done.push_back(std::make_unique<ClockEvent>(clock_));
  }
  s->last_step.assign(static_cast<std::size_t>(want), -1);
  s->out.id = id;
  s->out.name = job.name;
  s->out.arrival = job.arrival;
  s->out.start = job.arrival;
  s->out.end = job.arrival;
  if (job.trace_row < 0) job.trace_row = id;
  s->job = std::move(job);
  slots_.push_back(std::move(s));
  if (spawned) {
    std::vector<std::function<void()>> bodies = bodies_of(*slots_.back());
    try {
      clock_.spawn(std::move(bodies.front()));
    } catch (...) {
      slots_.pop_back();  // no thread (the host's stacks ran out): the job was not added
      throw;
    }
    for (std::size_t b = 1; b < bodies.size(); ++b) clock_.spawn(std::move(bodies[b]));
  } else if (running) {
    start_live(*slots_.back());
  }
  return id;
}

// A job added while the session runs: its bodies on host threads of their
// own (the real clock's threads run in parallel, as run_concurrently's do).
// Threads of live jobs that have ended are joined here. live_mu_ held.
void Session::start_live(Slot& s) {
  std::erase_if(live_threads_, [](const std::unique_ptr<LiveThread>& t) {
    if (!t->done) return false;
    t->thread.join();
    return true;
  });
  for (std::function<void()>& body : bodies_of(s)) {
    auto t = std::make_unique<LiveThread>();
    ++live_running_;
    t->thread = std::thread([this, body = std::move(body), p = &s, done = &t->done] {
      std::exception_ptr error;
      try {
        body();
      } catch (...) {
        // The host's memory (bad_alloc): run() rethrows it; the job ends
        // failed, so that whoever waits for its end does not wait forever.
        error = std::current_exception();
        if (!p->ended.is_set()) {
          p->out.error = "the host ran out of memory";
          p->out.exception = error;
          try {
            end_job(*p);
          } catch (...) {  // NOLINT: its end is set below whatever happened
          }
          p->ended.set();
        }
      }
      std::lock_guard relock(live_mu_);
      if (error && !live_error_) live_error_ = error;
      --live_running_;
      *done = true;
      live_cv_.notify_all();
    });
    live_threads_.push_back(std::move(t));
  }
}

void Session::close() {
  std::lock_guard live(live_mu_);
  closed_ = true;
  live_cv_.notify_all();
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

std::vector<std::function<void()>> Session::bodies_of(Slot& s) {
  std::vector<std::function<void()>> bodies;
  if (s.client) return bodies;  // driven from outside
  bodies.push_back([this, p = &s] { run_job(*p); });
  for (int r = 1; r < static_cast<int>(s.rank_done.size()); ++r)
    bodies.push_back([this, p = &s, r] { run_rank(*p, r); });
  return bodies;
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

// ---- placement ------------------------------------------------------------------

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

// ---- control ----------------------------------------------------------------------

void Session::pause(JobId id) { request_stop(id, false); }
void Session::preempt(JobId id) { request_stop(id, true); }

// Taken by each rank before the step after the one its furthest rank has
// started: no rank has started it, and every rank will.
void Session::request_stop(JobId id, bool preempt) {
  Slot& s = slot(id);
  std::lock_guard lock(mu_);
  if (s.client || s.out.state != JobState::Running || s.pending == Request::Preempt) return;
  if (s.pending == Request::Pause && !preempt) return;
  if (s.pending == Request::None) s.stop_at = *std::max_element(s.last_step.begin(), s.last_step.end()) + 1;
  s.pending = preempt ? Request::Preempt : Request::Pause;
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

// The job's checkpoint through the session's storage, one request from now
// (with mu_ held, so requests arrive in time order); when it ends.
Time Session::checkpoint_io(const Slot& s) {
  const Time now = clock_.now();
  if (!checkpoint_storage_ || s.job.checkpoint_bytes == 0) return now;
  return checkpoint_storage_->serve(now, s.job.checkpoint_bytes);
}

// At a rank's step boundary. A pause stops every rank before the same step,
// holding the GPUs; a preemption drains every GPU, writes the checkpoint
// once for the job, gives every rank's tensors back and leaves the GPUs;
// then on resume the job waits for the placement policy to give it its GPUs
// again (its Devices, the processes' contexts, stay), reads the checkpoint
// and every rank allocates its state again. The pause's span runs from the
// last rank stopping to the last rank going on.
void Session::between_steps(Slot& s, const StepBoundary& b) {
  const int ranks = static_cast<int>(s.last_step.size());
  std::unique_lock lock(mu_);
  s.last_step[static_cast<std::size_t>(b.rank())] = b.iterations();
  if (!s.stop) {
    if (s.pending == Request::None || b.iterations() != s.stop_at) return;
    s.stop = std::make_unique<Slot::Stop>(clock_);
    s.stop->at = s.stop_at;
    s.stop->pause.preempted = s.pending == Request::Preempt;
    s.pending = Request::None;
    s.out.state = s.stop->pause.preempted ? JobState::Preempted : JobState::Paused;
    s.resumed = std::make_unique<ClockEvent>(clock_);
  } else if (b.iterations() != s.stop->at) {
    return;  // a rank that went on while its peers leave the stop
  }
  Slot::Stop& st = *s.stop;
  ClockEvent& resumed = *s.resumed;
  const bool preempted = st.pause.preempted;
  lock.unlock();
  if (preempted) b.drain();
  lock.lock();
  if (++st.arrived == ranks) {
    st.pause.from = clock_.now();
    if (preempted) st.write_end = checkpoint_io(s) + s.job.checkpoint_save;
  }
  lock.unlock();
  if (preempted) {
    b.barrier();  // every GPU has drained and the checkpoint's end is known
    b.sleep_until(st.write_end);
    b.release_memory();
    lock.lock();
    const bool all = ++st.released == ranks;
    lock.unlock();
    if (all) leave_gpu(s);
  }
  resumed.wait();
  if (preempted) {
    if (b.rank() == 0) {
      {
        std::lock_guard relock(mu_);
        s.request.gpu = s.out.gpu;  // its Devices are on those GPUs
        if (ranks > 1) s.request.want = s.out.gpus;
      }
      enqueue(s);
      dispatch();
      s.placed->wait();
      {
        std::lock_guard relock(mu_);
        st.restore_end = checkpoint_io(s) + s.job.checkpoint_restore;
      }
      st.restarted.set();
    } else {
      st.restarted.wait();
    }
    b.sleep_until(st.restore_end);
    b.restore_memory();
  }
  lock.lock();
  if (++st.left < ranks) return;
  st.pause.to = clock_.now();
  s.out.pauses.push_back(st.pause);
  s.out.state = JobState::Running;
  s.stop.reset();
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
  start_job(s);
  end_job(s);
}

// The job's spec on its GPUs: the session's card, its node's links (a job of
// several GPUs), the GPUs' shared views (a shared session), its node's CPUs
// and, with SessionSpec::data_storage, its node's disk.
JobSpec Session::placed_spec(Slot& s) {
  JobSpec j = s.job.job;
  const int per_node = spec_.gpus_per_node, node = s.out.gpu / per_node;
  // Its modelled loaders share the node's cores with the other jobs' (unless
  // the job states the machine's loader threads itself, or brings a pool). A
  // job of several nodes has them to itself (it takes whole nodes), and its
  // loaders take each node's own cores (node_loaders.h), not its first node's.
  pipeline::LoaderModelOptions& m = j.data.model;
  if (j.data.source == DataSource::Modelled && m.loader_threads == 0 && !m.cpu_pool && j.cluster.nodes == 1)
    m.cpu_pool = cpu_pools_[static_cast<std::size_t>(node)];
  // Its modelled loaders read the node's disk (or the shared store) with the
  // other jobs on it; those starting at this instant join it before any of
  // them reads, so that each reads its share from its first request.
  if (spec_.data_storage) {
    const bool own_nodes = j.cluster.nodes > 1 && !spec_.data_storage_shared;
    if (read_from_session_storage(j, *spec_.data_storage, spec_.data_storage_shared,
                                  own_nodes ? nullptr : data_shares_[static_cast<std::size_t>(node)]))
      clock_.yield_to_peers();
  }
  j.cluster.gpu = spec_.gpu;
  NodeGpus& on = j.cluster.on_node;
  on.timeline = timeline_.get();
  // Made by add_job for a job of several GPUs of one node; a job of several
  // nodes is a view of the session's nodes and network (on_cluster).
  {
    std::lock_guard live(live_mu_);  // a job added while the session runs may make a node's links
    on.node = j.cluster.nodes == 1 ? nodes_[static_cast<std::size_t>(node)].get() : nullptr;
  }
  on.gpus.clear();
  on.shares.clear();
  // A job of several nodes that uses their links reaches its GPUs' shared
  // views through its nodes (on_cluster, below).
  const bool view = j.cluster.nodes > 1 && network_, via_nodes = view && uses_links(j);
  auto share = [&](int g) { return ShareContext{gpus_[static_cast<std::size_t>(g)].get(), s.job.priority, s.job.mig}; };
  for (const int g : s.out.gpus) {
    on.gpus.push_back(j.cluster.nodes == 1 ? g % per_node : g);
    if (!spec_.exclusive && !via_nodes) on.shares.push_back(share(g));
  }
  ClusterGpus& c = j.cluster.on_cluster;
  c = {};
  if (view) {
    const std::size_t per = s.out.gpus.size() / static_cast<std::size_t>(j.cluster.nodes);
    for (std::size_t k = 0; k < s.out.gpus.size(); k += per) {
      const int n = s.out.gpus[k] / per_node;
      NodeGpus ng;
      ng.timeline = timeline_.get();
      ng.node = nodes_[static_cast<std::size_t>(n)].get();
      for (std::size_t i = k; i < k + per; ++i) {
        ng.gpus.push_back(s.out.gpus[i] % per_node);
        if (!spec_.exclusive) ng.shares.push_back(share(s.out.gpus[i]));
      }
      c.nodes.push_back(std::move(ng));
      c.network_nodes.push_back(n);
    }
    c.network = network_.get();
    j.cluster.network = spec_.network;
  }
  j.cluster.node.first_device_index = s.job.trace_row;
  j.schedule.keep_partial = true;
  j.schedule.between_steps = [this, &s, own = std::move(j.schedule.between_steps)](const StepBoundary& b) {
    if (own) own(b);
    between_steps(s, b);
  };
  j.trace = spec_.trace;
  return j;
}

// Builds the job on its GPUs and runs it: rank 0 on this thread, the others
// on theirs (run_rank); its record once every rank is done and its GPU work
// has completed.
void Session::start_job(Slot& s) {
  JobOutcome& out = s.out;
  // Made when it starts, so its context and weights take the GPU's memory
  // from then; destroyed at its end, giving them back.
  std::optional<Job> job;
  // on_stop, once on_start was called, before the Job goes (declared after it).
  struct Stop {
    const std::function<void()>* hook = nullptr;
    ~Stop() {
      if (hook && *hook) (*hook)();
    }
  } stop;
  std::vector<std::function<void()>> threads;
  try {
    job.emplace(clock_, s.job.costs ? *s.job.costs : costs_, placed_spec(s));
    out.devices = job->trace_devices();
    if (s.job.on_start) {
      stop.hook = &s.job.on_stop;
      s.job.on_start(*job);
    }
    threads = job->host_threads(s.job.observer);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    out.error = e.what();  // at its start: no context, no slice, no room for its weights, a bad spec
    out.exception = std::current_exception();
    return;  // end_job lets its other ranks' threads go
  }
  if (s.started) {
    s.bodies = std::move(threads);
    s.started->set();
    s.bodies.front()();
    for (std::size_t r = 1; r < s.rank_done.size(); ++r) s.rank_done[r]->wait();
  } else {
    threads.front()();  // one GPU: one host thread, this one
  }
  finish_outcome(*job, out);
}

void finish_outcome(Job& job, JobOutcome& out) {
  for (int g = 0; g < job.gpus(); ++g) job.device(g).synchronize();  // its work completes before its process exits
  out.record = job.record();
  const RunRecord& rec = *out.record;
  if (rec.stopped) {
    out.error = error_text(rec.stopped);
    out.exception = rec.stopped;
  }
  // Its end: its last GPU work (train steps and kernels).
  for (const RankRecord& rank : rec.ranks) {
    if (rank.train.steps > 0) out.end = std::max(out.end, rank.train.end);
    out.end = std::max(out.end, rank.last_kernel_end);
  }
}

// A rank after the first of a job of several GPUs, on a host thread of its own.
void Session::run_rank(Slot& s, int rank) {
  try {
    s.started->wait();
  } catch (const std::logic_error&) {
    // Nothing could start the job (every thread waits): its first thread
    // fails it the same way.
  }
  if (s.started->is_set() && !s.bodies.empty()) s.bodies[static_cast<std::size_t>(rank)]();
  s.rank_done[static_cast<std::size_t>(rank)]->set();
}

SessionSpec session_for(const JobSpec& job) {
  validate(job);  // the job's own errors first, as Job would give them
  SessionSpec s;
  s.gpu = job.cluster.gpu;
  s.nodes = job.cluster.nodes;
  s.gpus_per_node = std::max(1, job.cluster.gpus / job.cluster.nodes);
  if (s.nodes * s.gpus_per_node != job.cluster.gpus) {  // GPUs that share no links, spread unevenly: one node
    s.nodes = 1;
    s.gpus_per_node = job.cluster.gpus;
  }
  s.exclusive = true;
  s.node = job.cluster.node;
  s.network = job.cluster.network;
  s.cpu_cores_per_node = job.data.model.cores;
  s.trace = job.trace;
  return s;
}

const RunRecord& record_of(const JobOutcome& o, bool keep_partial) {
  if (!o.record) {
    if (o.exception) std::rethrow_exception(o.exception);
    throw std::runtime_error(fmt::format("job {} ('{}') did not run: {}", o.id, o.name, o.error));
  }
  if (o.record->stopped && !keep_partial) std::rethrow_exception(o.record->stopped);
  return *o.record;
}

RunRecord run_alone(Clock& clock, const CostModel& costs, JobSpec job, JobObserver* observer) {
  Session session(clock, costs, session_for(job));
  const bool keep_partial = job.schedule.keep_partial;
  SessionJob one;
  one.name = "job";
  one.job = std::move(job);
  one.observer = observer;
  session.add_job(std::move(one));
  session.run();
  return record_of(session.outcome(0), keep_partial);
}

void Session::end_job(Slot& s) {
  {
    std::lock_guard lock(mu_);
    s.out.state = s.out.error.empty() ? JobState::Finished : JobState::Failed;
    s.pending = Request::None;
  }
  if (s.started) s.started->set();  // its other ranks' threads, when it never ran
  leave_gpu(s);
  for (const auto& observe : end_observers_) observe(*this, s.out);
  s.ended.set();
}

// ---- clients (the rest in session_client.cpp) ------------------------------------

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

// A client's slot, running on the GPUs the placement policy gives it now.
JobId Session::add_client(const ClientSpec& c) {
  std::lock_guard live(live_mu_);
  if (ran_ && !spec_.open) throw std::logic_error("Session::attach after run() on a session that is not open");
  if (closed_) throw std::logic_error("Session::attach after close()");
  const auto id = static_cast<JobId>(slots_.size());
  const std::string who = fmt::format("session: client {} ('{}')", id, one_line_message(c.name));
  const int gpn = spec_.gpus_per_node;
  if (c.gpus < 1 || c.gpus > gpn)
    throw InputError(fmt::format("{}: gpus {}: give 1 to {} (a node's GPUs)", who, c.gpus, gpn));
  if (c.gpu < -1 || c.gpu >= gpus())
    throw InputError(
        fmt::format("{}: gpu {}: give -1 (the placement policy's choice) or 0 to {}", who, c.gpu, gpus() - 1));
  if (c.gpu >= 0 && c.gpu % gpn + c.gpus > gpn)
    throw InputError(
        fmt::format("{}: gpu {} and {} GPUs from it: they pass node {}'s last GPU", who, c.gpu, c.gpus, c.gpu / gpn));
  if (spec_.exclusive && !c.mig.empty())
    throw InputError(fmt::format("{}: mig '{}': an exclusive session's GPUs are whole cards", who, c.mig));
  auto s = std::make_unique<Slot>(clock_);
  s->client = true;
  s->job.name = c.name;
  s->job.gpu = c.gpu;
  s->job.priority = c.priority;
  s->job.mig = c.mig;
  s->job.job.cluster.gpus = c.gpus;
  s->last_step.assign(1, -1);
  s->request = PlacementRequest{id, c.gpu, clock_.now(), c.gpus, {}, 1};
  JobOutcome& out = s->out;
  out.id = id;
  out.name = c.name;
  out.arrival = out.start = out.end = s->request.queued;
  {
    std::lock_guard lock(mu_);
    const std::vector<GpuLoad> loads = loads_locked();
    std::vector<int> gs = spec_.placement->place_gpus(s->request, loads);
    if (!gs.empty()) check_placement(*spec_.placement, id, s->request, gs, gpus(), gpn);
    if (gs.empty() || (spec_.exclusive && std::any_of(gs.begin(), gs.end(), [&](int g) { return gpu_jobs_[g] > 0; })))
      throw Error(
          fmt::format("{}: placement policy '{}' gives it no GPU now{} (a client is placed as it attaches, "
                      "or refused)",
                      who, spec_.placement->name(),
                      spec_.exclusive ? ", or only GPUs that hold a job (an exclusive session's hold one)" : ""));
    for (const int g : gs) ++gpu_jobs_[static_cast<std::size_t>(g)];
    out.gpu = gs.front();
    out.gpus = std::move(gs);
    out.state = JobState::Running;
    s->on_gpu = true;
  }
  slots_.push_back(std::move(s));
  return id;
}

// The client's end, now: what ended it (null: it detached), its GPUs left,
// the observers told, its end event set.
void Session::end_client(JobId id, std::exception_ptr error) {
  Slot& s = slot(id);
  s.out.end = std::max(s.out.start, clock_.now());
  if (error) {
    s.out.error = error_text(error);
    s.out.exception = error;
  }
  end_job(s);
}

}  // namespace gpemu
