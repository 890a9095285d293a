// The training job: the one engine that every front end drives (`gpemu
// train`, `train --dlio-config`, `analyze`, the benches, the C++ API).
//
//   JobSpec  --(a front end fills it)-->  Job(Clock&, const CostModel&, JobSpec)  --run()-->  RunRecord
//   summarize(RunRecord), dlio::metrics(RunRecord): pure functions of the record
//
// Per rank (one emulated GPU and one host thread each, run under
// Clock::run_concurrently so virtual-clock runs are deterministic), per epoch:
//
//   for batch in source:               # next() blocks until the batch is in host memory
//       walk the StepProgram           # the only thing that differs between jobs
//       [checkpoint]                   # at the points the schedule names
//   [evaluation]                       # an eval phase after the epochs the schedule names
//
// A StepProgram is data: the list of operations one step issues (see
// StepOp). A PyTorch training step is
//   H2D copy of the batch, activations allocated, forward, backward (in chunks
//   with DDP's gradient-ready points), wait for the all-reduce, optimizer
//   step, activations freed, loss.item()
// and a DLIO step is
//   compute (a draw of computation_time), synchronize, release the batch.
// Memory follows the model zoo's traced tensor lifetimes through each
// device's caching allocator where the model is in the zoo (the same plan
// `gpemu predict` replays), else an even split of the cost model's figures
// (flagged in RunRecord::memory_plan), so OutOfMemoryError comes at the same
// batch as predict says.
//
// Data stall of batch i on a GPU: the time its GPU was idle because the batch
// was not ready, i.e. the overlap of [host called next(), next() returned)
// with [end of the GPU's previous work on the training stream, H2D start of
// batch i). docs/train.md has the details.
//
// Thread safety: a Job is used by one thread; run() starts the host threads.
// JobObserver callbacks come from the ranks' host threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "gpemu/clock.h"
#include "gpemu/cost/cost_model.h"
#include "gpemu/device/device.h"
#include "gpemu/interconnect/cluster.h"
#include "gpemu/interconnect/collectives.h"
#include "gpemu/interconnect/topology.h"
#include "gpemu/job/record.h"
#include "gpemu/job/spec.h"
#include "gpemu/job/step_program.h"
#include "gpemu/pipeline/batch_source.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu {

// Progress: called from the ranks' host threads after each step.
struct StepEvent {
  int gpu = 0;
  RunPhase phase = RunPhase::Train;
  int epoch = 0;                     // 1-based
  std::uint64_t step = 0;            // 1-based within the epoch
  std::uint64_t steps = 0;           // the epoch's steps (0: unknown)
  std::int64_t done = 0, total = 0;  // train steps of this rank so far / planned
  const StepRecord* record = nullptr;
};
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void on_step(const StepEvent&) {}
  virtual void on_checkpoint(const CheckpointRecord&) {}
  // A rank ended a phase (a train epoch or an evaluation) and the host has
  // waited for its work: the mark is final.
  virtual void on_phase_end(const EpochMark&) {}
};

class Job {
 public:
  // Builds the devices (one Device for one GPU, a Node for several, a
  // Cluster of Nodes joined by the network for several nodes) on a timeline
  // of `clock`. InputError for an invalid spec or unknown model.
  Job(Clock& clock, const CostModel& costs, JobSpec spec);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  Clock& clock() const { return clock_; }
  Timeline& timeline() { return *timeline_; }
  const JobSpec& spec() const { return spec_; }
  int gpus() const { return spec_.cluster.gpus; }
  Device& device(int gpu);
  Node* node() { return node_.get(); }           // one node of several GPUs
  Cluster* cluster() { return cluster_.get(); }  // several nodes
  const StepCost& cost() const { return cost_; }
  std::vector<TraceDeviceName> trace_devices() const;
  // Train steps each rank will run (0 when the source cannot tell before running).
  std::int64_t planned_iterations() const;

  // Runs the schedule. Throws what a host thread threw first
  // (OutOfMemoryError, a loader's InputError, ...). Call once.
  RunRecord run(JobObserver* observer = nullptr);

  // run() in two halves, for a caller that runs the host threads itself
  // (gpemu share runs several jobs' threads under one clock): the bodies of
  // the ranks' host threads, to be run concurrently under clock(); they do
  // not throw, a failure is kept. Then, once every body has returned and
  // the job's work has completed, its record, with RunRecord::stopped set
  // when a body failed. Call each once, in this order, instead of run().
  std::vector<std::function<void()>> host_threads(JobObserver* observer = nullptr);
  RunRecord record();

 private:
  struct Rank;
  void run_rank(Rank& r, JobObserver* observer);
  void run_phase(Rank& r, RunPhase phase, int epoch, pipeline::BatchSource& source, JobObserver* observer, bool& stop);
  void gpu_preprocess(Rank& r, const pipeline::LoadedBatch& b);
  void checkpoint(Rank& r, int epoch, std::uint64_t step, JobObserver* observer);
  void settle_records(Rank& r);
  void keep_step(Rank& r, StepRecord&& s);
  void keep_kernel(Rank& r, KernelSpan k, Duration busy);
  void allocate_persistent(Rank& r);
  void barrier(int rank);
  friend class StepBoundary;

  Clock& clock_;
  const CostModel& costs_;
  JobSpec spec_;
  StepCost cost_;
  std::unique_ptr<Timeline> own_timeline_;  // null on a shared GPU, whose timeline it is
  Timeline* timeline_ = nullptr;
  std::vector<std::unique_ptr<Device>> devices_;  // without a node
  std::unique_ptr<Node> node_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<AllReduceGroup> comm_;
  std::unique_ptr<class HostSync> sync_;
  std::unique_ptr<class DdpReducer> reducer_;
  struct Plan;
  std::unique_ptr<Plan> plan_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::int64_t planned_ = 0;
  int barrier_arrived_ = 0;           // ranks in the barrier now (under sync_'s mutex)
  std::uint64_t barrier_passed_ = 0;  // barriers every rank has passed
  std::atomic<bool> interrupted_{false};
  Time start_ = 0;
  std::mutex error_mu_;
  std::exception_ptr first_error_;
};

}  // namespace gpemu
