// The one place where command-line flags become a JobSpec: `gpemu train` and
// `gpemu analyze` register the same options with the same names and
// defaults, and `gpemu predict` the model options among them, so a BERT or
// AMP configuration that can be predicted can also be trained.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/job.h"

namespace gpemu::cli {

// The model and how it is trained (train, analyze, predict).
struct ModelArgs {
  std::string gpu = "v100";
  std::string model = std::string(kDefaultModel);
  std::int64_t seq_len = 0;
  std::string precision = "fp32", optimizer = "sgd", zero_grad;  // zero_grad "": the --torch preset's
  std::string profiles;
  std::string torch = "2";         // --torch: the PyTorch major version whose defaults the program takes
  std::string host;                // --host: a host profile's name or file ("": the --torch preset's)
  std::string task;                // --task: BERT's heads (task_model)
  std::string keep_output = "on";  // --keep-output: the loop holds the model's output to the step's end
  ProgramVariantNames variant;     // --matmul-precision, --amp, ... (cli/variant_flags.h)
};
// Registers --gpu ... --profiles, --task and the program-variant flags.
void add_model_options(CLI::App* cmd, ModelArgs& a);
// InputError naming the flag for unknown values. The model is task_model(model,
// task); the variant is to_variant(variant, precision), set with set_program_variant.
ModelSpec model_spec(const ModelArgs& a);
// Registers --keep-output (ModelArgs::keep_output).
void add_keep_output_option(CLI::App* cmd, std::string& keep_output);
// The layered cost model (measured profiles where they apply, then the
// analytical model) for this model spec; `note` hears why profiles were set
// aside when they were.
std::unique_ptr<CostModel> job_cost_model(const ModelArgs& a, std::vector<std::string>* notes = nullptr);
// `--profiles DIR` of a run (predict, train, share, analyze) asks for
// measured data: what the lenient reading of DIR skips (a table that cannot
// be read, a folder where a table should be, a malformed row) is printed as
// a warning naming the file, with what it means for the run. Quiet for "";
// a DIR that cannot be used at all is left to the run's own error.
void warn_skipped_profiles(const std::string& profiles);

// Everything train and analyze share.
struct JobArgs {
  ModelArgs model;
  int batch_size = 64;
  int global_batch_size = 0;  // --global-batch-size, split evenly over --gpus; 0: not given
  int gpemu_gpus = 1;         // --gpemu-gpus: GPEmu-compatible "N GPUs" (ComputeSpec::time_divisor)
  int gpus = 1;
  int nodes = 1;
  int gpus_per_node = 0;           // --gpus-per-node: sets gpus to nodes x this; 0: not given
  std::string network = "100gbe";  // preset or JSON file (interconnect/cluster.h)
  std::string clock = "real";
  std::string sync = "iteration";
  std::uint64_t seed = 0;
  double cv = -1;
  double warmup = 1.5;
  double bucket_cap_mb = 25;
  // Data.
  std::string data;
  std::string virtual_dataset;  // --virtual-dataset: sizes without files (pipeline.h)
  int workers = -1;             // -1: default
  int prefetch_factor = 2;
  bool pin_on = false, pin_off = false;  // --pin-memory / --no-pin-memory
  std::string host_memory;               // older spelling: pinned / pageable
  std::string pin_mode = "auto";
  std::string read_method = "pread";
  int superbatch = 1;  // batches whose reads a worker submits at once (io_uring)
  int cores = 0;
  double decode_us = -1;  // modelled loader's CPU costs per decoded JPEG; -1: the model's defaults
  double decode_ns_per_byte = -1;
  std::string loader_scaling;  // --loader-scaling: a measured loader-scaling CSV (modelled loader)
  std::string decode = "cpu";  // --decode: where JPEGs are decoded, cpu (the workers) or gpu (DALI-style)
  bool json = false;
};
void add_job_options(CLI::App* cmd, JobArgs& a);

// The JobSpec of these flags: compute, cluster, loader options (the data
// source and schedule are the command's). InputError naming the flag.
// --virtual-dataset's rules: it excludes --data and needs --clock virtual
// (InputError otherwise, saying what to give). Nothing when it is not given.
void check_virtual_dataset(const JobArgs& a);
// The line that labels a GPEmu-compatible run (--gpemu-gpus N > 1); empty otherwise.
std::string gpemu_compat_label(const JobArgs& a);
// The batch size per GPU: --batch-size, or --global-batch-size / --gpus
// (InputError when that does not divide evenly).
int per_gpu_batch_size(const JobArgs& a);
JobSpec job_spec(const JobArgs& a);
bool pin_memory(const JobArgs& a);
int workers(const JobArgs& a);

}  // namespace gpemu::cli
