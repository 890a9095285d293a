// A session: the world that jobs run in, over time.
//
//   Session(Clock&, SessionSpec)            the clock, the GPUs (per node, one SharedGpu each, on one
//     add_job(SessionJob) -> JobId           timeline), each node's CPU pool and disk (data_storage);
//                                             while it runs too, from its host threads (a
//                                             scheduler), or from any thread while an open
//                                             session runs (a server's clients)
//     at(t, action)                           control under the clock: pause, preempt, resume
//     run()                                   every job: arrives -> queued -> placed -> runs -> ends
//     outcome(id), ended(id)                  what happened; its end, a ClockEvent to wait on
//     attach(ClientSpec) -> ClientHandle      a client: a job driven op by op from outside (a
//                                             torch script, a serve connection), its Devices
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
// A job of several GPUs pauses and is preempted as one: each of its ranks
// stops before the same step (the one after the step its furthest rank has
// started); preempted, every GPU drains, the checkpoint is written once for
// the job (through the session's checkpoint storage, queued behind other
// jobs' checkpoints), every rank gives its memory back, and the job leaves
// its GPUs; resumed, it waits for those GPUs, reads the checkpoint once and
// every rank allocates its state again.
//
// Each job is the one engine's Job (job.h) on GPUs of the session
// (ClusterSpec::on_node): one GPU, or several of one node for a data-parallel
// job (its ranks' all-reduce over the node's NVLink or PCIe links, which
// other jobs on the node share; its copies over the GPU's PCIe link), or as
// many on each of several nodes (ClusterSpec::on_cluster: its all-reduce
// also crosses the session's network, each node's NICs and the switch,
// which other jobs on those nodes share). Its Devices are processes of its
// own on them: on a shared session, views of each GPU's SharedGpu (those of
// a job of several nodes through its nodes' views), so jobs placed on one
// GPU share it under the session's sharing policy (sharing_policy.h), its
// memory and its PCIe link;
// on an exclusive session (SessionSpec::exclusive, `gpemu train`), whole
// cards, one job on a GPU at a time. Which GPUs a queued job gets, and when,
// is the placement policy's (PlacementPolicy below): "pinned" starts a job at
// once on the GPUs it names (gpemu share: every job on GPU 0), "first-fit"
// gives each job GPUs of its own, the lowest free ones of one node, in the
// order jobs were queued (a cluster's FIFO scheduler). A job that ends gives
// its memory and GPUs back and wakes the queue.
//
// Under the virtual clock a session of a thousand jobs is exact and
// deterministic: every job is a host thread under Clock::run_concurrently,
// waits (for its arrival, its placement, a resume, another job's end) go
// through the clock (ClockEvent), never by polling.
//
// A client (ClientSpec, Session::attach) is a job driven from outside, op by
// op: a torch script's process, a `gpemu serve` connection. It has no
// JobSpec and no host thread of the session's; as far as the session is
// concerned it is a job all the same: added now, placed on GPUs by the
// placement policy as it attaches (or refused), counted in their load,
// with Devices (processes) of its own on them, and ended with the session's
// end event and an outcome (no record) when it detaches.
//
// The jobs' data (SessionSpec::data_storage): each node's disk, or one
// store, that the jobs' modelled loaders read their samples from, each job
// an even share of it while it runs.
//
// Not yet: one session for a torch run's rank processes (each process's
// GPUs are a session of its own), clients that wait to be placed
// (docs/architecture.md, "Sessions").
//
// A running session takes jobs from its own host threads, under either
// clock: a control action (at), an on_job_end observer, a job's observer or
// hooks, so a scheduler in virtual time adds jobs as it decides. Such a job
// arrives at max(its arrival, now) (with `after`, its arrival stays a delay
// after that job's end) and its host threads join the session's
// (Clock::spawn: under the virtual clock due at now, after the threads
// already there), so it runs exactly and deterministically, as if it had
// been added up front with that arrival. An open session (SessionSpec::open,
// under the real clock) also takes jobs while it runs from any other thread
// (`gpemu serve`'s clients), on host threads of their own; run() returns
// once close() has been called and every job has ended.
//
// Thread safety: at before run(); add_job before run(), or from the
// session's host threads while it runs, or from any thread while an open
// session runs; attach before run(), or from any thread while an open
// session runs; a client's detach from any thread (under the virtual
// clock, from the session's host threads once it runs); pause, preempt, resume and ended from the
// session's host threads (control actions, observers) while it runs, or
// from any thread under the real clock; outcome once the job has ended
// (its ended() event is set).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
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
#include "gpemu/interconnect.h"
#include "gpemu/job.h"
#include "gpemu/pipeline/storage_model.h"
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
  int gpu = -1;  // the GPU the job names (SessionJob::gpu; its first, with several); -1: any
  Time queued = 0;
  int gpus = 1;  // GPUs it needs, all of one node
  // The GPUs it must have, rank order: a preempted job of several GPUs
  // (its Devices are on them); empty: any.
  std::vector<int> want;
  int nodes = 1;  // its GPUs' nodes: gpus / nodes GPUs on each
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
  // The GPU to start a job of one GPU on now, or -1 to keep it queued.
  virtual int place(const PlacementRequest& job, std::span<const GpuLoad> gpus) const = 0;
  // The job.gpus GPUs, all of one node (job.gpus / job.nodes on each of
  // job.nodes nodes), to start a job on now (rank order, node by node), or
  // none to keep it queued. Default: place() for one GPU; for several,
  // free_gpus_of_one_node (free_gpus_of_nodes).
  virtual std::vector<int> place_gpus(const PlacementRequest& job, std::span<const GpuLoad> gpus) const;
};
// job.gpus GPUs with no job, all of one node: job.want when given (all must
// be free), else from job.gpu on when it names one (all must be free), else
// the lowest free ones of the lowest node that has enough; none when there
// are not.
std::vector<int> free_gpus_of_one_node(const PlacementRequest& job, std::span<const GpuLoad> gpus);
// job.gpus / job.nodes GPUs with no job on each of job.nodes nodes: job.want
// when given (all must be free), else the lowest free ones of the lowest
// nodes that have enough; none when there are not.
std::vector<int> free_gpus_of_nodes(const PlacementRequest& job, std::span<const GpuLoad> gpus);
// The policy of that name: a built-in one ("pinned", "first-fit"; a new
// one is a file in src/workload/placement/ and a line in its registry), then
// those registered; InputError naming the accepted ones otherwise.
std::shared_ptr<const PlacementPolicy> placement_policy(std::string_view name);
// Adds a policy for the process's life, after the built-in ones (from then on
// placement_policy and gpemu's Python Session know it by its name());
// InputError when its name is empty or taken. The registry may be used from
// any thread.
void register_placement_policy(std::shared_ptr<const PlacementPolicy> policy);
// Every policy's name, built-in ones first.
std::vector<std::string> placement_policy_names();

// ---- the session --------------------------------------------------------------

struct SessionSpec {
  const GpuSpec* gpu = nullptr;  // required: every GPU's card
  int nodes = 1;
  int gpus_per_node = 1;
  ShareOptions share;  // how the jobs on one GPU share it
  // Each GPU is one job's at a time, as a whole card (no SharedGpu: its
  // memory is the job's alone, as `gpemu train`'s); the placement policy's
  // choice of a GPU that holds a job keeps the job queued. `share` is unused.
  bool exclusive = false;
  // Each node's topology (PCIe switches, fabric, NVLink), made when a job of
  // several GPUs is added; gpus and first_device_index are set per node.
  NodeOptions node;
  // The network joining the nodes (network_preset, parse_network), made when
  // the first job of several nodes is added; its jobs' all-reduces share it.
  NetworkSpec network;
  // Null: "pinned" (each job starts at its arrival on the GPU it names).
  std::shared_ptr<const PlacementPolicy> placement;
  int cpu_cores_per_node = 0;  // the cores a node's jobs' modelled loaders share; 0: this machine's
  bool trace = false;          // keep the timeline's operations and host spans
  // Where preempted jobs write their checkpoints and read them back on
  // restart: one request of SessionJob::checkpoint_bytes per job each time,
  // served first come first served with the other jobs' (StorageServer).
  // Unset: a checkpoint costs only checkpoint_save / checkpoint_restore.
  std::optional<pipeline::StorageDevice> checkpoint_storage;
  // Where the jobs' data is: each node's disk (with data_storage_shared,
  // one store every node reads, as `gpemu train --storage-shared`), which
  // the modelled loaders of the jobs on it read their samples from in place
  // of a storage of their own (JobSpec data.model.storage, and the
  // evaluation's). Each job reading it gets an even share of it while it
  // runs (pipeline::StorageShare: shared_by the job's ranks x the jobs), so
  // two data-bound jobs on one node's disk slow each other and a job alone
  // reads as it reads its own device. A job of several nodes reads each
  // node's disk as its own (it takes whole nodes, as their CPU pools), or
  // the shared store beside the other jobs. Unset: each job reads its own
  // storage (data.model.storage; none: memory), as alone.
  std::optional<pipeline::StorageDevice> data_storage;
  bool data_storage_shared = false;
  // Jobs may be added while it runs from any thread (Session::add_job), and
  // run() returns only once close() has been called and every job has ended:
  // a server's session. Under the real clock only (under the virtual clock
  // only the session's host threads run, and any session takes jobs from
  // them): InputError otherwise.
  bool open = false;
};

// The session a job runs alone in, on GPUs of its own (`gpemu train`,
// analyze): exclusive GPUs, one node of exactly the job's GPUs (its nodes'
// when it has several), the job's node options, its modelled loader's
// cores and its trace. The job added to it runs as Job::run would run it.
// InputError for an invalid job (validate).
SessionSpec session_for(const JobSpec& job);

struct SessionJob {
  std::string name;
  // A job of cluster.gpus GPUs of one node (of cluster.nodes nodes, as many
  // on each). The session sets its GPUs (cluster.gpu, on_node, on_cluster
  // and, for several nodes, network), keep_partial and between_steps, and
  // with SessionSpec::data_storage its modelled loaders' storage; the rest
  // (model, batch, data, schedule) is the job's. Its own
  // schedule.between_steps, if any, is called first at each step boundary.
  JobSpec job;
  Time arrival = 0;                 // when it is queued (with `after`: this long after that job's end)
  std::optional<JobId> after;       // an earlier job whose end starts its arrival's delay
  int gpu = -1;                     // the GPU it asks for (its first); -1: the placement policy chooses
  int priority = 0;                 // sharing policy priority: larger first
  std::string mig;                  // sharing policy mig: its slice's profile
  Duration checkpoint_save = 0;     // preemption: the checkpoint's write, after the GPU drains
  Duration checkpoint_restore = 0;  // the restart's read, before the first step after it
  // Preemption: the checkpoint's size, written (and read on restart) once for
  // the job through SessionSpec::checkpoint_storage, before checkpoint_save
  // (checkpoint_restore) is spent; 0: no storage request.
  std::uint64_t checkpoint_bytes = 0;
  // Its cost model; null: the session's.
  std::shared_ptr<const CostModel> costs;
  int trace_row = -1;               // the trace's device row of its first Device (then one a GPU); -1: its JobId
  JobObserver* observer = nullptr;  // its steps and checkpoints; not owned, outlives run()
  // Called on its first host thread once it is built on its GPUs, before
  // it runs (a front end's progress bar, its wall time); null: nothing.
  std::function<void(Job&)> on_start;
  // Called on the same thread when its Job is done with, before the Job (its
  // processes: contexts, memory) is destroyed, whenever on_start was called;
  // must not throw. Null: nothing.
  std::function<void()> on_stop;
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
  int gpu = -1;           // where it ran: its first GPU (-1: never placed)
  std::vector<int> gpus;  // all its GPUs, rank order
  Time arrival = 0;       // queued
  Time start = 0;         // placed and started (its arrival when it never started)
  Time end = 0;           // its GPU work ended, or it failed; a client: it detached
  std::vector<JobPause> pauses;
  // The job's record (empty when it failed before its first step: no
  // context, no slice, no room for its weights; error says why; and for a
  // client, which runs no step loop).
  std::optional<RunRecord> record;
  std::string error;                     // what ended it early; empty when it ran its schedule
  std::exception_ptr exception;          // that error as thrown (null for a placement that never came)
  std::vector<TraceDeviceName> devices;  // its Devices' trace rows (Job::trace_devices)
  Duration jct() const { return end - arrival; }
};

// The end of a job whose host threads have all returned: its GPU work
// completes (as its process exits), its record goes into `outcome`, with
// what stopped it (error, exception) and its end (its last GPU work). What a
// session does at each job's end, and `gpemu serve` at a client's job's.
void finish_outcome(Job& job, JobOutcome& outcome);

// A job's record; what ended it rethrown when it has none (it failed at its
// start) or, without keep_partial, when it stopped early (as Job::run).
const RunRecord& record_of(const JobOutcome& outcome, bool keep_partial = true);

// ---- clients ---------------------------------------------------------------

// A process driven from outside, op by op (Session::attach).
struct ClientSpec {
  std::string name;
  int gpu = -1;      // the GPU it names (its first); -1: the placement policy chooses
  int gpus = 1;      // the GPUs it has a Device on, all of one node
  int priority = 0;  // sharing policy priority: larger first
  std::string mig;   // sharing policy mig: its slice's profile
};

class Session;

// An attached client: its Devices, one a GPU, on the session's timeline
// (views of the GPUs' SharedGpus on a shared session, whole cards on an
// exclusive one; each Device's index is its GPU's). Destroying it or
// detach() ends it: its Devices go (contexts and memory back to the GPUs,
// work still queued on them left to the timeline), the GPUs leave its load,
// and its outcome (end: now) and end event are the session's. Move-only;
// destroyed before its session.
class ClientHandle {
 public:
  ClientHandle() = default;
  ClientHandle(ClientHandle&& other) noexcept;
  ClientHandle& operator=(ClientHandle&& other) noexcept;  // detaches this one first
  ~ClientHandle();

  bool attached() const { return session_ != nullptr; }
  JobId id() const { return id_; }  // its JobId in the session
  int gpus() const { return static_cast<int>(gpus_.size()); }
  int gpu(int rank = 0) const;  // the session's GPU of its rank-th Device
  Device& device(int rank = 0);
  // Ends it (nothing when it is not attached). The session's on_job_end
  // observers run on this thread.
  void detach();

 private:
  friend class Session;
  Session* session_ = nullptr;
  JobId id_ = -1;
  std::vector<int> gpus_;
  std::vector<std::unique_ptr<Device>> devices_;
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
  int gpus() const { return gpu_count_; }
  // A shared session's GPU (logic_error on an exclusive session).
  SharedGpu& gpu(int index);

  // Before run(); while it runs, from one of its host threads (an action,
  // an observer: the job's threads join the session's, Clock::spawn), or
  // from any thread while an open session runs (a job of several nodes is
  // then refused); a job added while it runs arrives at max(job.arrival,
  // now) (with `after`, job.arrival stays a delay after that job's end).
  // logic_error after run() returned, or close(), or from another thread
  // while a session that is not open runs. InputError naming the job and the field for a bad job
  // (a GPU out of range, an `after` that is not an earlier job, more GPUs
  // than a node has, more nodes than the session has, several GPUs on a
  // session sharing GPUs under a policy that holds a GPU for a whole step,
  // as fifo, no network).
  JobId add_job(SessionJob job);
  // A client that arrives now (before run(), or while an open session runs;
  // the same logic_error as add_job otherwise): placed at once by the
  // placement policy on client.gpus GPUs of one node, beside what runs there
  // (queued jobs do not go first), or refused (Error naming the policy), as
  // a busy GPU refuses a CUDA context; its state is Running until it
  // detaches. InputError naming the client and the field for a bad spec (a
  // GPU out of range, more GPUs than a node has, a slice on an exclusive
  // session); a Device it cannot have (no room for its context, no slice)
  // ends it failed, that error in its outcome, and is thrown. A client is
  // never paused or preempted (pause, preempt and resume ignore it), and
  // run() does not wait for it.
  ClientHandle attach(ClientSpec client);
  // Each GPU's load now, as the placement policy sees it: jobs and clients on it.
  std::vector<GpuLoad> loads() const;
  // Runs `action` on a control thread of the session at `t` (actions at the
  // same time in the order given): where pause, preempt and resume are called.
  void at(Time t, std::function<void(Session&)> action);
  // Called on the ending job's host thread when a job ends (before its end
  // event is set): a scheduler's hook.
  void on_job_end(std::function<void(Session&, const JobOutcome&)> observer);

  // Runs every job to its end (InputError as add_job; a job's own failure is
  // in its outcome); an open session's, until close() too. Call once.
  void run();
  // An open session takes no more jobs; run() returns once those it has
  // have ended. From any thread; a second call does nothing.
  void close();

  // From the session's host threads while it runs. pause and preempt take
  // effect at the job's next step boundary (for several GPUs, before the
  // step after the one its furthest rank has started, on every rank); a
  // request for a job that is not running (queued, ended, already paused)
  // is ignored, as is resume for a job that is not paused or preempted.
  void pause(JobId id);
  void preempt(JobId id);
  void resume(JobId id);
  JobState state(JobId id) const;
  // Set when the job has ended (finished or failed); wait() on it from a host thread.
  ClockEvent& ended(JobId id);

  const JobOutcome& outcome(JobId id) const;
  // The job's outcome moved out (its record with every step it kept), once
  // it has ended; outcome(id) keeps all but the record.
  JobOutcome take_outcome(JobId id);
  std::size_t jobs() const;

 private:
  struct Slot;
  void run_job(Slot& s);
  std::vector<std::function<void()>> bodies_of(Slot& s);
  void start_live(Slot& s);
  void run_rank(Slot& s, int rank);
  void start_job(Slot& s);
  JobSpec placed_spec(Slot& s);
  const Node& node(int index);
  const NetworkLinks& network();
  void end_job(Slot& s);
  void enqueue(Slot& s);
  void dispatch();
  void leave_gpu(Slot& s);
  void between_steps(Slot& s, const StepBoundary& b);
  void request_stop(JobId id, bool preempt);
  Time checkpoint_io(const Slot& s);
  Slot& slot(JobId id) const;
  // Clients (session_client.cpp): a client's slot, placed now, or an error;
  // its end, now.
  JobId add_client(const ClientSpec& client);
  void end_client(JobId id, std::exception_ptr error);
  std::vector<GpuLoad> loads_locked() const;  // mu_ held
  friend class ClientHandle;

  Clock& clock_;
  const CostModel& costs_;
  SessionSpec spec_;
  std::unique_ptr<Timeline> timeline_;
  int gpu_count_ = 0;
  std::vector<std::unique_ptr<SharedGpu>> gpus_;  // shared sessions
  std::vector<std::unique_ptr<Node>> nodes_;      // per node, its links; made for the first job of several GPUs
  std::unique_ptr<NetworkLinks> network_;         // made for the first job of several nodes
  std::vector<std::shared_ptr<pipeline::CpuPool>> cpu_pools_;    // per node
  std::unique_ptr<pipeline::StorageServer> checkpoint_storage_;  // SessionSpec::checkpoint_storage
  // SessionSpec::data_storage's tenants: per node (one object for all with data_storage_shared)
  std::vector<std::shared_ptr<pipeline::StorageShare>> data_shares_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::pair<Time, std::function<void(Session&)>>> actions_;
  std::vector<std::function<void(Session&, const JobOutcome&)>> end_observers_;
  std::vector<int> gpu_jobs_;  // jobs on each GPU now
  std::vector<Slot*> queue_;   // queued, in order
  mutable std::mutex mu_;
  // run() and live arrivals: slots_, whether it runs, the live jobs' threads.
  mutable std::mutex live_mu_;
  std::condition_variable live_cv_;
  bool ran_ = false;
  bool closed_ = false;  // open sessions: close() was called
  struct LiveThread;
  std::vector<std::unique_ptr<LiveThread>> live_threads_;  // jobs added while it runs
  int live_running_ = 0;
  std::exception_ptr live_error_;
};

// Job::run as the one-job case of a session: `job` alone on GPUs of its own
// (session_for), its record returned or its error thrown as Job::run does.
RunRecord run_alone(Clock& clock, const CostModel& costs, JobSpec job, JobObserver* observer = nullptr);

}  // namespace gpemu
