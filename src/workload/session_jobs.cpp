// Adding jobs to a session (Session::add_job): their checks, before the
// session runs or while it runs (from its host threads, Clock::spawn; from
// any thread into an open session, on host threads of their own), their
// bodies, and closing an open session to new jobs.
#include <algorithm>
#include <exception>
#include <memory>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "common/message_text.h"
#include "gpemu/error.h"
#include "gpemu/session.h"
#include "workload/session_impl.h"

namespace gpemu {

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

std::vector<std::function<void()>> Session::bodies_of(Slot& s) {
  std::vector<std::function<void()>> bodies;
  if (s.client) return bodies;  // driven from outside
  bodies.push_back([this, p = &s] { run_job(*p); });
  for (int r = 1; r < static_cast<int>(s.rank_done.size()); ++r)
    bodies.push_back([this, p = &s, r] { run_rank(*p, r); });
  return bodies;
}

}  // namespace gpemu
