// What a DLIO run returns: DlioRunRecord, the engine's RunRecord of the job
// with DLIO's figures (statscounter.py's) as structs: per rank and epoch, per
// epoch over ranks, per phase over epochs; the checkpoints, the data and the
// loader. Units are DLIO's: seconds, samples/s, MB/s where MB = 2^20 bytes.
// JSON is written from it only at the edge (`gpemu train --dlio-config
// --json`: src/dlio/run_json.h).
//
// AU (DLIO's): per rank and training block (the steps between two
// checkpoints) the compute time of the measured steps / (the block's wall time
// - the time of the steps left out by output.metric.exclude_start_steps /
// exclude_end_steps); per epoch the step-weighted mean over blocks and the
// mean over ranks; per phase the mean over epochs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/dlio/config.h"
#include "gpemu/job/record.h"

namespace gpemu::dlio {

// DLIO's figures of some steps (a rank's epoch, or an epoch over ranks).
struct DlioMetrics {
  std::uint64_t steps = 0;  // per rank (over ranks: the most any rank ran)
  std::uint64_t measured_steps = 0;
  double au_pct = 0;
  double samples_per_s = 0;  // over ranks: summed
  double mb_per_s = 0;       // over ranks: summed
  // Seconds; over ranks: the mean.
  double compute_s = 0;           // the measured steps' compute (DLIO's compute time)
  double total_s = 0;             // the blocks' wall time less the left-out steps
  double emulated_compute_s = 0;  // the kernels' emulated time
  double load_wait_s = 0;         // waiting for batches
  bool operator==(const DlioMetrics&) const = default;
};

struct DlioRankEpoch : DlioMetrics {
  int rank = 0;
  bool operator==(const DlioRankEpoch&) const = default;
};

// One step of one rank (DlioRunOptions::record_steps).
struct DlioStepRow {
  int rank = 0;
  std::size_t block = 0;    // the block between checkpoints, 0-based
  std::uint64_t step = 0;   // 1-based within the epoch
  double load_s = 0;        // asking for the batch -> batch in hand (DLIO's batch_loaded)
  double compute_s = 0;     // batch in hand -> synchronize returned (DLIO's compute)
  double proc_s = 0;        // asking for the batch -> end of compute (DLIO's batch_processed)
  double emulated_s = 0;    // the kernels' emulated durations
  std::uint64_t bytes = 0;  // sample bytes of the batch
  bool operator==(const DlioStepRow&) const = default;
};

// One epoch over its ranks.
struct DlioEpoch : DlioMetrics {
  int epoch = 0;  // 1-based
  // Each rank's figures (DlioRunOptions::per_rank_epochs), in rank order.
  std::optional<std::vector<DlioRankEpoch>> ranks;
  // Every step of every rank (DlioRunOptions::record_steps).
  std::optional<std::vector<DlioStepRow>> step_records;
  bool operator==(const DlioEpoch&) const = default;
};

// Training's or evaluation's figures over its epochs (means over epochs;
// seconds and steps summed).
struct DlioPhaseResult {
  std::uint64_t epochs = 0;
  std::uint64_t steps = 0;  // per rank, all epochs
  std::uint64_t measured_steps = 0;
  double au_pct = 0;
  double au_stdev_pct = 0;  // over epochs
  double samples_per_s = 0;
  double mb_per_s = 0;
  double mb_per_s_dlio = 0;  // DLIO's own: samples/s x record_length_bytes
  double compute_s = 0, total_s = 0, emulated_compute_s = 0, load_wait_s = 0;
  // Training's verdict: au_pct >= au_threshold_pct (100 x metric.au).
  double au_threshold_pct = 0;
  bool au_pass = false;
  // Evaluation: its steps per epoch.
  std::uint64_t steps_per_epoch = 0;
  // Each epoch (DlioRunOptions::keep_epochs), in order.
  std::optional<std::vector<DlioEpoch>> per_epoch;
};

// One checkpoint over the ranks that wrote it.
struct DlioCheckpointResult {
  int epoch = 0;
  std::uint64_t step = 0;
  std::vector<int> ranks;
  std::uint64_t bytes = 0;  // written
  double write_s = 0;       // the slowest rank's write (ranks write at the same time)
  double write_gb_per_s = 0;
  double emulated_s = 0;  // on the run's clock
  // Read back (DlioRunOptions::checkpoint_read_back): bytes_read > 0.
  std::uint64_t bytes_read = 0;
  double read_s = 0, read_gb_per_s = 0;
};

// A data folder's files.
struct DlioFilesSummary {
  std::string folder;
  std::uint64_t files = 0, samples = 0, bytes = 0;
};

struct DlioGenerated : DlioFilesSummary {
  bool generated = false;  // written by this run
  bool skipped = false;    // its manifest said they were there
  double seconds = 0;
};

struct DlioDataset : DlioFilesSummary {
  DataFormat format = DataFormat::Npz;
};

// The cost model's step (gpemu.step_time: cost_model).
struct DlioCostModelStep {
  std::string model;
  std::int64_t batch_size = 0;
  double forward_s = 0, backward_s = 0;
  std::string note;
};

// The training loader, summed over ranks.
struct DlioLoaderSummary {
  std::uint64_t batches = 0, samples = 0, bytes_read = 0, cache_hits = 0, cache_misses = 0;
  std::uint64_t out_of_order = 0;  // the real loader's: varies from run to run
  bool direct_io_active = false;
  std::vector<std::string> notes;
  int read_threads = 0;
  int prefetch_batches_per_worker = 0;
  bool preprocess = false;                    // reader.preprocess_time is modelled
  std::optional<double> storage_bytes_per_s;  // DlioRunOptions::storage_bytes_per_s
};

struct DlioRunRecord {
  std::string workload;  // the config's source
  std::string model;
  std::string clock;  // the clock's name
  int gpus = 1;       // DLIO's world size
  int nodes = 1;      // modelled nodes the ranks are spread over (gpemu.nodes)
  // nodes > 1: the network joining them, by name ("" otherwise).
  std::string network;
  std::vector<int> ranks;
  std::string gpu;  // catalog id
  bool synthetic_data = false;
  std::optional<DlioGenerated> generated_train, generated_eval;
  // Generation only (workflow.train and checkpoint false): the fields above,
  // wall_s, warnings and not_emulated; nothing else.
  bool generation_only = false;

  StepTimeSource step_time_source = StepTimeSource::Config;
  double step_time_s = 0;
  std::optional<DlioCostModelStep> cost_model;
  std::optional<DlioDataset> dataset;  // training runs
  std::uint64_t steps_per_epoch = 0;   // per rank
  std::optional<DlioPhaseResult> train, eval;
  std::optional<DlioLoaderSummary> loader;  // training runs
  std::vector<DlioCheckpointResult> checkpoints;
  std::optional<double> checkpoint_gb_per_s, checkpoint_read_gb_per_s;  // when any checkpoint

  double emulated_s = 0;  // the run on its clock
  double wall_s = 0;
  std::vector<std::string> warnings, not_emulated;
  // The run stopped early (DlioRunOptions::on_stopped): why. Empty otherwise.
  std::string stopped;
  // The engine's record of the job (every step, kernel and epoch only with
  // DlioRunOptions::full_record).
  RunRecord job;
};

}  // namespace gpemu::dlio
