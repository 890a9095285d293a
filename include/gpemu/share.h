// Several training jobs on one emulated GPU: `gpemu share`.
//
//   ShareSpec (the GPU, its policy, the jobs and when they arrive)
//     --run_shared(Clock&, CostModel&)-->  ShareResult  --share_json / the CLI-->  people
//
// Each job is the one engine's Job (job.h) on its own view of one SharedGpu
// (device.h, "sharing"): its own host thread, streams, CUDA context and
// caching allocator, all on the shared GPU's timeline, so the policy, the
// shared memory and the shared PCIe link decide how the jobs slow each other.
// A job arrives (its process starts) at its arrival time; when it ends, having
// finished or failed (an OutOfMemoryError ends that job only), its memory
// goes back to the GPU, as a process's does at its exit. docs/sharing.md.
//
// Thread safety: free functions on values; run_shared starts the jobs' host
// threads under the clock and returns when all have ended.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
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
#include "gpemu/report.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu {

struct SharedJobSpec {
  std::string name;
  // One GPU's job. run_shared sets its GPU, its place on the shared GPU and
  // keep_partial; the rest (model, batch, data, schedule) is the job's.
  JobSpec job;
  Time arrival = 0;  // when the job's process starts (with `after`: this long after that job's end)
  // A job of the spec (an earlier one) after whose end this one starts: a
  // queue of jobs run one after another (a scheduler's). Empty: none.
  std::string after;
  int priority = 0;  // SharePolicy::Priority: larger first
  std::string mig;   // SharePolicy::Mig: the profile of its slice
  // Its cost model (each program has its own); null: the one run_shared is
  // given.
  std::shared_ptr<const CostModel> costs;
  // A model job's PyTorch ("1" or "2": its TorchPreset) and host profile (a
  // name or a `gpemu bench host` file; empty: the preset's), as a jobs file
  // names them; give_cost_models applies them to job.compute.model. Empty
  // torch: the ModelSpec as it is (the C++ API's jobs).
  std::string torch;
  std::string host;
};

// A model's training job (in-memory batches, always ready; or, with
// with_dataset, batches of a dataset described by its sizes from a modelled
// loader), or GPEmu's shape
// of a job: a fixed GPU time per step and nothing else (no copy, no memory).
SharedJobSpec model_job(std::string name, std::string model, int batch_size, std::int64_t iterations, Time arrival = 0);
SharedJobSpec fixed_step_job(std::string name, double step_s, int batch_size, std::int64_t iterations,
                             Time arrival = 0);
// The job reads `dataset` (a pipeline::virtual_dataset spec) through a
// modelled loader of `workers` workers for `epochs` epochs (its iterations
// then cap the steps, 0: none). InputError for an unknown dataset.
void with_dataset(SharedJobSpec& job, std::string_view dataset, int workers, std::uint64_t epochs);

inline constexpr std::size_t kMaxSharedJobs = 1024;
// The steps of all jobs of one run together. With ShareSpec::per_step each
// step keeps its records (about 300 bytes) until the run ends, so 10^6 steps
// are about 300 MB; without, a run's memory is flat in steps.
inline constexpr std::int64_t kMaxSharedSteps = 1'000'000;
// Utilisation windows a result holds at most: a longer run widens its
// window (ShareResult::utilization_window says to what).
inline constexpr std::int64_t kMaxUtilizationWindows = 100'000;

// The steps a job will run at most: its iterations, or with a dataset its
// epochs of batches (capped by its iterations).
std::int64_t planned_share_steps(const SharedJobSpec& job);
// The window a run of `makespan` reports its utilisation in: `asked`, or a
// whole multiple of it when `asked` would give more than
// kMaxUtilizationWindows windows.
Duration utilization_window_for(Time makespan, Duration asked);

struct ShareSpec {
  const GpuSpec* gpu = nullptr;  // required
  ShareOptions options;
  std::vector<SharedJobSpec> jobs;  // 1 to kMaxSharedJobs, distinct names
  bool trace = false;               // keep the timeline's operations for a trace
  Duration utilization_window = kSecond;
  // CPU cores of the machine the jobs' modelled data loaders share
  // (pipeline::CpuPool); 0: this machine's.
  int cpu_cores = 0;
  // The machine's disk that the jobs' modelled loaders read their samples
  // from, each job an even share of it while it runs (SessionSpec::
  // data_storage); unset: each job reads its own storage (none: memory).
  std::optional<pipeline::StorageDevice> storage;
  // Each job's train steps and kernel spans in its record (SharedJobResult::
  // record: share_json's steps, share_report's charts), which grow with the
  // steps; false: the totals only, in memory flat in steps.
  bool per_step = true;
};

// Gives every job without a cost model the layered cost model of its model
// spec (job_cost_model: one per precision, optimizer, zero_grad and sequence
// length among the jobs), with measured profiles from `profiles` where they apply.
// Applies each job's torch and host (InputError naming the job) and gives it
// its program's cost model.
void give_cost_models(ShareSpec& spec, const std::optional<std::filesystem::path>& profiles = std::nullopt);

// Throws InputError naming the first bad field (and its job), its value and
// what is accepted; a Mig spec whose slices do not fit on the card together
// names the job whose slice does not; the jobs' steps together past
// kMaxSharedSteps are refused too.
void validate(const ShareSpec& spec);

// One job's result: the engine's RunRecord of its job (as DLIO's
// DlioRunRecord holds one) and what sharing adds to it: the job's priority
// and slice, when it arrived and ended on the shared GPU, and what ended it.
// Its figures are read from the record (the functions below); JSON and text
// are written from it only at the edge (share_json, `gpemu share`).
struct SharedJobResult {
  std::string name;
  int priority = 0;
  std::string mig;
  Time arrival = 0;
  Time end = 0;  // its last GPU work ended (its arrival when it never ran)
  // What ended it early (an out-of-memory message, a slice that did not
  // fit); empty when it ran its schedule.
  std::string error;
  // The job's record: its model ("" for a fixed step time), card and batch
  // size; on its one rank its iterations, train samples, kernels' time alone
  // and memory peaks; with ShareSpec::per_step its train steps (steps:
  // step_end, samples) and its kernels on the shared GPU (ranks[0].
  // compute_intervals). A job that failed at its start has no rank.
  // `share --connect`'s: what the server's reply carries (no kernels).
  RunRecord record;

  const std::string& model() const { return record.model; }
  int batch_size() const { return record.batch_size; }
  std::int64_t iterations() const;
  std::int64_t samples() const;  // train samples
  // Its kernels' time on the GPU alone (each as long as it would run by itself).
  Duration compute_busy() const;
  std::uint64_t peak_allocated_bytes() const;
  std::uint64_t peak_reserved_bytes() const;
  // [start, end) of its kernels on the shared GPU (ShareSpec::per_step).
  std::span<const KernelSpan> kernels() const;
  // Per train step its record kept: when its GPU work ended, and its samples
  // (a throughput series: samples / time since the previous step's end).
  std::vector<Time> step_ends() const;
  std::vector<std::int64_t> step_samples() const;
  double jct_s() const;          // end - arrival
  double samples_per_s() const;  // samples / (end - arrival)
  // compute_busy over (end - arrival), in percent: the share of the GPU the
  // policy gave it.
  double gpu_share_pct() const;
};

struct ShareResult {
  std::string gpu;
  SharePolicy policy = SharePolicy::Fifo;
  ShareOptions options;
  std::string clock;
  std::vector<SharedJobResult> jobs;  // in the spec's order
  Time makespan = 0;                  // the last job's end (from time 0)
  double mean_jct_s = 0;              // over the jobs that finished (0 when none did: see jobs_finished)
  int jobs_finished = 0;              // jobs that ran all their iterations without an error
  // The GPU's utilisation as nvidia-smi reports it: the share of each window
  // during which some kernel ran, in percent. The window is the spec's, or
  // a multiple of it that gives at most kMaxUtilizationWindows windows.
  Duration utilization_window = kSecond;
  std::vector<double> utilization_pct;
  double mean_utilization_pct = 0;           // over [0, makespan)
  std::uint64_t peak_memory_used_bytes = 0;  // contexts and segments of all jobs at once (not Mig)
  std::uint64_t memory_capacity_bytes = 0;
  // With ShareSpec::trace: the shared timeline's operations and host spans.
  std::vector<TraceRecord> trace;
  std::vector<HostSpan> host_spans;
  std::vector<TraceDeviceName> trace_devices;
};

// Runs the jobs on one emulated GPU of spec.gpu under its policy. A job's
// failure is in its result; InputError for an invalid spec.
ShareResult run_shared(Clock& clock, const CostModel& costs, const ShareSpec& spec);

// The result as an HTML report's data (report.h): the summary, each job's
// time split into its kernels' time alone and the rest, the GPU's
// utilisation over time (all jobs, then each job's), each job's step times.
RunReport share_report(const ShareResult& result);
// The mean JCT as the summaries print it: "12.34 s (3 of 4 jobs finished)",
// or "none: no job finished" (a run interrupted before any job ended).
std::string mean_jct_text(const ShareResult& result);

// A jobs file (YAML or JSON, docs/sharing.md):
//   gpu: P100                  # optional: the card, when --gpu is not given
//   cores: 24                  # optional: the machine's cores the loaders share
//   storage: hdd               # optional: the disk the dataset jobs read (parse_storage)
//   jobs:
//     - name: a                # default: job1, job2, ...
//       model: resnet50        # a model, or:
//       compute_s: 0.5753      #   a fixed GPU time per step (no model)
//       batch_size: 128
//       iterations: 200        # train steps (default 100)
//       arrival_s: 30          # default 0
//       priority: 1            # policy priority
//       mig: 3g.20gb           # policy mig
//       precision: amp         # as --precision; optimizer: adam, as --optimizer
//       dataset: imagenette    # batches from a modelled loader over a virtual dataset ...
//       epochs: 5              #   ... for this many epochs (instead of iterations)
//       workers: 3             #   its loader's workers (default 4), prefetch_factor (2),
//       decode_us: 800         #   its CPU costs per image (as gpemu train --decode-us / --decode-ns-per-byte)
//       after: a               # starts arrival_s after job a ends (a queue)
// Throws InputError naming the file, the job and the key for a bad file,
// an unknown key, a wrong type or an out-of-range value.
struct JobsFile {
  std::string gpu;  // "" when the file names none
  int cores = 0;    // "cores": the machine's cores the loaders share; 0 when the file names none
  // "storage": the disk the jobs' loaders read (parse_storage); unset when the file names none
  std::optional<pipeline::StorageDevice> storage;
  std::vector<SharedJobSpec> jobs;
};
JobsFile load_jobs_file(const std::filesystem::path& path);
JobsFile parse_jobs(std::string_view text, std::string_view source);

}  // namespace gpemu
