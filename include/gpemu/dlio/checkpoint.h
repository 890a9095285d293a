// DLIO checkpointing: when a training run writes a checkpoint (pure schedule
// functions, DLIO's rules) and writing one to real storage.
//
// Schedule (DLIO's training loop; epochs and steps count from 1, steps
// restart each epoch; nothing is written unless workflow.checkpoint is true):
//   * steps_between_checkpoints = S > 0: after every step s of every epoch
//     with s % S == 0 (checkpoint_after_epoch and epochs_between_checkpoints
//     are then ignored, as in DLIO);
//   * otherwise at the end of epoch e when e >= checkpoint_after_epoch and
//     (e - checkpoint_after_epoch) % epochs_between_checkpoints == 0.
//
// Layout written (gpemu's file names; DLIO's byte counts):
//   <checkpoint_folder>/epoch<E>-step<S>/
//     rank<R>-model.bin                 one file of model.model_size_bytes, or,
//                                       when model.layer_parameters is given:
//     rank<R>-layer<L>-model.bin        per layer this rank holds:
//                                       sum(layer_parameters) / tensor parallelism
//                                       elements of model_datatype, and
//     rank<R>-optimizer.bin             2 * sum(optimization_groups) elements of
//                                       optimizer_datatype (when given).
// checkpoint.type rank_zero (DLIO's default): only rank 0 writes;
// all_ranks: every rank writes its own files.
//
// Each file is written with large sequential write()s of non-repeating bytes
// (every 4 KiB page is distinct, so deduplicating storage cannot shortcut it),
// then fsync()ed when asked; read-back reads every file back and compares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/dlio/config.h"

namespace gpemu::dlio {

// --- Schedule (pure) ---------------------------------------------------------

// After step `step` (1-based, within the epoch) of epoch `epoch` (1-based)?
bool checkpoint_after_step(const DlioWorkload& w, int epoch, std::uint64_t step);
// At the end of epoch `epoch` (1-based)?
bool checkpoint_after_epoch(const DlioWorkload& w, int epoch);

struct CheckpointEvent {
  int epoch = 0;
  std::uint64_t step = 0;  // step within the epoch after which it is written
  bool end_of_epoch = false;
  bool operator==(const CheckpointEvent&) const = default;
};
// Every checkpoint of a training run of train.epochs epochs of
// dlio_figures(w, world_size).steps_per_epoch_run steps each. In checkpoint-only
// mode (workflow.train false, workflow.checkpoint true) it is
// checkpoint.num_checkpoints_write events with epoch 0 and step 1..N.
std::vector<CheckpointEvent> checkpoint_schedule(const DlioWorkload& w, std::optional<int> world_size = {});

// Does `rank` write checkpoint files (checkpoint.type)?
bool rank_writes_checkpoint(const DlioWorkload& w, int rank);

struct CheckpointFile {
  std::filesystem::path path;  // relative to the checkpoint folder, or absolute in results
  std::uint64_t bytes = 0;
  std::string kind;  // "model", "layer" or "optimizer"
};
// The files `rank` writes for the checkpoint after (epoch, step); empty when
// the rank does not write.
std::vector<CheckpointFile> checkpoint_files(const DlioWorkload& w, int rank, int world_size, int epoch,
                                             std::uint64_t step);
// Bytes one writing rank writes per checkpoint.
std::uint64_t checkpoint_bytes_per_rank(const DlioWorkload& w, int rank = 0, int world_size = 1);

// The checkpoint folder as a path: storage.storage_root / checkpoint_folder,
// relative ones resolved against base_dir (empty: the current directory).
std::filesystem::path resolve_checkpoint_folder(const DlioWorkload& w, const std::filesystem::path& base_dir = {});

// --- Writing to storage ------------------------------------------------------

struct CheckpointIoOptions {
  int rank = 0;
  int world_size = 0;  // 0: gpemu.world_size
  int epoch = 1;
  std::uint64_t step = 0;
  std::optional<bool> fsync;            // unset: checkpoint.fsync
  bool read_back = false;               // write_checkpoint: read every file back afterwards
  bool verify = true;                   // compare the bytes read with the bytes written
  std::size_t block_bytes = 16u << 20;  // bytes per write()/read() call
  std::filesystem::path base_dir;       // relative folders resolve here (empty: cwd)
};

struct CheckpointResult {
  std::filesystem::path directory;    // the checkpoint's own folder (epoch<E>-step<S>)
  std::vector<CheckpointFile> files;  // absolute paths
  std::uint64_t bytes_written = 0;
  double write_seconds = 0;  // open to close, fsync included
  double write_gbs = 0;      // 1e9 bytes per second
  std::uint64_t bytes_read = 0;
  double read_seconds = 0;
  double read_gbs = 0;
  bool verified = false;  // read back and every byte matched
};

// Writes this rank's files of the checkpoint after (epoch, step). Creates the
// folders. Throws InputError naming the path when a folder cannot be created
// or a file cannot be opened or written (the message carries the OS reason).
CheckpointResult write_checkpoint(const DlioWorkload& w, const CheckpointIoOptions& options = {});

// Reads this rank's files of an existing checkpoint (DLIO's checkpoint
// recovery), verifying their contents when options.verify. Throws InputError
// naming the path when a file is missing, short or cannot be read, and when
// verification finds a byte that differs.
CheckpointResult read_checkpoint(const DlioWorkload& w, const CheckpointIoOptions& options = {});

}  // namespace gpemu::dlio
