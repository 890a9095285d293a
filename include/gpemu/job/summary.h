// What people read of a run: summarize(RunRecord), a pure function of the
// record (utilisation, stall shares, throughput per GPU and per epoch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpemu/cost/cost_model.h"
#include "gpemu/job/record.h"
#include "gpemu/time.h"

namespace gpemu {

struct GpuSummary {
  int gpu = 0;
  std::int64_t iterations = 0;
  std::int64_t samples = 0;
  Time end = 0;
  Duration compute_busy = 0;
  Duration data_stall = 0, fetch_stall = 0, prep_stall = 0;
  Duration h2d = 0;
  Duration all_reduce_wait = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::vector<KernelSpan> compute_intervals;
};

struct EpochSummary {
  std::uint64_t epoch = 0;
  Time start = 0, end = 0;  // earliest start and latest end over the GPUs
  std::int64_t samples = 0;
};

// The figures of a training run (train phase): pure function of the record.
struct RunSummary {
  std::string model, gpu, clock;
  int gpus = 1;
  int batch_size = 0;
  Time start = 0;
  Duration elapsed = 0;         // start to the last completion on any GPU
  std::int64_t iterations = 0;  // per GPU (the most any GPU ran)
  std::int64_t samples = 0;     // over all GPUs
  double samples_per_s = 0, iterations_per_s = 0;
  // Shares of `elapsed`, averaged over the GPUs, in percent.
  double gpu_util_pct = 0, data_stall_pct = 0, fetch_stall_pct = 0, prep_stall_pct = 0, h2d_pct = 0;
  double all_reduce_pct = 0;
  std::uint64_t all_reduces = 0;
  int buckets = 0;
  std::uint64_t all_reduce_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0;
  Duration forward_total = 0, backward_total = 0;
  std::vector<EpochSummary> epochs;
  std::vector<GpuSummary> per_gpu;
  StepCost cost;
  std::string backward_split, source, memory_plan;
  double mean_epoch_s() const;
};
RunSummary summarize(const RunRecord& record);

}  // namespace gpemu
