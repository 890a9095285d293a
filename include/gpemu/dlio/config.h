// DLIO workload configurations: the YAML files that DLIO (argonne-lcf/
// dlio_benchmark) and MLPerf Storage use to describe the I/O of a deep-learning
// training job, read into a typed model with DLIO's defaults.
//
// Accepted input (docs/dlio.md has the full key table):
//   * a YAML file with the sections (model, framework, workflow, dataset,
//     reader, train, evaluation, checkpoint, metric, output, profiling,
//     storage) at the top level, as DLIO ships its workload files, or under a
//     `workload:` root, as hydra composes them (e.g. a run's .hydra/config.yaml);
//   * gpemu's own `gpemu:` section next to them (GPU, model, world size, where
//     the step time comes from); DLIO ignores it, so a file stays runnable by
//     DLIO unchanged;
//   * hydra-style command-line overrides: `++workload.reader.batch_size=8`,
//     `+workload...=v`, `workload...=v` and `~workload.train.computation_time`.
//
// Every key is typed by its field. An unknown section or key is an InputError
// with a "did you mean" suggestion (or, with strict = false, a collected
// warning); it is never silently dropped. Keys DLIO knows but gpemu does not
// act on are recorded in `not_emulated`.
//
// Thread safety: parsing and the free functions are pure; a DlioWorkload is a
// plain value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/cost/cost_model.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/time.h"

namespace gpemu::dlio {

// --- Enumerations (names are DLIO's spellings; parsing ignores case) ---------

enum class Framework { TensorFlow, PyTorch };
enum class DataFormat {
  Tfrecord,
  Hdf5,
  Csv,
  Npz,
  Npy,
  Hdf5Opt,
  Jpeg,
  Png,
  IndexedBinary,
  MmapIndexedBinary,
  Synthetic,
  Parquet,
};
enum class DataLoaderKind { TensorFlow, PyTorch, Dali, NativeDali, Synthetic, Custom };
enum class Shuffle { Off, Seed, Random };
enum class ReadType { OnDemand, Memory };
enum class FileAccess { Multi, Shared, Collective, Mpio, Posix };
enum class Compression { None, Gzip, Lzf, Bz2, Zip, Xz };
enum class CheckpointType { RankZero, AllRanks };
enum class CheckpointMode { Default, Subset };
enum class DataType { Fp16, Bf16, Fp32, Int8, Uint8 };
enum class Profiler { None, Iostat, Darshan, Tensorboard };
enum class StorageType { LocalFs, ParallelFs };
// Where a step's computation time comes from (gpemu extension, see GpemuSection).
enum class StepTimeSource { Auto, Config, CostModel };
using Distribution = gpemu::TimeDistribution;

std::string_view to_string(Framework v);
std::string_view to_string(DataFormat v);
std::string_view to_string(DataLoaderKind v);
std::string_view to_string(Shuffle v);
std::string_view to_string(ReadType v);
std::string_view to_string(FileAccess v);
std::string_view to_string(Compression v);
std::string_view to_string(CheckpointType v);
std::string_view to_string(CheckpointMode v);
std::string_view to_string(DataType v);
std::string_view to_string(Profiler v);
std::string_view to_string(StorageType v);
std::string_view to_string(StepTimeSource v);
std::string_view to_string(Distribution v);

// Bytes per element of a model/optimizer data type.
int bytes_per_element(DataType t);

// A DLIO time value (computation_time, preprocess_time, eval_time): see
// gpemu/time_distribution.h, where the engine draws them.
using TimeSpec = gpemu::TimeSpec;

// --- The configuration model -------------------------------------------------
// Field defaults are DLIO's (its ConfigArguments, where the documentation and
// the code disagree the code wins; docs/dlio.md lists both).
struct DlioWorkload {
  struct Parallelism {
    int tensor = 1;
    int pipeline = 1;
    int data = -1;  // -1: world_size / (tensor * pipeline)
    int zero_stage = 0;
  };
  struct Transformer {
    std::int64_t hidden_size = 2048;
    std::int64_t ffn_hidden_size = 8192;
    std::int64_t vocab_size = 32000;
    std::int64_t num_attention_heads = 32;
    std::int64_t num_kv_heads = 8;
  };
  struct Model {
    std::string name = "default";
    std::string type;                 // free text ("cnn", "transformer"); DLIO: None
    double model_size_bytes = 10240;  // checkpoint bytes per writing rank
    DataType model_datatype = DataType::Fp16;
    DataType optimizer_datatype = DataType::Fp32;
    std::vector<std::int64_t> optimization_groups;  // elements per optimizer group
    int num_layers = -1;
    std::vector<std::int64_t> layer_parameters;  // elements per layer tensor
    Parallelism parallelism;
    Transformer transformer;
  };
  struct Workflow {
    bool generate_data = false;
    bool train = true;
    bool evaluation = false;
    bool checkpoint = false;
    bool profiling = false;
    bool debug = false;
  };
  struct Dataset {
    std::string data_folder = "./data/";
    DataFormat format = DataFormat::Tfrecord;
    std::int64_t num_files_train = 8;
    std::int64_t num_files_eval = 0;
    std::int64_t num_samples_per_file = 1;
    double record_length_bytes = 65536;     // mean bytes per sample (alias record_length)
    double record_length_bytes_stdev = 0;   // alias record_length_stdev
    double record_length_bytes_resize = 0;  // alias record_length_resize
    std::int64_t num_subfolders_train = 0;
    std::int64_t num_subfolders_eval = 0;
    std::string file_prefix = "img";
    Compression compression = Compression::None;
    int compression_level = 4;
    bool enable_chunking = false;
    std::int64_t chunk_size = 0;
    bool keep_files = true;
    std::int64_t generation_buffer_size = std::int64_t{2} << 30;
    std::vector<std::int64_t> record_dims;
    std::string record_element_type = "uint8";
  };
  struct Reader {
    DataLoaderKind data_loader = DataLoaderKind::TensorFlow;
    std::int64_t batch_size = 1;
    std::int64_t batch_size_eval = 1;
    int read_threads = 1;
    int computation_threads = 1;
    int prefetch_size = 2;
    std::optional<std::int64_t> transfer_size;  // DLIO: None (its docs say 262144)
    Shuffle file_shuffle = Shuffle::Off;
    Shuffle sample_shuffle = Shuffle::Off;
    std::int64_t shuffle_size = 1024;
    ReadType read_type = ReadType::OnDemand;
    FileAccess file_access = FileAccess::Multi;
    TimeSpec preprocess_time;  // preprocess_time_stdev sets preprocess_time.stdev
    bool pin_memory = true;
    bool odirect = false;
    bool dont_use_mmap = false;
    std::string multiprocessing_context = "fork";
    std::vector<std::int64_t> transformed_record_dims;
    std::string transformed_record_element_type = "uint8";
  };
  struct Train {
    int epochs = 1;
    TimeSpec computation_time;               // seconds per step; computation_time_stdev sets .stdev
    std::int64_t total_training_steps = -1;  // -1: whole epochs
    bool seed_change_epoch = true;
    std::int64_t seed = 123;
  };
  struct Evaluation {
    TimeSpec eval_time;  // eval_time_stdev sets .stdev
    int eval_after_epoch = 1;
    int epochs_between_evals = 1;
  };
  struct Checkpoint {
    std::string checkpoint_folder = "./checkpoints/";
    int checkpoint_after_epoch = 1;
    int epochs_between_checkpoints = 1;
    std::int64_t steps_between_checkpoints = -1;  // > 0: checkpoint every N steps instead
    CheckpointType type = CheckpointType::RankZero;
    CheckpointMode mode = CheckpointMode::Default;
    bool fsync = false;
    double time_between_checkpoints = -1;
    int num_checkpoints_write = -1;
    int num_checkpoints_read = -1;
    bool recovery_rank_shift = false;
    bool rank_sync = false;
    bool randomize_tensor = true;
  };
  struct Metric {
    double au = 0.90;  // MLPerf Storage pass threshold on accelerator utilization
  };
  struct Output {
    std::string folder;  // DLIO: None (hydra's run directory)
    std::string log_file = "dlio.log";
    int exclude_start_steps = 1;  // output.metric.exclude_start_steps
    int exclude_end_steps = 0;    // output.metric.exclude_end_steps
  };
  struct Profiling {
    Profiler profiler = Profiler::Iostat;
    std::vector<std::string> iostat_devices;
  };
  struct Storage {
    StorageType storage_type = StorageType::LocalFs;
    std::string storage_root = "./";
  };
  // gpemu extension: name a GPU (and a model) so that the step time can come
  // from gpemu's cost model instead of train.computation_time.
  struct Gpemu {
    std::string gpu;                     // catalog id after resolution ("" = none)
    std::string model;                   // cost-model name; "" = model.name
    std::optional<Precision> precision;  // unset = the cost model's default
    int world_size = 1;                  // ranks (one GPU each) the run emulates
    StepTimeSource step_time = StepTimeSource::Auto;
    // Modelled nodes the ranks are spread over evenly (virtual clock only; at
    // most kMaxGpusPerNode ranks a node when > 1), joined by `network`: a
    // preset (10gbe, 25gbe, 100gbe, 400gbe) or a network JSON file. JobSpec's
    // cluster.nodes and network, as gpemu train's --nodes and --network.
    int nodes = 1;
    std::string network = "100gbe";
  };

  Model model;
  Framework framework = Framework::TensorFlow;
  Workflow workflow;
  Dataset dataset;
  Reader reader;
  Train train;
  Evaluation evaluation;
  Checkpoint checkpoint;
  Metric metric;
  Output output;
  Profiling profiling;
  Storage storage;
  Gpemu gpemu;

  // Where the configuration came from: the file path, or "<string>".
  std::string source;
  // Canonical key path ("reader.batch_size") -> where it was set
  // ("unet3d_a100.yaml:23" or "override '++workload.reader.batch_size=4'").
  std::map<std::string, std::string> set_keys;
  // Unknown sections/keys when parsed with strict = false, and other notices.
  std::vector<std::string> warnings;
  // Keys DLIO knows that gpemu accepts but does not act on (one line each).
  std::vector<std::string> not_emulated;

  bool is_set(std::string_view key_path) const { return set_keys.count(std::string(key_path)) > 0; }
};

// The model name the cost model should use: gpemu.model, else model.name.
std::string cost_model_name(const DlioWorkload& w);
// Auto resolved: CostModel when gpemu.gpu is set, else Config.
StepTimeSource effective_step_time_source(const DlioWorkload& w);

// --- Parsing -----------------------------------------------------------------

struct DlioParseOptions {
  // true: unknown sections and keys are InputErrors. false: they are collected
  // in DlioWorkload::warnings and otherwise ignored.
  bool strict = true;
};

// Reads a DLIO YAML file and applies the overrides in order, then validates.
// Throws InputError naming the file (and line), key, value and what is accepted.
DlioWorkload parse_dlio_config(const std::filesystem::path& path, const std::vector<std::string>& overrides = {},
                               const DlioParseOptions& options = {});

// As parse_dlio_config, from YAML text; `source` names it in messages.
DlioWorkload parse_dlio_config_string(std::string_view yaml, const std::vector<std::string>& overrides = {},
                                      const DlioParseOptions& options = {}, std::string_view source = "<string>");

// Checks ranges and cross-field rules (batch sizes >= 1, num_files_train >= 1,
// record_length_bytes > 0, 0 < au <= 1, ...). parse_dlio_config calls it; call
// it again after changing fields by hand. Throws InputError.
void validate(const DlioWorkload& w);
// The rule validate() applies to gpemu.nodes, for a world size that may
// differ from gpemu.world_size (DlioRunOptions::world_size): the nodes divide
// it, and with more than one node each holds at most kMaxGpusPerNode ranks.
// One node takes any number of ranks (they share no link). InputError naming
// gpemu.nodes, where it was set, and what is accepted.
void check_nodes(const DlioWorkload& w, int world_size);

// The effective configuration as DLIO-style YAML (sections at the top level,
// canonical key names, every key written). Parsing it gives the same workload.
std::string to_yaml(const DlioWorkload& w);

// One accepted key, for documentation and `gpemu dlio keys`-style listings.
struct DlioKeyInfo {
  std::string path;           // "reader.batch_size"
  std::string accepted;       // "integer >= 1", "one of: off, seed, random", ...
  std::string default_value;  // as YAML text
  bool emulated = true;       // false: accepted, recorded in not_emulated, no effect
  std::string alias_of;       // non-empty for alternative spellings
};
const std::vector<DlioKeyInfo>& dlio_keys();

}  // namespace gpemu::dlio

namespace gpemu {
using dlio::DlioWorkload;
using dlio::parse_dlio_config;
}  // namespace gpemu
