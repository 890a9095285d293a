// Figures derived from a DLIO workload: samples, steps per epoch (per rank, for
// a world size), dataset and file sizes, and accelerator utilization (AU).
//
// DLIO's definitions (docs/dlio.md):
//   total samples     = num_files_train * num_samples_per_file
//   steps per epoch   = floor(total samples / batch_size / world_size)
//                       (the bound of DLIO's training loop; a partial last
//                       batch is not run), capped by train.total_training_steps
//   AU                = compute time / total time, where compute time is the
//                       emulated computation (sum of computation_time over the
//                       steps) and total time the wall time of those steps,
//                       I/O stalls included. MLPerf Storage passes a run when
//                       AU >= metric.au (0.90 for unet3d and resnet50, 0.70
//                       for cosmoflow).
#pragma once

#include <cstdint>
#include <optional>

#include "gpemu/dlio/config.h"

namespace gpemu::dlio {

struct DlioFigures {
  int world_size = 1;
  std::uint64_t total_samples_train = 0;
  std::uint64_t total_samples_eval = 0;
  std::uint64_t samples_per_rank = 0;      // ceil(total_samples_train / world_size)
  std::uint64_t steps_per_epoch = 0;       // floor(total / batch_size / world_size)
  std::uint64_t steps_per_epoch_run = 0;   // steps_per_epoch capped by total_training_steps
  std::uint64_t eval_steps_per_epoch = 0;  // floor(total_eval / batch_size_eval / world_size)
  std::uint64_t total_train_steps = 0;     // epochs * steps_per_epoch_run
  double expected_file_bytes = 0;          // num_samples_per_file * record_length_bytes
  double dataset_bytes_train = 0;          // num_files_train * expected_file_bytes
  double dataset_bytes_eval = 0;
  double bytes_per_step = 0;            // batch_size * world_size * record_length_bytes
  double computation_time_s = 0;        // expected train.computation_time per step
  double compute_time_per_epoch_s = 0;  // steps_per_epoch_run * computation_time_s
  // The smallest data rate that keeps AU at metric.au, assuming I/O fully
  // overlaps compute: batch_size * world_size * au / computation_time. 0 when
  // computation_time is 0.
  double required_samples_per_s = 0;
  double required_bytes_per_s = 0;
};

// world_size defaults to gpemu.world_size. Throws InputError if world_size < 1.
DlioFigures dlio_figures(const DlioWorkload& w, std::optional<int> world_size = {});

// AU = compute / total. Throws InputError unless 0 <= compute and 0 < total.
// (compute > total is allowed and gives AU > 1; it means the clocks disagree.)
double accelerator_utilization(double compute_seconds, double total_seconds);
// True when au >= threshold (MLPerf Storage's rule).
bool meets_au_threshold(double au, double threshold);

}  // namespace gpemu::dlio
