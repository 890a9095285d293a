// The DataStall differential analysis (Mohan et al., "Analyzing and
// Mitigating Data Stalls in DNN Training", VLDB 2021), built on the job (job.h):
// the same configuration is trained three times and the differences between
// the epoch times split the epoch into GPU, preprocessing and fetch time.
//
//   (a) gpu-bound: in-memory batches always ready (SyntheticSource)    -> T_gpu
//   (b) cached:    the dataset in memory (no storage fetch)            -> T_prep
//   (c) cold:      the dataset read from storage (nothing cached)      -> T_cold
//
//   prep stall  = max(0, T_prep - T_gpu)  / T_cold   (share of the cold epoch)
//   fetch stall = max(0, T_cold - T_prep) / T_cold
//
// Every pass runs two epochs and measures the second: the first warms up the
// GPU (the warm-up iteration) and, for (b) on the real clock, the page cache.
// (c) evicts the dataset from the page cache before every epoch
// (PipelineSourceOptions::cold).
//
// Under the virtual clock the loader is the ModelledLoader and "cached" and
// "cold" are two read costs (docs/analyze.md):
//   cached: the LoaderModelOptions' own read cost (a page-cache/memory copy)
//   cold:   read_per_sample = storage.read_per_sample,
//           read_bytes_per_s = storage.bytes_per_s / min(loader threads, cores)
// i.e. the storage device's bandwidth is shared by the loader threads reading
// at once, so all of them together read at storage.bytes_per_s.
//
// Thread safety: a call builds its own clocks and trainers.
#pragma once

#include <cstdint>
#include <string>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/job.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/pipeline/loader_model.h"

namespace gpemu::train {

using pipeline::LoaderModelOptions;

// A storage device, for the cold pass of the modelled loader.
struct StorageModel {
  Duration read_per_sample = 100 * kMicrosecond;  // open + first-byte latency per file
  double bytes_per_s = 530e6;                     // the device's bandwidth (SATA SSD-class)
};

struct DataStallOptions {
  // Model, batch size, GPUs, variation, ... (the data and the schedule are
  // set by the analysis: two epochs, the second measured).
  JobSpec job;
  ClockKind clock = ClockKind::Virtual;  // Virtual: modelled loader; Real: the real loader
  pipeline::Dataset dataset;
  // The loader of every rank (rank and world_size are set per GPU).
  pipeline::LoaderOptions loader;
  // Virtual clock: the modelled loader, as cached (loader_threads set to
  // gpus * max(1, workers) when 0) ...
  LoaderModelOptions model;
  // ... and the storage the cold pass reads from.
  StorageModel storage;
};

struct DataStallPass {
  std::string name;          // "gpu-bound", "cached", "cold"
  std::string source;        // the batch source's describe()
  Duration epoch = 0;        // the measured (second) epoch
  std::int64_t samples = 0;  // in that epoch, all GPUs
  double samples_per_s = 0;
  double trainer_stall_pct = 0;  // the job's own data-stall share of the whole run
};

struct DataStallResult {
  std::string model, gpu, clock;
  int gpus = 1;
  int batch_size = 0;
  int workers = 0;
  int cores = 0;  // modelled loader: cores the loaders share
  DataStallPass gpu_bound, cached, cold;
  double prep_stall_pct = 0;
  double fetch_stall_pct = 0;
};

// The cold-pass loader model: `cached` with the storage's read costs.
LoaderModelOptions cold_loader_model(const LoaderModelOptions& cached, const StorageModel& storage, int loader_threads);

// (T_prep - T_gpu) / T_cold and (T_cold - T_prep) / T_cold in percent,
// clamped at 0; both 0 when T_cold is 0.
double prep_stall_share(Duration t_gpu, Duration t_prep, Duration t_cold);
double fetch_stall_share(Duration t_prep, Duration t_cold);

// Runs the three passes. InputError for impossible options (as the job, the
// loaders) or an empty dataset.
DataStallResult analyze_data_stalls(const CostModel& costs, const DataStallOptions& options);

}  // namespace gpemu::train
