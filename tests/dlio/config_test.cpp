// DLIO configuration parsing, as a specification: the layouts accepted, DLIO's
// defaults and spellings, hydra overrides, and what a user sees when a key or
// value is wrong.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpemu/dlio.h"
#include "gpemu/error.h"
#include "support/dlio_test_util.h"

namespace gpemu::dlio {
namespace {

DlioWorkload parse(const std::string& yaml, const std::vector<std::string>& overrides = {}, bool strict = true) {
  return parse_dlio_config_string(yaml, overrides, DlioParseOptions{strict}, "test.yaml");
}

// The InputError message parsing gives, or "" when it parses.
std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse(yaml, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// to_yaml without its first (comment) line, which names the source.
std::string body_of(const DlioWorkload& w) {
  const std::string y = to_yaml(w);
  return y.substr(y.find('\n') + 1);
}

const char* const kUnet3d = R"(
model:
  name: unet3d
  type: cnn
  model_size: 499153191
framework: pytorch
workflow:
  generate_data: False
  train: True
  checkpoint: True
dataset:
  data_folder: data/unet3d/
  format: npz
  num_files_train: 168
  num_samples_per_file: 1
  record_length_bytes: 146600628
  record_length_bytes_stdev: 68341808
  record_length_bytes_resize: 2097152
reader:
  data_loader: pytorch
  batch_size: 7
  read_threads: 4
  file_shuffle: seed
  sample_shuffle: seed
train:
  epochs: 5
  computation_time: 0.636
checkpoint:
  checkpoint_folder: checkpoints/unet3d
  checkpoint_after_epoch: 5
  epochs_between_checkpoints: 2
metric:
  au: 0.90
)";

// --- Layouts and defaults -------------------------------------------------------

TEST(DlioConfig, AnEmptyFileGivesDliosDefaults) {
  const DlioWorkload w = parse("");
  EXPECT_EQ(w.model.name, "default");
  EXPECT_EQ(w.model.model_size_bytes, 10240);
  EXPECT_EQ(w.framework, Framework::TensorFlow);
  EXPECT_FALSE(w.workflow.generate_data);
  EXPECT_TRUE(w.workflow.train);
  EXPECT_FALSE(w.workflow.checkpoint);
  EXPECT_EQ(w.dataset.data_folder, "./data/");
  EXPECT_EQ(w.dataset.format, DataFormat::Tfrecord);
  EXPECT_EQ(w.dataset.num_files_train, 8);
  EXPECT_EQ(w.dataset.num_samples_per_file, 1);
  EXPECT_EQ(w.dataset.record_length_bytes, 65536);
  EXPECT_EQ(w.dataset.file_prefix, "img");
  EXPECT_EQ(w.reader.data_loader, DataLoaderKind::TensorFlow);
  EXPECT_EQ(w.reader.batch_size, 1);
  EXPECT_EQ(w.reader.read_threads, 1);
  EXPECT_EQ(w.reader.prefetch_size, 2);
  EXPECT_FALSE(w.reader.transfer_size.has_value());
  EXPECT_EQ(w.reader.file_shuffle, Shuffle::Off);
  EXPECT_EQ(w.reader.read_type, ReadType::OnDemand);
  EXPECT_EQ(w.train.epochs, 1);
  EXPECT_EQ(w.train.computation_time.expected(), 0);
  EXPECT_EQ(w.train.total_training_steps, -1);
  EXPECT_TRUE(w.train.seed_change_epoch);
  EXPECT_EQ(w.train.seed, 123);
  EXPECT_EQ(w.checkpoint.checkpoint_folder, "./checkpoints/");
  EXPECT_EQ(w.checkpoint.checkpoint_after_epoch, 1);
  EXPECT_EQ(w.checkpoint.epochs_between_checkpoints, 1);
  EXPECT_EQ(w.checkpoint.steps_between_checkpoints, -1);
  EXPECT_EQ(w.checkpoint.type, CheckpointType::RankZero);
  EXPECT_DOUBLE_EQ(w.metric.au, 0.90);
  EXPECT_EQ(w.gpemu.world_size, 1);
  EXPECT_TRUE(w.gpemu.gpu.empty());
  EXPECT_TRUE(w.set_keys.empty());
  EXPECT_TRUE(w.warnings.empty());
}

TEST(DlioConfig, ReadsAnMlperfStorageWorkload) {
  const DlioWorkload w = parse(kUnet3d);
  EXPECT_EQ(w.model.name, "unet3d");
  EXPECT_EQ(w.model.type, "cnn");
  EXPECT_EQ(w.model.model_size_bytes, 499153191);
  EXPECT_EQ(w.framework, Framework::PyTorch);
  EXPECT_TRUE(w.workflow.checkpoint);
  EXPECT_EQ(w.dataset.format, DataFormat::Npz);
  EXPECT_EQ(w.dataset.num_files_train, 168);
  EXPECT_EQ(w.dataset.record_length_bytes, 146600628);
  EXPECT_EQ(w.dataset.record_length_bytes_stdev, 68341808);
  EXPECT_EQ(w.dataset.record_length_bytes_resize, 2097152);
  EXPECT_EQ(w.reader.data_loader, DataLoaderKind::PyTorch);
  EXPECT_EQ(w.reader.batch_size, 7);
  EXPECT_EQ(w.reader.sample_shuffle, Shuffle::Seed);
  EXPECT_EQ(w.train.epochs, 5);
  EXPECT_DOUBLE_EQ(w.train.computation_time.expected(), 0.636);
  EXPECT_EQ(w.checkpoint.checkpoint_after_epoch, 5);
  EXPECT_DOUBLE_EQ(w.metric.au, 0.90);
  EXPECT_EQ(w.set_keys.at("reader.batch_size"), "test.yaml:21");
  EXPECT_CONTAINS(w.set_keys.at("model.model_size_bytes"), "as model.model_size");
  EXPECT_TRUE(w.warnings.empty());
}

TEST(DlioConfig, SectionsUnderAWorkloadRootReadTheSame) {
  std::string nested = "workload:\n";
  std::istringstream in(kUnet3d);
  for (std::string line; std::getline(in, line);) nested += "  " + line + "\n";
  nested += "gpemu:\n  world_size: 2\n";
  const DlioWorkload top = parse(std::string(kUnet3d) + "gpemu:\n  world_size: 2\n");
  const DlioWorkload under = parse(nested);
  EXPECT_EQ(body_of(top), body_of(under));
  EXPECT_EQ(under.gpemu.world_size, 2);
}

TEST(DlioConfig, AWorkloadRootRejectsStrangersBesideIt) {
  EXPECT_CONTAINS(error_of("workload:\n  train:\n    epochs: 2\nextra: 1\n"),
                  "unknown top-level key 'extra' next to 'workload:'");
}

TEST(DlioConfig, ModelMayBeAPlainName) {
  const DlioWorkload w = parse("model: resnet50\n");
  EXPECT_EQ(w.model.name, "resnet50");
  EXPECT_TRUE(w.is_set("model.name"));
}

TEST(DlioConfig, AcceptsDliosOlderSpellings) {
  const DlioWorkload w = parse(
      "dataset:\n  record_length: 114660.07\n  record_length_stdev: 10\n  record_length_resize: 150528\n"
      "data_reader:\n  batch_size: 64\n"
      "checkpoint:\n  model_size: 4096\n");
  EXPECT_DOUBLE_EQ(w.dataset.record_length_bytes, 114660.07);
  EXPECT_EQ(w.dataset.record_length_bytes_stdev, 10);
  EXPECT_EQ(w.dataset.record_length_bytes_resize, 150528);
  EXPECT_EQ(w.reader.batch_size, 64);
  EXPECT_EQ(w.model.model_size_bytes, 4096);
  EXPECT_TRUE(w.is_set("dataset.record_length_bytes"));
  EXPECT_TRUE(w.is_set("reader.batch_size"));
}

TEST(DlioConfig, TwoSpellingsOfOneKeyMustAgree) {
  EXPECT_EQ(error_of("dataset:\n  record_length: 100\n  record_length_bytes: 100.0\n"), "");
  const std::string e = error_of("dataset:\n  record_length_bytes: 100\n  record_length: 200\n");
  EXPECT_CONTAINS(e, "dataset.record_length = 200 conflicts with dataset.record_length_bytes = 100");
  EXPECT_CONTAINS(e, "test.yaml:3");
  EXPECT_CONTAINS(error_of("model:\n  model_size_bytes: 1\ncheckpoint:\n  model_size: 2\n"), "conflicts with");
  EXPECT_CONTAINS(error_of("reader:\n  batch_size: 1\ndata_reader:\n  batch_size: 1\n"), "are the same section");
}

TEST(DlioConfig, TimesMayBeDistributions) {
  DlioWorkload w = parse("train:\n  computation_time_stdev: 0.1\n  computation_time: 1.5\n");
  EXPECT_EQ(w.train.computation_time.distribution, Distribution::Normal);
  EXPECT_DOUBLE_EQ(w.train.computation_time.mean, 1.5);
  EXPECT_DOUBLE_EQ(w.train.computation_time.stdev, 0.1);  // whatever the key order, as in DLIO

  w = parse("train:\n  computation_time: {type: uniform, min: 0.5, max: 1.5}\n");
  EXPECT_EQ(w.train.computation_time.distribution, Distribution::Uniform);
  EXPECT_DOUBLE_EQ(w.train.computation_time.expected(), 1.0);
  w = parse("reader:\n  preprocess_time:\n    type: gamma\n    shape: 2\n    scale: 0.25\n");
  EXPECT_DOUBLE_EQ(w.reader.preprocess_time.expected(), 0.5);
  w = parse("evaluation:\n  eval_time: {mean: 0.2, stdev: 0.01}\n");
  EXPECT_DOUBLE_EQ(w.evaluation.eval_time.expected(), 0.2);
  EXPECT_DOUBLE_EQ(w.evaluation.eval_time.stdev, 0.01);

  EXPECT_CONTAINS(error_of("train:\n  computation_time: {type: uniform, min: 2, max: 1}\n"), "train.computation_time");
  EXPECT_CONTAINS(error_of("train:\n  computation_time: {mean: 1, sigma: 2}\n"), "unknown key 'sigma'");
  EXPECT_CONTAINS(error_of("train:\n  computation_time: {type: weibull}\n"),
                  "one of normal, uniform, gamma, exponential, poisson");
}

TEST(DlioConfig, RecordsKeysDlioKnowsButGpemuDoesNotEmulate) {
  const DlioWorkload w = parse(
      "reader:\n  dont_use_mmap: True\n  reader_classname: my.Reader\n"
      "dataset:\n  parquet:\n    columns: [{name: a, dtype: float32}]\n"
      "profiling:\n  iostat_devices: sda\n");
  ASSERT_EQ(w.not_emulated.size(), 4u);
  std::string all;
  for (const std::string& s : w.not_emulated) all += s + "\n";
  EXPECT_CONTAINS(all, "reader.dont_use_mmap (test.yaml:2)");
  EXPECT_CONTAINS(all, "reader.reader_classname");
  EXPECT_CONTAINS(all, "dataset.parquet");
  EXPECT_CONTAINS(all, "profiling.iostat_devices");
  EXPECT_EQ(w.profiling.iostat_devices, std::vector<std::string>{"sda"});
  EXPECT_TRUE(w.warnings.empty());
}

// --- Unknown keys ------------------------------------------------------------------

TEST(DlioConfig, AnUnknownKeyIsAnErrorWithASuggestion) {
  // DLIO's own resnet50_h100.yaml once spelled `epoch:`; DLIO silently ignored it.
  const std::string e = error_of("train:\n  computation_time: 0.1\n  epoch: 5\n");
  EXPECT_CONTAINS(e, "test.yaml:3: unknown key 'train.epoch'");
  EXPECT_CONTAINS(e, "did you mean 'train.epochs'?");
  EXPECT_CONTAINS(e, "train accepts: epochs, computation_time");
  EXPECT_CONTAINS(error_of("dataset:\n  record_length_std: 5\n"), "did you mean 'dataset.record_length_stdev'?");
}

TEST(DlioConfig, AnUnknownSectionIsAnErrorWithASuggestion) {
  const std::string e = error_of("datset:\n  num_files_train: 4\n");
  EXPECT_CONTAINS(e, "unknown section 'datset'; did you mean 'dataset'?");
}

TEST(DlioConfig, AKeyInTheWrongSectionPointsToItsSection) {
  EXPECT_CONTAINS(error_of("reader:\n  computation_time: 0.5\n"), "did you mean 'train.computation_time'?");
  EXPECT_CONTAINS(error_of("reader:\n  seed: 7\n"), "did you mean 'train.seed'?");
}

TEST(DlioConfig, NonStrictParsingCollectsUnknownKeysAsWarnings) {
  const DlioWorkload w = parse("train:\n  epoch: 5\n  epochs: 3\nfoo:\n  bar: 1\n", {}, /*strict=*/false);
  EXPECT_EQ(w.train.epochs, 3);
  ASSERT_EQ(w.warnings.size(), 2u);
  EXPECT_CONTAINS(w.warnings[0], "unknown key 'train.epoch'; did you mean 'train.epochs'?");
  EXPECT_CONTAINS(w.warnings[1], "unknown section 'foo'");
  // Bad values stay errors.
  EXPECT_THROW(parse("train:\n  epochs: many\n", {}, false), InputError);
}

TEST(DlioConfig, AKeyGivenTwiceIsAnError) {
  EXPECT_CONTAINS(error_of("reader:\n  batch_size: 4\n  batch_size: 8\n"),
                  "test.yaml:3: key 'batch_size' is given twice");
}

// --- Values ----------------------------------------------------------------------------

struct BadValue {
  std::string yaml;
  std::vector<std::string> expected;  // substrings of the message
};

TEST(DlioConfig, BadValuesNameTheKeyTheValueAndWhatIsAccepted) {
  const std::vector<BadValue> cases = {
      {"reader:\n  batch_size: abc\n", {"test.yaml:2", "reader.batch_size = 'abc'", "accepted: an integer >= 1"}},
      {"reader:\n  batch_size: 0\n", {"reader.batch_size = '0'", "an integer >= 1"}},
      {"reader:\n  batch_size: 2.5\n", {"reader.batch_size = '2.5'", "an integer"}},
      {"reader:\n  batch_size_eval: -3\n", {"reader.batch_size_eval", "an integer >= 1"}},
      {"dataset:\n  num_files_train: 0\n", {"dataset.num_files_train = 0", "an integer >= 1 when workflow.train"}},
      {"dataset:\n  num_samples_per_file: 0\n", {"dataset.num_samples_per_file", ">= 1"}},
      {"dataset:\n  record_length_bytes: 0\n", {"dataset.record_length_bytes = '0'", "a number of bytes > 0"}},
      {"dataset:\n  record_length: -5\n", {"dataset.record_length = '-5'", "> 0"}},
      {"dataset:\n  format: zip\n",
       {"dataset.format = 'zip'", "one of tfrecord, hdf5, csv, npz, npy", "indexed_binary", "parquet"}},
      {"reader:\n  file_shuffle: maybe\n", {"reader.file_shuffle = 'maybe'", "one of off, seed, random"}},
      {"workflow:\n  train: yes\n", {"workflow.train = 'yes'", "true or false"}},
      {"metric:\n  au: 1.5\n", {"metric.au = '1.5'", "a fraction > 0 and <= 1"}},
      {"train:\n  epochs: 0\n", {"train.epochs", "an integer >= 1"}},
      {"train:\n  total_training_steps: 0\n", {"train.total_training_steps", "-1 or an integer >= 1"}},
      {"train:\n  computation_time: -1\n", {"train.computation_time = '-1'", "seconds from 0 to 1e6"}},
      {"checkpoint:\n  steps_between_checkpoints: 0\n", {"checkpoint.steps_between_checkpoints", "-1 or"}},
      {"checkpoint:\n  checkpoint_after_epoch: 0\n", {"checkpoint.checkpoint_after_epoch", ">= 1"}},
      {"checkpoint:\n  checkpoint_folder: ''\n", {"checkpoint.checkpoint_folder", "a non-empty text"}},
      {"reader:\n  batch_size: [1, 2]\n", {"reader.batch_size = [...]"}},
      {"model:\n  layer_parameters: 5\n", {"model.layer_parameters", "a list of integers"}},
      {"model:\n  model_datatype: fp64\n", {"model.model_datatype = 'fp64'", "one of fp16, bf16, fp32, int8, uint8"}},
      {"framework: jax\n", {"framework = 'jax'", "one of tensorflow, pytorch"}},
      {"framework: tensorflow\nreader:\n  data_loader: pytorch\n",
       {"reader.data_loader = pytorch", "with framework tensorflow", "DLIO refuses"}},
      {"storage:\n  storage_type: s3\n", {"storage.storage_type = 's3'", "POSIX file systems only"}},
      {"gpemu:\n  gpu: Z9000\n", {"gpemu.gpu = 'Z9000'"}},
      {"gpemu:\n  step_time: cost_model\n", {"gpemu.step_time = cost_model", "together with gpemu.gpu"}},
      {"gpemu:\n  world_size: 0\n", {"gpemu.world_size", ">= 1"}},
      {"gpemu:\n  precision: fp13\n", {"gpemu.precision = 'fp13'", "fp32, tf32, fp16, bf16 or fp8"}},
      {"model:\n  parallelism:\n    tensor: 2\n", {"gpemu.world_size = 1", "a multiple of"}},
      {"workflow:\n  evaluation: true\n", {"dataset.num_files_eval = 0", "workflow.evaluation"}},
      {"reader: 5\n", {"reader = '5'", "a section"}},
      {"- a\n- b\n", {"the configuration", "a map of DLIO sections"}},
  };
  for (const BadValue& c : cases) {
    SCOPED_TRACE(c.yaml);
    const std::string e = error_of(c.yaml);
    ASSERT_FALSE(e.empty());
    for (const std::string& s : c.expected) EXPECT_CONTAINS(e, s);
  }
}

TEST(DlioConfig, BooleansAcceptDlioAndHydraSpellings) {
  for (const char* t : {"True", "true", "TRUE"}) {
    EXPECT_TRUE(parse(std::string("workflow:\n  checkpoint: ") + t + "\n").workflow.checkpoint);
  }
  for (const char* f : {"False", "false", "FALSE"}) {
    EXPECT_FALSE(parse(std::string("workflow:\n  train: ") + f + "\n").workflow.train);
  }
}

TEST(DlioConfig, EnumsIgnoreCase) {
  const DlioWorkload w = parse("framework: PyTorch\nreader:\n  data_loader: PYTORCH\n  file_shuffle: Seed\n");
  EXPECT_EQ(w.framework, Framework::PyTorch);
  EXPECT_EQ(w.reader.file_shuffle, Shuffle::Seed);
}

TEST(DlioConfig, NamesAGpuFromTheCatalog) {
  DlioWorkload w = parse("gpemu:\n  gpu: A100-SXM4-80GB\n  model: unet3d\n  precision: bf16\n  world_size: 8\n");
  EXPECT_EQ(w.gpemu.gpu, "A100-SXM4-80GB");
  EXPECT_EQ(w.gpemu.precision, Precision::BF16);
  EXPECT_EQ(w.gpemu.world_size, 8);
  EXPECT_EQ(cost_model_name(w), "unet3d");
  EXPECT_EQ(effective_step_time_source(w), StepTimeSource::CostModel);

  w = parse("model: resnet50\n");
  EXPECT_EQ(cost_model_name(w), "resnet50");
  EXPECT_EQ(effective_step_time_source(w), StepTimeSource::Config);
}

TEST(DlioConfig, SaysWhenTheCostModelReplacesComputationTime) {
  DlioWorkload w = parse("train:\n  computation_time: 0.5\ngpemu:\n  gpu: H100-SXM5-80GB\n");
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_CONTAINS(w.warnings[0], "train.computation_time (0.5 s, test.yaml:2) is not used");
  w = parse("train:\n  computation_time: 0.5\ngpemu:\n  gpu: H100-SXM5-80GB\n  step_time: config\n");
  EXPECT_TRUE(w.warnings.empty());
  EXPECT_EQ(effective_step_time_source(w), StepTimeSource::Config);
}

TEST(DlioConfig, WarnsWhenCheckpointSizeCannotComeFromATransformerConfig) {
  const DlioWorkload w = parse("workflow:\n  checkpoint: true\nmodel:\n  transformer:\n    hidden_size: 4096\n");
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_CONTAINS(w.warnings[0], "does not derive checkpoint sizes");
}

// --- Overrides ------------------------------------------------------------------------

TEST(DlioOverrides, SetEveryKindOfValue) {
  const DlioWorkload w = parse(kUnet3d, {
                                            "++workload.reader.batch_size=8",                  // int
                                            "++workload.train.computation_time=0.25",          // float
                                            "++workload.workflow.checkpoint=False",            // bool, DLIO spelling
                                            "++workload.workflow.generate_data=true",          // bool, YAML spelling
                                            "++workload.dataset.data_folder=/scratch/unet3d",  // text
                                            "++workload.dataset.format=NPY",                   // enum, any case
                                            "++workload.reader.file_shuffle=random",           // enum
                                            "++workload.model.layer_parameters=[1024, 2048]",  // list
                                            "++workload.evaluation.eval_time={mean: 1, stdev: 0.1}",  // map
                                            "++workload.dataset.record_length_bytes=1e6",  // float in exponent form
                                        });
  EXPECT_EQ(w.reader.batch_size, 8);
  EXPECT_DOUBLE_EQ(w.train.computation_time.expected(), 0.25);
  EXPECT_FALSE(w.workflow.checkpoint);
  EXPECT_TRUE(w.workflow.generate_data);
  EXPECT_EQ(w.dataset.data_folder, "/scratch/unet3d");
  EXPECT_EQ(w.dataset.format, DataFormat::Npy);
  EXPECT_EQ(w.reader.file_shuffle, Shuffle::Random);
  EXPECT_EQ(w.model.layer_parameters, (std::vector<std::int64_t>{1024, 2048}));
  EXPECT_DOUBLE_EQ(w.evaluation.eval_time.stdev, 0.1);
  EXPECT_EQ(w.dataset.record_length_bytes, 1e6);
  EXPECT_EQ(w.set_keys.at("reader.batch_size"), "override '++workload.reader.batch_size=8'");
}

TEST(DlioOverrides, PlainAndAddFormsFollowHydra) {
  DlioWorkload w = parse(kUnet3d, {"workload.reader.batch_size=3", "+workload.reader.prefetch_size=4"});
  EXPECT_EQ(w.reader.batch_size, 3);
  EXPECT_EQ(w.reader.prefetch_size, 4);
  const std::string e = error_of(kUnet3d, {"+workload.reader.batch_size=3"});
  EXPECT_CONTAINS(e, "is already set (test.yaml:21)");
  EXPECT_CONTAINS(e, "use '++workload.reader.batch_size=3'");
}

TEST(DlioOverrides, TildeResetsAKeyToItsDefault) {
  const DlioWorkload w = parse(kUnet3d, {"~workload.train.computation_time", "~workload.metric.au"});
  EXPECT_EQ(w.train.computation_time.expected(), 0);
  EXPECT_FALSE(w.is_set("train.computation_time"));
  EXPECT_DOUBLE_EQ(w.metric.au, 0.90);
  EXPECT_CONTAINS(error_of(kUnet3d, {"~workload.train.seed"}), "nothing to delete");
}

// QA finding S13: `~workload.train` reset epochs and computation_time at once
// and the run reported AU 3.5 % with exit 0.
TEST(DlioOverrides, TildeOnAWholeSectionIsRefused) {
  const std::string e = error_of(kUnet3d, {"~workload.train"});
  EXPECT_CONTAINS(e,
                  "override '~workload.train': workload.train is a whole section (it sets epochs, computation_time)");
  EXPECT_CONTAINS(e, "accepted: ~workload.train.<key> for each key to reset, e.g. ~workload.train.epochs");
  EXPECT_CONTAINS(error_of(kUnet3d, {"~workload.metric"}), "workload.metric is a whole section (it sets au)");
  EXPECT_CONTAINS(error_of(kUnet3d, {"~workload.model"}), "workload.model is a whole section");
  EXPECT_CONTAINS(error_of(kUnet3d, {"~workload.output.metric"}), "nothing to delete");
  // A key that is a map (a distribution) is still a key.
  const DlioWorkload w =
      parse(kUnet3d, {"++workload.train.computation_time={mean: 1, stdev: 0}", "~workload.train.computation_time"});
  EXPECT_EQ(w.train.computation_time.expected(), 0);
}

TEST(DlioOverrides, CreateSectionsAndExtendAPlainModelName) {
  const DlioWorkload w =
      parse("model: resnet50\n", {"++workload.model.type=cnn", "++workload.gpemu.world_size=4",
                                  "++workload.framework=pytorch", "++workload.reader.data_loader=pytorch"});
  EXPECT_EQ(w.model.name, "resnet50");
  EXPECT_EQ(w.model.type, "cnn");
  EXPECT_EQ(w.gpemu.world_size, 4);
  EXPECT_EQ(w.framework, Framework::PyTorch);
  EXPECT_EQ(parse(kUnet3d, {"++workload.model=unet3d_big"}).model.model_size_bytes, 499153191);
}

TEST(DlioOverrides, ErrorsNameTheOverride) {
  std::string e = error_of(kUnet3d, {"++workload.reader.batch_size=abc"});
  EXPECT_CONTAINS(e, "override '++workload.reader.batch_size=abc': reader.batch_size = 'abc' is not valid");
  EXPECT_CONTAINS(e, "an integer >= 1");
  e = error_of(kUnet3d, {"++workload.reader.batchsize=4"});
  EXPECT_CONTAINS(e, "override '++workload.reader.batchsize=4': unknown key 'reader.batchsize'");
  EXPECT_CONTAINS(e, "did you mean 'reader.batch_size'?");
  EXPECT_CONTAINS(error_of(kUnet3d, {"reader.batch_size=4"}), "override keys start with 'workload.'");
  EXPECT_CONTAINS(error_of(kUnet3d, {"++workload.reader.batch_size"}), "no '='");
  EXPECT_CONTAINS(error_of(kUnet3d, {"workload=unet3d_a100"}), "pass the workload's YAML file");
  EXPECT_CONTAINS(error_of(kUnet3d, {"++workload.train.epochs.x=1"}), "is a value (5), not a section");
  EXPECT_CONTAINS(error_of(kUnet3d, {"++workload..epochs=1"}), "empty name");
  EXPECT_CONTAINS(error_of(kUnet3d, {"++workload.train.epochs=[1"}), "is not valid (hydra/YAML value syntax");
}

TEST(DlioOverrides, HydraSettingsAreNotedNotApplied) {
  const DlioWorkload w = parse(kUnet3d, {"hydra.run.dir=/tmp/out"});
  ASSERT_EQ(w.not_emulated.size(), 1u);
  EXPECT_CONTAINS(w.not_emulated[0], "hydra.run.dir");
}

TEST(DlioOverrides, NonStrictAlsoCoversOverrides) {
  const DlioWorkload w = parse(kUnet3d, {"++workload.train.epoch=2"}, /*strict=*/false);
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_CONTAINS(w.warnings[0], "override '++workload.train.epoch=2': unknown key 'train.epoch'");
}

// --- Files ---------------------------------------------------------------------------------

TEST(DlioConfig, FileErrorsNameThePath) {
  testing::TempDir dir;
  const auto missing = dir.path() / "nope.yaml";
  try {
    parse_dlio_config(missing);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), missing.string());
    EXPECT_CONTAINS(e.what(), "no such file");
  }
  EXPECT_THROW(parse_dlio_config(dir.path()), InputError);
  const auto broken = dir.write("broken.yaml", "train:\n  epochs: [1\n");
  try {
    parse_dlio_config(broken);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), broken.string() + ":");
    EXPECT_CONTAINS(e.what(), "not valid YAML");
  }
  const auto good = dir.write("good.yaml", kUnet3d);
  const DlioWorkload w = parse_dlio_config(good, {"++workload.train.epochs=2"});
  EXPECT_EQ(w.source, good.string());
  EXPECT_EQ(w.train.epochs, 2);
  EXPECT_EQ(w.set_keys.at("reader.batch_size"), good.string() + ":21");
}

// --- Writing back -------------------------------------------------------------------------

TEST(DlioConfig, ToYamlRoundTrips) {
  const DlioWorkload w =
      parse(kUnet3d, {"++workload.model.layer_parameters=[1, 2]",
                      "++workload.train.computation_time={type: gamma, shape: 2, scale: 0.5}",
                      "++workload.reader.transfer_size=262144", "++workload.gpemu.gpu=H100-SXM5-80GB",
                      "++workload.gpemu.precision=fp16", "++workload.output.folder=''"});
  const DlioWorkload again = parse(to_yaml(w), {}, /*strict=*/true);
  EXPECT_EQ(body_of(w), body_of(again));
  EXPECT_EQ(again.train.computation_time, w.train.computation_time);
  EXPECT_EQ(again.reader.transfer_size, 262144);
  EXPECT_EQ(again.dataset.record_length_bytes, w.dataset.record_length_bytes);
  EXPECT_EQ(body_of(parse("")), body_of(DlioWorkload{}));
}

TEST(DlioConfig, ValidateChecksFieldsChangedInCode) {
  DlioWorkload w = parse(kUnet3d);
  w.reader.batch_size = 0;
  try {
    validate(w);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "test.yaml:21: reader.batch_size = 0 is not valid; accepted: an integer >= 1");
  }
  DlioWorkload d;
  d.dataset.num_samples_per_file = 0;
  EXPECT_THROW(validate(d), InputError);
}

// --- Key table and documentation -------------------------------------------------------------

TEST(DlioKeys, ListEveryKeyWithItsDefault) {
  const auto& keys = dlio_keys();
  auto find = [&](const std::string& path) -> const DlioKeyInfo* {
    for (const DlioKeyInfo& k : keys) {
      if (k.path == path) return &k;
    }
    return nullptr;
  };
  ASSERT_NE(find("reader.batch_size"), nullptr);
  EXPECT_EQ(find("reader.batch_size")->default_value, "1");
  EXPECT_EQ(find("reader.batch_size")->accepted, "an integer >= 1");
  EXPECT_EQ(find("dataset.record_length_bytes")->default_value, "65536");
  EXPECT_EQ(find("dataset.record_length")->alias_of, "dataset.record_length_bytes");
  EXPECT_EQ(find("checkpoint.model_size")->alias_of, "model.model_size_bytes");
  EXPECT_EQ(find("checkpoint.checkpoint_folder")->default_value, "./checkpoints/");
  EXPECT_EQ(find("metric.au")->default_value, "0.9");
  EXPECT_EQ(find("reader.transfer_size")->default_value, "null");
  EXPECT_EQ(find("framework")->default_value, "tensorflow");
  EXPECT_FALSE(find("reader.dont_use_mmap")->emulated);
  EXPECT_FALSE(find("dataset.parquet")->emulated);
  EXPECT_NE(find("gpemu.gpu"), nullptr);
  EXPECT_EQ(find("gpemu.nodes")->default_value, "1");
  EXPECT_EQ(find("gpemu.network")->default_value, "100gbe");
  EXPECT_NE(find("output.metric.exclude_start_steps"), nullptr);
  EXPECT_GT(keys.size(), 100u);
}

TEST(DlioKeys, TheDocumentationListsEveryKey) {
  std::ifstream in(std::string(GPEMU_SOURCE_DIR) + "/docs/dlio.md");
  ASSERT_TRUE(in) << "docs/dlio.md is missing";
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  for (const DlioKeyInfo& k : dlio_keys()) {
    // Every key has a row in the tables, its full path in backquotes.
    EXPECT_NE(doc.find("| `" + k.path + "` |"), std::string::npos) << k.path << " is not in docs/dlio.md";
  }
}

}  // namespace
}  // namespace gpemu::dlio
