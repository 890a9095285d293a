// DLIO configuration: validation of a DlioWorkload (config.h's validate and
// check_nodes): every key's own rule from the schema, the limits on what a
// workload may ask for, and the rules between keys. Each message names the key
// and where its value came from (detail::invalid).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "common/checked.h"
#include "dlio/enums.h"
#include "dlio/schema.h"
#include "dlio/tree.h"
#include "gpemu/dlio.h"
#include "gpemu/error.h"
#include "gpemu/interconnect/cluster.h"

namespace gpemu::dlio {

using detail::FieldSpec;
using detail::inline_text;
using detail::invalid;
using detail::SectionSpec;

namespace {

void validate_fields(const DlioWorkload& w, const SectionSpec& s) {
  for (const FieldSpec& f : s.fields) {
    if (!f.alias_of.empty() || !f.valid || f.valid(w)) continue;
    invalid(w, f.path, f.get ? inline_text(f.get(w)) : "?", f.accepted);
  }
  for (const SectionSpec& sub : s.sections) validate_fields(w, sub);
}

// Limits on what a workload may ask for, checked before anything is
// allocated, generated or run: past them a run would exhaust memory or disk,
// overflow the emulated clock, or run for years (each message names the key,
// the value and the limit).
// Files and samples per file: past DLIO's largest shipped workloads (1.7
// million files; 4.7 million samples per file), far below what would wrap.
constexpr std::int64_t kMaxFiles = std::int64_t{1} << 26;
constexpr std::int64_t kMaxSamplesPerFile = std::int64_t{1} << 32;
constexpr double kMaxRecordBytes = 4294967296.0;       // 4 GiB: stored npz entries end there
constexpr double kMaxModelBytes = 1125899906842624.0;  // 2^50 B = 1 PiB
constexpr int kMaxThreads = 1024;
constexpr int kMaxEpochs = 1000000;
constexpr std::int64_t kMaxTotalSteps = 10000000;
constexpr int kMaxCheckpoints = 10000;

void validate_magnitudes(const DlioWorkload& w) {
  const auto& d = w.dataset;
  for (const auto& [key, files] : {std::pair{"dataset.num_files_train", d.num_files_train},
                                   std::pair{"dataset.num_files_eval", d.num_files_eval}}) {
    if (files > kMaxFiles) invalid(w, key, std::to_string(files), fmt::format("an integer from 0 to {}", kMaxFiles));
  }
  if (d.num_samples_per_file > kMaxSamplesPerFile)
    invalid(w, "dataset.num_samples_per_file", std::to_string(d.num_samples_per_file),
            fmt::format("an integer from 1 to {}", kMaxSamplesPerFile));
  if (d.record_length_bytes + 3 * d.record_length_bytes_stdev > kMaxRecordBytes)
    invalid(w, d.record_length_bytes_stdev > 0 ? "dataset.record_length_bytes_stdev" : "dataset.record_length_bytes",
            fmt::format("{}", d.record_length_bytes_stdev > 0 ? d.record_length_bytes_stdev : d.record_length_bytes),
            fmt::format("records of at most {:g} bytes (4 GiB), mean + 3 stdev (records are drawn up to that)",
                        kMaxRecordBytes));
  if (w.model.model_size_bytes > kMaxModelBytes)
    invalid(w, "model.model_size_bytes", fmt::format("{}", w.model.model_size_bytes),
            fmt::format("at most {:g} bytes (1 PiB)", kMaxModelBytes));
  if (w.reader.read_threads > kMaxThreads)
    invalid(w, "reader.read_threads", std::to_string(w.reader.read_threads),
            fmt::format("an integer from 0 to {} (each is a thread)", kMaxThreads));
  if (w.reader.computation_threads > kMaxThreads)
    invalid(w, "reader.computation_threads", std::to_string(w.reader.computation_threads),
            fmt::format("an integer from 1 to {}", kMaxThreads));
  if (w.checkpoint.num_checkpoints_write > kMaxCheckpoints)
    invalid(w, "checkpoint.num_checkpoints_write", std::to_string(w.checkpoint.num_checkpoints_write),
            fmt::format("-1 or an integer from 1 to {}", kMaxCheckpoints));
  if (w.train.epochs > kMaxEpochs)
    invalid(w, "train.epochs", std::to_string(w.train.epochs), fmt::format("an integer from 1 to {}", kMaxEpochs));

  // Steps of the whole run (upper bound: every rank reads its share).
  const double world = std::max(1, w.gpemu.world_size);
  const double steps_per_epoch =
      std::ceil(static_cast<double>(d.num_files_train) * static_cast<double>(d.num_samples_per_file) /
                (static_cast<double>(std::max<std::int64_t>(1, w.reader.batch_size)) * world));
  double steps = w.workflow.train ? steps_per_epoch * w.train.epochs : 0;
  if (w.train.total_training_steps > 0) steps = std::min(steps, static_cast<double>(w.train.total_training_steps));
  if (steps > static_cast<double>(kMaxTotalSteps) && steps_per_epoch > static_cast<double>(kMaxTotalSteps)) {
    // One epoch is too many steps already: the dataset's size is to blame,
    // not the epochs (N18); the key the user gave, else the larger count.
    const bool files_set = w.set_keys.contains("dataset.num_files_train"),
               samples_set = w.set_keys.contains("dataset.num_samples_per_file");
    const bool blame_samples =
        samples_set != files_set ? samples_set : d.num_samples_per_file >= static_cast<std::int64_t>(d.num_files_train);
    invalid(w, blame_samples ? "dataset.num_samples_per_file" : "dataset.num_files_train",
            std::to_string(blame_samples ? d.num_samples_per_file : static_cast<std::int64_t>(d.num_files_train)),
            fmt::format("a dataset of at most {} steps per epoch; {} files x {} samples / ({} per batch x {} "
                        "rank{}) are {:.3g} steps",
                        kMaxTotalSteps, d.num_files_train, d.num_samples_per_file,
                        std::max<std::int64_t>(1, w.reader.batch_size), world, world == 1 ? "" : "s", steps_per_epoch));
  }
  if (steps > static_cast<double>(kMaxTotalSteps))
    invalid(w, "train.epochs", std::to_string(w.train.epochs),
            fmt::format("a run of at most {} steps in all; {} epochs of {:.0f} steps are {:.3g}", kMaxTotalSteps,
                        w.train.epochs, steps_per_epoch, steps));
  // Expected emulated time: each step's computation plus its samples'
  // preprocessing (one reader thread; more threads only shorten it).
  const double per_step = w.train.computation_time.expected() +
                          static_cast<double>(w.reader.batch_size) * w.reader.preprocess_time.expected();
  const double total_s = steps * per_step;
  if (total_s > kClockRangeSeconds / 4)
    invalid(w,
            per_step > 0 && w.train.computation_time.expected() >= per_step / 2 ? "train.computation_time"
                                                                                : "reader.preprocess_time",
            fmt::format("{:g} s per step", per_step),
            fmt::format("a run that fits the emulated clock: {:.3g} steps x {:g} s = {:.3g} s, past the limit of "
                        "{:.3g} s (73 years)",
                        steps, per_step, total_s, kClockRangeSeconds / 4));
}

}  // namespace

void validate(const DlioWorkload& w) {
  validate_fields(w, detail::schema());
  validate_magnitudes(w);
  // Generation writes <data_folder>/train/ and checkpoints write below their
  // folder; at the filesystem root that would scatter files over '/'.
  for (const auto& [key, folder] : {std::pair{"dataset.data_folder", &w.dataset.data_folder},
                                    std::pair{"checkpoint.checkpoint_folder", &w.checkpoint.checkpoint_folder}}) {
    const auto p = std::filesystem::path(*folder).lexically_normal();
    if (!folder->empty() && p == p.root_path())
      invalid(w, key, *folder, "a folder below the filesystem root, e.g. /data/dlio");
  }

  if ((w.workflow.train || w.workflow.generate_data) && w.dataset.num_files_train < 1) {
    invalid(w, "dataset.num_files_train", std::to_string(w.dataset.num_files_train),
            "an integer >= 1 when workflow.train or workflow.generate_data is true");
  }
  if (w.workflow.evaluation && w.dataset.num_files_eval < 1) {
    invalid(w, "dataset.num_files_eval", std::to_string(w.dataset.num_files_eval),
            "an integer >= 1 when workflow.evaluation is true");
  }
  const bool tf_fw = w.framework == Framework::TensorFlow;
  const bool pt_fw = w.framework == Framework::PyTorch;
  // Only a run that reads data has a loader to disagree with its framework:
  // the checkpoint-only LLM workloads (framework pytorch, no reader section,
  // DLIO's default data_loader tensorflow) run their checkpoints.
  const bool reads = w.workflow.train || w.workflow.evaluation;
  if (reads && ((tf_fw && w.reader.data_loader == DataLoaderKind::PyTorch) ||
                (pt_fw && w.reader.data_loader == DataLoaderKind::TensorFlow))) {
    invalid(w, "reader.data_loader", std::string(to_string(w.reader.data_loader)),
            fmt::format("with framework {}: {} (DLIO refuses this combination too)", to_string(w.framework),
                        tf_fw ? "tensorflow, dali, native_dali, synthetic or custom"
                              : "pytorch, dali, native_dali, synthetic or custom"));
  }
  if (w.gpemu.step_time == StepTimeSource::CostModel && w.gpemu.gpu.empty()) {
    invalid(w, "gpemu.step_time", "cost_model",
            "cost_model only together with gpemu.gpu (name the GPU whose step time the cost model predicts); "
            "otherwise auto or config");
  }
  if (!w.dataset.record_dims.empty() && w.dataset.record_length_bytes_stdev > 0) {
    invalid(w, "dataset.record_length_bytes_stdev", fmt::format("{}", w.dataset.record_length_bytes_stdev),
            "0 when dataset.record_dims is given (DLIO's rule)");
  }
  const auto& par = w.model.parallelism;
  if (w.model.num_layers > 0 && w.model.num_layers < par.pipeline) {
    invalid(w, "model.num_layers", std::to_string(w.model.num_layers),
            fmt::format("at least model.parallelism.pipeline = {} layers", par.pipeline));
  }
  if (par.zero_stage == 3 && par.pipeline > 1) {
    invalid(w, "model.parallelism.zero_stage", "3", "0, 1 or 2 when model.parallelism.pipeline > 1 (DLIO's rule)");
  }
  if (w.checkpoint.mode == CheckpointMode::Default && par.data > 0) {
    invalid(w, "model.parallelism.data", std::to_string(par.data),
            "-1 (derived from the world size) unless checkpoint.mode is subset");
  }
  if (w.checkpoint.mode == CheckpointMode::Subset && par.data <= 0) {
    invalid(w, "model.parallelism.data", std::to_string(par.data), "an integer >= 1 when checkpoint.mode is subset");
  }
  if (w.checkpoint.mode == CheckpointMode::Default && w.gpemu.world_size % (par.tensor * par.pipeline) != 0) {
    invalid(w, "gpemu.world_size", std::to_string(w.gpemu.world_size),
            fmt::format("a multiple of model.parallelism.tensor * pipeline = {}", par.tensor * par.pipeline));
  }
  if (w.checkpoint.num_checkpoints_write > 0 &&
      w.checkpoint.num_checkpoints_read > w.checkpoint.num_checkpoints_write) {
    invalid(w, "checkpoint.num_checkpoints_read", std::to_string(w.checkpoint.num_checkpoints_read),
            fmt::format("at most checkpoint.num_checkpoints_write = {}", w.checkpoint.num_checkpoints_write));
  }
  check_nodes(w, w.gpemu.world_size);
}

void check_nodes(const DlioWorkload& w, int world_size) {
  const int nodes = w.gpemu.nodes;
  if (nodes < 1) invalid(w, "gpemu.nodes", std::to_string(nodes), "an integer >= 1");
  // As gpemu train lays out --gpus over --nodes (plan_cluster): an even
  // split, a node of the catalog's servers at most. One node keeps what it
  // always took: DLIO's ranks share no link, so 32 of them are 32 devices.
  if (world_size % nodes != 0)
    invalid(w, "gpemu.nodes", std::to_string(nodes),
            fmt::format("a divisor of the world size {} (gpemu.world_size, --gpus): every node holds the same "
                        "number of ranks",
                        world_size));
  if (nodes > 1 && world_size / nodes > kMaxGpusPerNode)
    invalid(w, "gpemu.nodes", std::to_string(nodes),
            fmt::format("1, or a divisor of the world size {} of at least {}, so that a node holds at most {} ranks "
                        "(one GPU each)",
                        world_size, (world_size + kMaxGpusPerNode - 1) / kMaxGpusPerNode, kMaxGpusPerNode));
}

}  // namespace gpemu::dlio
