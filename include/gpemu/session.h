// A session: the world that jobs run in, over time.
//
//   Session(Clock&, SessionSpec)            the clock, the GPUs (per node, one SharedGpu each, on one
//     add_job(SessionJob) -> JobId           timeline), each node's CPU pool
//     at(t, action)                           control under the clock: pause, preempt, resume
//     run()                                   every job: arrives -> queued -> placed -> runs -> ends
//     outcome(id), ended(id)                  what happened; its end, a ClockEvent to wait on
//
// A job's life cycle:
//
//   added --arrival (or `after` a job's end + delay)--> queued --placement--> running --> finished | failed
//                                                                  ^               |  ^
//                                                                  |      pause    v  | resume
//                                                                  |             paused
//                                                                  |   preempt (checkpoint: drain, save cost,
//                                                                  |            tensors back to the GPU)
//                                                                  +--resume-- preempted  (restore cost on restart)
//
// Each job is the one engine's Job (job.h) on one GPU of the session: a
// process's Device on that GPU's SharedGpu, so jobs placed on one GPU share it
// under the session's sharing policy (sharing_policy.h), its memory and its
// PCIe link. Which GPU a queued job gets, and when, is the placement policy's
// (PlacementPolicy below): "pinned" starts a job at once on the GPU it names
// (gpemu share: every job on GPU 0), "first-fit" gives each job a GPU of its
// own, the lowest free one, in the order jobs were queued (a cluster's FIFO
// scheduler). A job that ends gives its memory back and wakes the queue.
//
// Under the virtual clock a session of a thousand jobs is exact and
// deterministic: every job is a host thread under Clock::run_concurrently,
// waits (for its arrival, its placement, a resume, another job's end) go
// through the clock (ClockEvent), never by polling.
//
// Not yet: jobs of several GPUs (a Job still builds its own node for those),
// a storage model and a network shared by the jobs, placement or sharing
// policies written in Python (docs/architecture.md, "Sessions").
//
// Thread safety: add_job and at before run(); pause, preempt, resume and
// ended from the session's host threads (control actions, observers) while
// it runs; outcome after run().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/job.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu {

using JobId = int;  // the order jobs were added in, from 0

enum class JobState { Added, Queued, Running, Paused, Preempted, Finished, Failed };
std::string_view to_string(JobState s);

// ---- placement ----------------------------------------------------------------

// A queued job, as a placement policy sees it.
struct PlacementRequest {
  JobId job = 0;
  int gpu = -1;  // the GPU the job names (SessionJob::gpu); -1: any
  Time queued = 0;
};
// One GPU of the session, as a placement policy sees it.
struct GpuLoad {
  int index = 0;  // global: node * gpus_per_node + local
  int node = 0;
  int jobs = 0;  // jobs placed on it now (running or paused; a preempted job is off it)
};

// Which GPU a queued job starts on, and when. The session asks whenever the
// queue or the GPUs change (an arrival, an end, a preemption, a resume), for
// each queued job in queue order.
class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view name() const = 0;
  // The GPU to start `job` on now, or -1 to keep it queued.
  virtual int place(const PlacementRequest& job, std::span<const GpuLoad> gpus) const = 0;
};
// "pinned" or "first-fit"; InputError naming the accepted ones otherwise.
std::shared_ptr<const PlacementPolicy> placement_policy(std::string_view name);
std::vector<std::string> placement_policy_names();

// ---- the session --------------------------------------------------------------

struct SessionSpec {
  const GpuSpec* gpu = nullptr;  // required: every GPU's card
  int nodes = 1;
  int gpus_per_node = 1;
  ShareOptions share;  // how the jobs on one GPU share it
  // Null: "pinned" (each job starts at its arrival on the GPU it names).
  std::shared_ptr<const PlacementPolicy> placement;
  int cpu_cores_per_node = 0;  // the cores a node's jobs' modelled loaders share; 0: this machine's
  bool trace = false;          // keep the timeline's operations and host spans
};

struct SessionJob {
  std::string name;
  // A job of one GPU. The session sets its GPU, its place on the GPU,
  // keep_partial and between_steps; the rest (model, batch, data, schedule)
  // is the job's.
  JobSpec job;
  Time arrival = 0;                 // when it is queued (with `after`: this long after that job's end)
  std::optional<JobId> after;       // an earlier job whose end starts its arrival's delay
  int gpu = -1;                     // the GPU it asks for; -1: the placement policy chooses
  int priority = 0;                 // sharing policy priority: larger first
  std::string mig;                  // sharing policy mig: its slice's profile
  Duration checkpoint_save = 0;     // preemption: the checkpoint's write, after the GPU drains
  Duration checkpoint_restore = 0;  // the restart's read, before the first step after it
  // Its cost model; null: the session's.
  std::shared_ptr<const CostModel> costs;
  int trace_row = -1;  // the trace's device row of its Device; -1: its JobId
};

// A pause or preemption, from its request taking effect to the job running again.
struct JobPause {
  Time from = 0, to = 0;
  bool preempted = false;
};

struct JobOutcome {
  JobId id = 0;
  std::string name;
  JobState state = JobState::Added;
  int gpu = -1;      // where it ran (-1: never placed)
  Time arrival = 0;  // queued
  Time start = 0;    // placed and started (its arrival when it never started)
  Time end = 0;      // its GPU work ended, or it failed
  std::vector<JobPause> pauses;
  // The job's record (empty when it failed before its first step: no
  // context, no slice, no room for its weights; error says why).
  std::optional<RunRecord> record;
  std::string error;  // what ended it early; empty when it ran its schedule
  Duration jct() const { return end - arrival; }
};

class Session {
 public:
  // InputError for an invalid spec (no GPU, no nodes, a policy the card
  // cannot run). `costs` is the jobs' cost model unless a job brings its own.
  Session(Clock& clock, const CostModel& costs, SessionSpec spec);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Clock& clock() const { return clock_; }
  Timeline& timeline() { return *timeline_; }
  const SessionSpec& spec() const { return spec_; }
  int gpus() const { return static_cast<int>(gpus_.size()); }
  SharedGpu& gpu(int index);

  // Before run(). InputError naming the job and the field for a bad job
  // (a GPU out of range, an `after` that is not an earlier job, a job of
  // several GPUs).
  JobId add_job(SessionJob job);
  // Runs `action` on a control thread of the session at `t` (actions at the
  // same time in the order given): where pause, preempt and resume are called.
  void at(Time t, std::function<void(Session&)> action);
  // Called on the ending job's host thread when a job ends (before its end
  // event is set): a scheduler's hook.
  void on_job_end(std::function<void(Session&, const JobOutcome&)> observer);

  // Runs every job to its end (InputError as add_job; a job's own failure is
  // in its outcome). Call once.
  void run();

  // From the session's host threads while it runs. pause and preempt take
  // effect at the job's next step boundary; a request for a job that is not
  // running (queued, ended, already paused) is ignored, as is resume for a
  // job that is not paused or preempted.
  void pause(JobId id);
  void preempt(JobId id);
  void resume(JobId id);
  JobState state(JobId id) const;
  // Set when the job has ended (finished or failed); wait() on it from a host thread.
  ClockEvent& ended(JobId id);

  const JobOutcome& outcome(JobId id) const;
  std::size_t jobs() const;

 private:
  struct Slot;
  void run_job(Slot& s);
  void end_job(Slot& s);
  void enqueue(Slot& s);
  void dispatch();
  void leave_gpu(Slot& s);
  void between_steps(Slot& s, const StepBoundary& b);
  Slot& slot(JobId id) const;

  Clock& clock_;
  const CostModel& costs_;
  SessionSpec spec_;
  std::unique_ptr<Timeline> timeline_;
  std::vector<std::unique_ptr<SharedGpu>> gpus_;
  std::vector<std::shared_ptr<pipeline::CpuPool>> cpu_pools_;  // per node
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::pair<Time, std::function<void(Session&)>>> actions_;
  std::vector<std::function<void(Session&, const JobOutcome&)>> end_observers_;
  std::vector<int> gpu_jobs_;  // jobs on each GPU now
  std::vector<Slot*> queue_;   // queued, in order
  mutable std::mutex mu_;
  bool ran_ = false;
};

}  // namespace gpemu
