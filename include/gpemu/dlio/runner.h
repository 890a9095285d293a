// Running a DLIO / MLPerf Storage workload with emulated accelerators: what
// `dlio_benchmark workload=...` does, with gpemu's data loader reading the
// real files and gpemu's emulated GPUs taking the place of DLIO's
// sleep(computation_time). docs/dlio.md ("Running") describes it in full.
//
//   DlioWorkload w = parse_dlio_config("configs/dlio/unet3d_a100.yaml", {"++workload.train.epochs=1"});
//   DlioRunOptions o;  o.clock = ClockKind::Real;  o.world_size = 2;
//   DlioRunRecord r = run_dlio_workload(w, o);
//   print_dlio_result(r, std::cout);
//
// Workflow (the workload's `workflow` section):
//   generate_data  writes num_files_train (and num_files_eval) files of
//                  num_samples_per_file records of record_length_bytes +- stdev
//                  into <storage_root>/<data_folder>/{train,valid}; skipped when
//                  the folder's manifest (.gpemu-dlio-dataset.json) says the same
//                  files are already there.
//   train          per rank (one host thread and one emulated GPU each, run with
//                  Clock::run_concurrently), per epoch: steps_per_epoch_run
//                  batches from gpemu's loader (the rank's shard), each followed
//                  by the step's compute as a kernel on the rank's emulated GPU
//                  and a synchronize (DLIO's sleep).
//   checkpoint     write_checkpoint at the points checkpoint_schedule gives.
//   evaluation     after the epochs DLIO evaluates after, eval steps of
//                  eval_time on the `valid` files.
//
// Metrics are DLIO's (statscounter.py), returned as a DlioRunRecord
// (gpemu/dlio/result.h); pass when au_pct >= 100 * metric.au.
//
// Thread safety: run_dlio_workload may be called from any thread; the
// progress callback is called from the ranks' host threads (concurrently
// under the real clock) and must be thread-safe.

#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gpemu/clock.h"
#include "gpemu/dlio/config.h"
#include "gpemu/dlio/data.h"
#include "gpemu/dlio/result.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu::dlio {

struct DlioRunOptions {
  // "real": wall time; the emulated GPU's kernels take real time and reads take
  // what they take. "virtual": discrete emulated time; compute advances it,
  // real file reads and checkpoint writes take no emulated time unless
  // modelled (storage_bytes_per_s), see docs/dlio.md.
  ClockKind clock = ClockKind::Real;
  // Ranks (emulated accelerators). 0: gpemu.world_size.
  int world_size = 0;
  // The ranks this process runs, each on its own host thread; empty: all of
  // 0 .. world_size-1. Generation is done only by the process running rank 0.
  std::vector<int> ranks;
  // Called by every process once the data is generated (by the process of
  // rank 0) and before any of it is opened: where processes that share a
  // world (mpirun, torchrun) wait for rank 0's files. Null: nothing.
  std::function<void()> after_generation;
  // Relative storage_root / data_folder / checkpoint_folder resolve here
  // (empty: the current directory).
  std::filesystem::path base_dir;
  // The emulated GPU when the workload's gpemu.gpu is empty (catalog name).
  std::string default_gpu = "A100-SXM4-80GB";
  // Cost-model profiles (cost_model.h); nullopt: built-in estimates.
  std::optional<std::filesystem::path> profiles_dir;
  // Modelled storage: every batch's sample bytes (and checkpoint bytes) also
  // cross one link of this many bytes/s shared max-min fairly by all ranks,
  // per loader worker, with the loader's prefetch depth. Meant for the virtual
  // clock; under the real clock it comes on top of the real reads.
  std::optional<double> storage_bytes_per_s;
  // Lock pinned staging buffers (mlock) when reader.pin_memory is set; false:
  // account only (DLIO's batches of hundreds of MB exceed RLIMIT_MEMLOCK).
  bool lock_pinned_memory = false;
  // Read every checkpoint back after writing it (read_checkpoint, verified).
  bool checkpoint_read_back = false;
  // The real clock's spin window (RealClockOptions::spin_window).
  Duration spin_window = 100 * kMicrosecond;
  // Called after each step, each checkpoint and each generated file.
  std::function<void(const DlioProgress&)> progress;
  // Record every operation on the emulated timeline (kernels, modelled loads)
  // and host spans (data waits, checkpoints) for a Chrome trace.
  bool trace = false;
  // Called once after the run with the timeline and the trace's device names
  // (e.g. to write_chrome_trace(t.trace_records(), t.host_spans(), names, out)).
  std::function<void(Timeline&, const std::vector<TraceDeviceName>&)> on_timeline;
  // Include per-step records (load, compute, proc times) in each epoch's
  // step_records.
  bool record_steps = false;
  // Each epoch's per-rank figures (DlioEpoch::ranks, what --json prints);
  // false: the epochs' own figures only (what the text output prints), so a
  // run of many epochs keeps less for each.
  bool per_rank_epochs = true;
  // Keep each epoch's figures in the result (DlioPhaseResult::per_epoch, in
  // training's and evaluation's); false: the result has none, and what the
  // run keeps does not grow with its epochs (hear them through on_epoch).
  bool keep_epochs = true;
  // Called with each training epoch's figures once every rank has ended it,
  // in epoch order, from a rank's host thread.
  std::function<void(const DlioEpoch&)> on_epoch;
  // The result's engine record (DlioRunRecord::job) keeps every step, kernel
  // and epoch mark (e.g. for a report); false: its totals only.
  bool full_record = false;
  // When the run stops early (a failed checkpoint write, a loader error,
  // SIGINT/SIGTERM through common/interrupt.h), called with the result of the
  // epochs every rank finished (`stopped`: the reason) before the error is
  // rethrown, so that finished work is still reported.
  std::function<void(const DlioRunRecord&)> on_stopped;
};

// Runs the workload's workflow (generate_data, train, checkpoint, evaluation).
// Throws InputError for what the user can fix: an unsupported dataset.format
// (the message names it and the accepted ones: npz, npy, indexed_binary,
// mmap_indexed_binary, jpeg), a dataset folder holding fewer files than
// num_files_train, fewer samples than one step needs, an unknown GPU or cost
// model, an unknown clock kind, bad ranks; and the loader's and checkpoint's
// InputErrors (a path and the OS reason).
//
// Generation only (workflow.train and checkpoint false): the record's
// generation, wall_s, warnings and not_emulated, no metrics.
DlioRunRecord run_dlio_workload(const DlioWorkload& workload, const DlioRunOptions& options = {});

// parse_dlio_config(file, overrides) then run_dlio_workload: what
// `gpemu train --dlio-config FILE.yaml [++workload.x.y=v ...]` does.
DlioRunRecord run_dlio_config(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                              const DlioRunOptions& options = {});

// DLIO-style summary ([METRIC] lines) of a run_dlio_workload result.
void print_dlio_result(const DlioRunRecord& result, std::ostream& out);
// The [METRIC] line of one epoch, as print_dlio_result prints it; for on_epoch.
void print_dlio_epoch(const DlioEpoch& epoch, std::ostream& out);

}  // namespace gpemu::dlio

namespace gpemu {
using dlio::DlioRunOptions;
using dlio::DlioRunRecord;
using dlio::print_dlio_result;
using dlio::run_dlio_config;
using dlio::run_dlio_workload;
}  // namespace gpemu
