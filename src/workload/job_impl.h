// What the job's files share (job.cpp builds it, job_run.cpp runs its ranks'
// host threads, step_loop.cpp walks the step program, job_memory.cpp keeps a
// rank's device memory, job_record.cpp settles the records, step_boundary.cpp
// is what a between_steps hook may do): the job's plan (Job::Plan), a rank's
// state (Job::Rank) and a step whose GPU times are not all known yet
// (job_detail::Pending).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "gpemu/cost_model.h"
#include "gpemu/job/job.h"
#include "workload/backward_plan.h"
#include "workload/memory_plan.h"

namespace gpemu {
namespace job_detail {

// Noise streams: rank g draws forward from 1 + 2g and backward from 2 + 2g.
inline std::uint64_t forward_stream(int gpu) { return 1 + 2 * static_cast<std::uint64_t>(gpu); }
inline std::uint64_t backward_stream(int gpu) { return 2 + 2 * static_cast<std::uint64_t>(gpu); }

// The allocations of one step at one batch size: the zoo's traced lifetimes,
// or (model not in the zoo) the cost model's figures split evenly.
struct StepMemory {
  bool zoo = false;
  zoo::ZooMemoryPlan plan;  // zoo
  MemoryPlan even;          // otherwise
};

struct Pending {
  StepRecord rec;
  Time issue = 0;
  Completion prev_tail, h2d, forward, backward, all_reduce, step;
  bool has_h2d = false, has_all_reduce = false;
};

}  // namespace job_detail

struct Job::Plan {
  BackwardPlan backward;
  // What the forward and the backward (with the optimizer step) keep busy:
  // read by a shared GPU's policy (KernelDemand).
  KernelDemand forward_demand, backward_demand;
  // The step program's first and last operation that launches a kernel: a
  // Fifo-shared GPU is held from the one to the other.
  std::size_t first_kernel_op[2] = {0, 0}, last_kernel_op[2] = {0, 0};  // by RunPhase
  std::vector<std::size_t> backward_ends;  // bucket_chunk_ends of backward for the reducer's buckets
  std::vector<StepOp> train, eval;
  const zoo::ModelGraph* graph = nullptr;
  zoo::ReplayOptions replay;
  // A batch size's cost and memory plan, made once for all ranks (a pure
  // function of the size: a thousand ranks need not replay the zoo a
  // thousand times). Entries are never erased, so pointers stay valid.
  std::mutex per_batch_mu;
  std::map<std::int64_t, std::pair<StepCost, job_detail::StepMemory>> per_batch;

  // A batch size's entry, made on first use (job_memory.cpp).
  const std::pair<StepCost, job_detail::StepMemory>& batch(int n, const CostModel& costs, const JobSpec& spec,
                                                           const StepCost& full);
};

struct Job::Rank {
  int index = 0;
  Device* device = nullptr;
  Node* node = nullptr;          // the rank's node when ranks share links
  int local = 0;                 // its index in that node
  Stream* stream = nullptr;      // the loop's stream (the legacy default stream, as a PyTorch loop)
  Stream* comm = nullptr;        // DDP's communication stream (gpus > 1)
  Stream* prep = nullptr;        // GPU decode's stream (LoadedBatch::gpu_decode), made at its first batch
  std::uint64_t prep_bytes = 0;  // device memory the GPU decode pipeline holds (in `persistent`)
  std::function<void(Time)> sleep;
  Variation forward_noise, backward_noise;
  std::optional<TimeSampler> train_draw, eval_draw;
  std::vector<CachingAllocator::Ptr> persistent;
  std::vector<CachingAllocator::Ptr> slots;  // zoo plan: live storages by slot
  std::vector<CachingAllocator::Ptr> live;   // even plan: input and activations
  std::map<std::int64_t, const std::pair<StepCost, job_detail::StepMemory>*> per_batch;  // the plan's entries
  bool steady = false;  // zoo plan: the first iteration has run
  // Zoo plan: the plan entry whose last steady iteration left this rank's
  // allocator and slots exactly as it found them (AllocatorSnapshot), so
  // its next steady iteration would too, with the same addresses and
  // counters; the Job skips replaying it. nullptr: not known.
  const std::pair<StepCost, job_detail::StepMemory>* memory_fixed_point = nullptr;
  std::unique_ptr<pipeline::BatchSource> train_source, eval_source;
  std::shared_ptr<void> current;  // the batch the loop holds (x), until the next one
  std::int64_t iterations = 0;
  // Steps and kernels whose GPU times are not all known yet (a few, in issue
  // order); once known they move to `steps` and `spans`, records of a few
  // words each, so a run's memory grows by little per step (the pages of a
  // growing record are faulted in between two steps, on the host's
  // critical path) and no record keeps its operations alive.
  std::deque<job_detail::Pending> pending;
  std::deque<std::pair<Completion, Duration>> kernels;
  std::vector<StepRecord> steps;  // RecordSpec::steps
  std::vector<KernelSpan> spans;  // RecordSpec::kernels
  Duration compute_busy = 0;
  Time last_kernel_end = 0;
  StepTotals train;
  std::vector<EpochMark> phases;     // with RecordSpec::epochs
  std::deque<Completion> in_flight;  // the tails of the last steps issued, at most kMaxStepsAhead
  std::vector<CheckpointRecord> checkpoints;
  Duration forward_total = 0, backward_total = 0;

  Rank(VariationOptions fwd, VariationOptions bwd, int gpu)
      : index(gpu),
        forward_noise(fwd, job_detail::forward_stream(gpu)),
        backward_noise(bwd, job_detail::backward_stream(gpu)) {}
  ~Rank() { release_all(); }
  // Gives back everything the rank holds on its GPU (job_memory.cpp).
  void release_all();
};

}  // namespace gpemu
