// The summary of a `gpemu torch` run as a typed record (docs/torch.md,
// "Outputs"): what one process's runtime fills, what the first process
// merges its ranks' parts into, and what the text on stderr, `--json` and
// `--report` are written from. The fields `gpemu train` has mean the same
// and live in the engine's RunRecord (gpemu/job/record.h); the torch
// backend's own are beside it. JSON is written (and a rank's part read back)
// only here, at the edge.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/job/record.h"
#include "gpemu/time.h"

namespace gpemu::torch_backend {

// One emulated device's figures besides RunRecord::ranks' (the same index).
struct TorchDeviceRecord {
  std::uint64_t kernels = 0;
  Duration h2d_busy = 0, d2h_busy = 0;
  Duration collective_busy = 0;  // the emulated NCCL group's collectives
  std::uint64_t h2d_bytes = 0, d2h_bytes = 0;
};

// The script's steps: what marked them and the time from each step's start
// to the next's (the last step has no next), milliseconds.
struct TorchSteps {
  std::string source;  // "optimizer", "backward", a marker's; empty: no step
  std::uint64_t count = 0;
  std::vector<double> step_ms;
};

// The median, least and largest of the step times; nullopt when there are none.
struct StepStats {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};
std::optional<StepStats> step_stats(const TorchSteps& steps);

struct TorchRunRecord {
  // gpu, gpus, nodes, network, clock, model (the zoo model whose correction
  // applies; empty: none) and, one per device in index order, ranks: gpu
  // (the index), compute_busy (attached: the kernels' time alone) and the
  // allocator's peaks.
  RunRecord run;
  std::vector<TorchDeviceRecord> devices;  // beside run.ranks
  std::string process;                     // a part's label ("main", "rank 1", "pid P"); empty at the top
  std::optional<std::string> serve;        // the gpemu serve socket attached to
  double elapsed_s = 0;                    // emulated
  std::uint64_t iterations = 0;            // the script's steps
  std::uint64_t optimizer_steps = 0;
  TorchSteps steps;
  std::string host_profile;
  std::optional<double> host_load_delay_s;  // real clock only
  std::optional<double> iterations_per_s;
  // GPU time of the phase's kernels per iteration, ms.
  std::optional<double> forward_ms_mean, backward_ms_mean, optimizer_ms_mean;
  std::uint64_t kernels = 0, view_ops = 0, h2d_copies = 0, d2h_copies = 0, blocking_syncs = 0, collectives = 0;
  std::optional<double> gpu_util_pct;                    // over the devices that ran kernels
  double peak_allocated_mib = 0, peak_reserved_mib = 0;  // the largest device's
  std::map<std::string, std::uint64_t> ops_through_meta;
  // Merged (the first process with its ranks' parts): each process that
  // used an emulated GPU; the counters above are their sums, times and
  // peaks the largest, phase means their mean.
  std::vector<TorchRunRecord> processes;
};

// `--json` (and a rank's part): the keys `gpemu train --json` has where they
// mean the same.
nlohmann::json to_json(const TorchRunRecord& r);
// A rank's part read back (what to_json wrote). InputError for a key missing or of the wrong type.
TorchRunRecord torch_run_record(const nlohmann::json& j);
// The first process's record with its ranks' (sorted by label) merged in
// (see TorchRunRecord::processes); `main` alone when there are none.
TorchRunRecord merge_records(TorchRunRecord main, const std::vector<TorchRunRecord>& parts);

}  // namespace gpemu::torch_backend
