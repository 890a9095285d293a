// What `gpemu train` and `gpemu analyze` add to the engine: datasets, stall analysis and outputs.
//
// Sections: datasets, analyze, outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/job.h"
#include "gpemu/pipeline.h"
#include "gpemu/report.h"
#include "gpemu/timeline.h"

// ==== datasets ====
//
// Datasets for `gpemu train`: the cache folder and the default synthetic
// ImageNet-like dataset generated there on first use.

namespace gpemu::train {

// $GPEMU_CACHE_DIR, else $XDG_CACHE_HOME/gpemu, else $HOME/.cache/gpemu
// (each only when set and non-empty). InputError when none is set.
std::filesystem::path cache_dir();

struct SyntheticDatasetSpec {
  std::size_t images = 2000;
  int classes = 100;
  double median_kb = 110.0;
  std::uint64_t seed = 0;
};

// The default dataset of `gpemu train` (see docs/train.md for the size).
SyntheticDatasetSpec default_dataset_spec();

// Folder name for a spec, e.g. "imagenet-like-2000img-100cls-110kb-seed0".
std::string dataset_folder_name(const SyntheticDatasetSpec& spec);

struct EnsuredDataset {
  std::filesystem::path dir;
  bool generated = false;                 // false: found complete in the cache
  double seconds = 0;                     // generation wall time
  pipeline::ImageDatasetSummary summary;  // when generated
};

// root/dataset_folder_name(spec), generated when it is missing or incomplete
// (a folder is complete once its marker file is written, last; generation
// happens in a temporary folder renamed into place, so an interrupted run
// leaves no half dataset). `note` hears one line before generating.
EnsuredDataset ensure_synthetic_dataset(const std::filesystem::path& root, const SyntheticDatasetSpec& spec,
                                        const std::function<void(const std::string&)>& note = {});

}  // namespace gpemu::train

// ==== analyze ====
//
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

// ==== outputs ====
//
// What a training run gives people: summary rows, the run report (report.h),
// what each node's loaders read and host spans of data stalls for the trace.

namespace gpemu::train {

// What each node's loaders read per epoch (the modelled loader's
// LoaderStats::epochs of the node's ranks, summed; ranks are dealt to nodes
// in order, record.gpus / record.nodes each): loader-cache hits, remote hits
// (another node's cache, over the network), storage requests and bytes, and
// network bytes. Empty when the loaders kept no per-epoch figures.
struct NodeEpochReads {
  int node = 0;
  std::uint64_t epoch = 0;  // 0-based
  std::uint64_t cache_hits = 0, remote_hits = 0, storage_requests = 0, storage_bytes = 0, network_bytes = 0;
};
std::vector<NodeEpochReads> node_epoch_reads(const RunRecord& r);

// Summary rows for people ("epoch time" -> "12.3 s"), in report order.
std::vector<SummaryRow> summary_rows(const RunRecord& r);

// The run report: summary, time breakdown per GPU (compute, H2D, data stall,
// all-reduce wait, other), compute-engine utilization over time per GPU,
// data stall per batch per GPU, stall shares (fetch / prep / compute).
// `configuration`: the report's configuration rows (RunReport::configuration).
RunReport make_run_report(const RunRecord& r, std::vector<SummaryRow> configuration = {});

// Host spans for the trace: on process "train loop", track = GPU, a
// "next()" span while the host waited for the loader and, inside it, a
// "data stall" span while the GPU was idle for it.
void add_stall_spans(const RunRecord& r, Timeline& timeline);

}  // namespace gpemu::train
