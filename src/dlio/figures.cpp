#include "gpemu/dlio.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::dlio {

DlioFigures dlio_figures(const DlioWorkload& w, std::optional<int> world_size) {
  const int ws = world_size.value_or(w.gpemu.world_size);
  if (ws < 1) {
    throw InputError(fmt::format("DLIO figures: world size {} is not valid; accepted: an integer >= 1", ws));
  }
  const auto files = static_cast<std::uint64_t>(std::max<std::int64_t>(0, w.dataset.num_files_train));
  const auto files_eval = static_cast<std::uint64_t>(std::max<std::int64_t>(0, w.dataset.num_files_eval));
  const auto per_file = static_cast<std::uint64_t>(std::max<std::int64_t>(0, w.dataset.num_samples_per_file));
  const auto batch = static_cast<std::uint64_t>(std::max<std::int64_t>(1, w.reader.batch_size));
  const auto batch_eval = static_cast<std::uint64_t>(std::max<std::int64_t>(1, w.reader.batch_size_eval));
  const auto ranks = static_cast<std::uint64_t>(ws);

  DlioFigures f;
  f.world_size = ws;
  f.total_samples_train = files * per_file;
  f.total_samples_eval = files_eval * per_file;
  f.samples_per_rank = (f.total_samples_train + ranks - 1) / ranks;
  f.steps_per_epoch = f.total_samples_train / (batch * ranks);
  f.steps_per_epoch_run = f.steps_per_epoch;
  if (w.train.total_training_steps > 0) {
    f.steps_per_epoch_run =
        std::min<std::uint64_t>(f.steps_per_epoch, static_cast<std::uint64_t>(w.train.total_training_steps));
  }
  f.eval_steps_per_epoch = f.total_samples_eval / (batch_eval * ranks);
  f.total_train_steps = static_cast<std::uint64_t>(std::max(0, w.train.epochs)) * f.steps_per_epoch_run;
  const double record = w.dataset.record_length_bytes;
  f.expected_file_bytes = static_cast<double>(per_file) * record;
  f.dataset_bytes_train = static_cast<double>(files) * f.expected_file_bytes;
  f.dataset_bytes_eval = static_cast<double>(files_eval) * f.expected_file_bytes;
  f.bytes_per_step = static_cast<double>(batch * ranks) * record;
  f.computation_time_s = w.train.computation_time.expected();
  f.compute_time_per_epoch_s = static_cast<double>(f.steps_per_epoch_run) * f.computation_time_s;
  if (f.computation_time_s > 0) {
    f.required_samples_per_s = static_cast<double>(batch * ranks) * w.metric.au / f.computation_time_s;
    f.required_bytes_per_s = f.required_samples_per_s * record;
  }
  return f;
}

double accelerator_utilization(double compute_seconds, double total_seconds) {
  if (!std::isfinite(compute_seconds) || compute_seconds < 0) {
    throw InputError(fmt::format("AU: compute time {} s is not valid; accepted: seconds >= 0", compute_seconds));
  }
  if (!std::isfinite(total_seconds) || total_seconds <= 0) {
    throw InputError(fmt::format("AU: total time {} s is not valid; accepted: seconds > 0", total_seconds));
  }
  return compute_seconds / total_seconds;
}

bool meets_au_threshold(double au, double threshold) { return au >= threshold; }

}  // namespace gpemu::dlio
