// What the session's files share (session.cpp builds the session and its
// world, session_jobs.cpp adds jobs, session_queue.cpp places them,
// session_job.cpp runs and ends one, session_control.cpp pauses, preempts
// and resumes one, session_client.cpp attaches a client): a job's slot
// (Session::Slot), a live job's host thread (Session::LiveThread) and the
// helpers more than one of them uses (session_detail).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpemu/session.h"

namespace gpemu {
namespace session_detail {

enum class Request { None, Pause, Preempt };

// What ended a job: its exception's text (the host's memory, bad_alloc, is
// rethrown: the run cannot go on).
std::string error_text(const std::exception_ptr& e);

// A placement the policy may not make (not the GPUs asked for, not all of
// one node, not as many on each of its nodes, repeated or out of range):
// logic_error naming it.
void check_placement(const PlacementPolicy& policy, JobId id, const PlacementRequest& r, const std::vector<int>& gs,
                     int gpus, int per_node);

}  // namespace session_detail

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
  session_detail::Request pending = session_detail::Request::None;
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

// A live job's host thread (a job added while an open session runs).
struct Session::LiveThread {
  std::thread thread;
  std::atomic<bool> done{false};
};

}  // namespace gpemu
