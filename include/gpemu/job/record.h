// What a run records: RunRecord, the typed result of a job (per-rank totals,
// epochs, checkpoints, and, when the spec asks, every step and kernel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "gpemu/cost/cost_model.h"
#include "gpemu/job/spec.h"
#include "gpemu/job/step_program.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/time.h"

namespace gpemu {

// [start, end) of one kernel on a GPU's compute engine.
struct KernelSpan {
  Time start = 0, end = 0;
};

// One step on one rank. Times are on the run's clock.
struct StepRecord {
  int gpu = 0;
  RunPhase phase = RunPhase::Train;
  std::uint64_t epoch = 0;     // 0-based
  std::size_t index = 0;       // position in the epoch
  std::int64_t iteration = 0;  // per rank, over the run (train steps)
  std::int64_t samples = 0;
  std::uint64_t bytes = 0;
  std::vector<std::size_t> sample_indices;
  Time next_called = 0;     // host asked the source
  Time delivered = 0;       // next() returned
  Time ready = 0;           // the source had finished the batch
  Time gpu_idle_since = 0;  // end of the GPU's previous work on the training stream
  Time h2d_start = 0, h2d_end = 0;
  Time forward_end = 0, backward_end = 0;
  Time all_reduce_end = 0;        // gpus > 1: the iteration's all-reduces ended on this GPU
  Time step_end = 0;              // end of the step's last op on the training stream
  Time host_done = 0;             // the host finished the step's program
  Duration compute = 0;           // kernel time issued (emulated)
  Duration read = 0, decode = 0;  // the source's work on the batch
  // Derived at the end of the run (data_stall(): see the top of the file).
  Duration data_stall = 0, fetch_stall = 0, prep_stall = 0;
  Duration h2d = 0;
  Duration all_reduce_wait = 0;
};

// A rank's train steps, totalled as they settle: what summarize() and a
// session read, so a record that keeps no steps has the same figures.
struct StepTotals {
  std::int64_t steps = 0, samples = 0;
  Duration data_stall = 0, fetch_stall = 0, prep_stall = 0, h2d = 0, all_reduce_wait = 0;
  Time end = 0;  // the latest step_end or all_reduce_end
  void add(const StepRecord& s);
};

struct EpochMark {
  int gpu = 0;
  RunPhase phase = RunPhase::Train;
  std::uint64_t epoch = 0;  // 0-based
  Time start = 0;           // before the source's begin_epoch
  Time host_end = 0;        // the host left the phase
  Time end = 0;             // the last completion of the phase's work on this GPU
  std::int64_t samples = 0;
};

struct CheckpointRecord {
  int gpu = 0;
  int epoch = 0;
  std::uint64_t step = 0;
  Time start = 0, end = 0;
  CheckpointIo io;
};

struct RankRecord {
  int gpu = 0;
  std::int64_t iterations = 0;
  Duration compute_busy = 0;
  std::vector<KernelSpan> compute_intervals;  // every kernel, issue order (RecordSpec::kernels)
  Time last_kernel_end = 0;
  StepTotals train;  // its train steps
  std::uint64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0;
  Duration forward_total = 0, backward_total = 0;
  std::string source;  // the source's describe()
};

struct RunRecord {
  std::string model;  // canonical name ("" for fixed step times without a model)
  std::string gpu;    // catalog id
  int gpus = 1;
  int nodes = 1;        // the GPUs' nodes (1 when the ranks share no links)
  std::string network;  // nodes > 1: the network's name ("" otherwise)
  int batch_size = 0;
  std::string clock;
  StepTime step_time = StepTime::CostModel;
  Time start = 0;
  Time host_end = 0;              // the last host thread finished
  std::vector<StepRecord> steps;  // ordered by (gpu, phase order as run); RecordSpec::steps
  std::vector<EpochMark> epochs;  // per rank and phase, in order
  std::vector<CheckpointRecord> checkpoints;
  std::vector<RankRecord> ranks;
  StepCost cost;               // at the full batch size (cost-model step time)
  std::string memory_plan;     // "model zoo" (traced lifetimes) or "even split (model not in the zoo)"
  std::string backward_split;  // gpus > 1
  int buckets = 0;
  std::uint64_t all_reduce_bytes = 0;  // per iteration
  std::uint64_t all_reduces = 0;
  std::vector<pipeline::LoaderStats> loader_stats;       // per rank, train source
  std::vector<pipeline::LoaderStats> eval_loader_stats;  // per rank, eval source (when evaluated)
  // The error that stopped the run early (ScheduleSpec::keep_partial); epoch
  // marks exist only for the phases that finished. Null when the run finished.
  std::exception_ptr stopped;
  bool interrupted = false;  // a single-GPU run stopped by SIGINT/SIGTERM
};

// Stall of one step (see the top of the file) and its split by the batch's
// read : decode time.
void derive_stalls(StepRecord& s);

}  // namespace gpemu
