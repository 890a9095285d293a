#include "cli/job_args.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "cli/option_checks.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/variant_flags.h"
#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/pipeline/loader_scaling.h"
#include "gpemu/zoo.h"
#include "zoo/seq_len.h"

namespace gpemu::cli {

void add_model_options(CLI::App* cmd, ModelArgs& a) {
  cmd->add_option("--gpu", a.gpu, "GPU to emulate (see 'gpemu devices')")->capture_default_str();
  cmd->add_option("--model", a.model, "Model name (see 'gpemu models')")->capture_default_str();
  cmd->add_option("--seq-len", a.seq_len, "Sequence length for sequence models (default: the model's)")
      ->check(whole_number_in(1, zoo::kMaxSeqLen));
  cmd->add_option("--precision", a.precision, "fp32, amp (autocast FP16) or bf16 (autocast BF16)")
      ->capture_default_str();
  cmd->add_option("--optimizer", a.optimizer, "sgd (with momentum) or adam")->capture_default_str();
  cmd->add_option("--zero-grad", a.zero_grad,
                  "zero: zero_grad() keeps the grads (PyTorch < 2.0 default); none: set_to_none=True (default with "
                  "--torch 2)");
  cmd->add_option("--profiles", a.profiles, "Directory of measured profiles (GPEmu or gpemu layout)");
  add_task_option(cmd, a.task);
  add_keep_output_option(cmd, a.keep_output);
  add_variant_flags(cmd, a.variant);
  add_torch_options(cmd, a.torch, a.host);
}

void add_keep_output_option(CLI::App* cmd, std::string& keep_output) {
  cmd->add_option("--keep-output", keep_output,
                  "on: the training loop holds the model's output until the step ends (output = model(x); loss = "
                  "criterion(output, y), as imagenet's main.py); off: only the loss is kept "
                  "(F.cross_entropy(model(x), y), Hugging Face's model(...).loss): peak memory")
      ->capture_default_str();
}

ModelSpec model_spec(const ModelArgs& a) {
  ModelSpec m;
  m.precision = zoo::parse_precision(a.precision);
  const TorchPreset preset = torch_preset(a.torch, "--torch");
  m.name = task_model(a.model, a.task);
  apply_torch_preset(m, preset, a.variant);
  m.optimizer = zoo::parse_optimizer(a.optimizer);
  apply_zero_grad(m, a.zero_grad);
  if (a.keep_output == "on" || a.keep_output == "off")
    m.keep_output = a.keep_output == "on";
  else
    throw InputError(
        fmt::format("unknown --keep-output '{}': expected on (the loop holds the model's output to the "
                    "step's end) or off (only the loss is kept)",
                    a.keep_output));
  if (!a.host.empty()) m.host = find_host(a.host, "--host");
  if (a.seq_len < 0)
    throw InputError(
        fmt::format("--seq-len {} is impossible: it must be at least 1 (0: the model's default)", a.seq_len));
  zoo::check_seq_len_applies(a.model, a.seq_len);  // train took it silently (S12)
  m.seq_len = a.seq_len;
  return m;
}

void warn_skipped_profiles(const std::string& profiles) {
  if (profiles.empty()) return;
  std::vector<std::string> skipped;
  try {
    skipped = ProfileDatabase::load(profiles).warnings();
  } catch (const InputError&) {
    return;  // the run loads it again and says why
  }
  if (skipped.empty()) return;
  skipped.push_back(fmt::format(
      "--profiles {}: {} {} above left out; where {} the measurement, the run estimates or interpolates instead "
      "(its source: line says which)",
      profiles, skipped.size(), skipped.size() == 1 ? "table or row" : "tables or rows",
      skipped.size() == 1 ? "it was" : "they were"));
  print_warnings(skipped);
}

std::unique_ptr<CostModel> job_cost_model(const ModelArgs& a, std::vector<std::string>* notes) {
  warn_skipped_profiles(a.profiles);
  return gpemu::job_cost_model(model_spec(a),
                               a.profiles.empty() ? std::nullopt : std::optional<std::filesystem::path>(a.profiles),
                               notes);
}

namespace {

// The job's GPUs and batch: --gpus, --nodes, --network, --gpus-per-node, the batch sizes, --gpemu-gpus.
void add_cluster_options(CLI::App* cmd, JobArgs& a) {
  cmd->add_option("--gpus", a.gpus,
                  "GPUs of that type in all (data-parallel, DDP all-reduce), at most 8 per node (see --nodes)")
      ->capture_default_str()
      ->check(whole_number_in(1, 1 << 20));
  cmd->add_option("--nodes", a.nodes, "Nodes the GPUs are spread over evenly, joined by --network")
      ->capture_default_str()
      ->check(whole_number_in(1, 1 << 20));
  cmd->add_option("--network", a.network, "NIC and switch between nodes: 10gbe, 25gbe, 100gbe, 400gbe or a JSON file")
      ->capture_default_str();
  // Runs after --gpus and --nodes have their values (CLI11 calls option
  // callbacks in the order the options were added, once parsing is done).
  CLI::Option* gpus = cmd->get_option("--gpus");
  cmd->add_option_function<int>(
         "--gpus-per-node",
         [&a, gpus](int per_node) {
           a.gpus_per_node = per_node;
           const long long all = static_cast<long long>(a.nodes) * per_node;
           if (gpus->count() > 0 && all != a.gpus)
             throw InputError(
                 fmt::format("--gpus {} disagrees with --nodes {} x --gpus-per-node {} = {}: give "
                             "one or the other",
                             a.gpus, a.nodes, per_node, all));
           if (all > (1 << 20))
             throw InputError(fmt::format("--nodes {} x --gpus-per-node {} = {} GPUs: accepted at most {}", a.nodes,
                                          per_node, all, 1 << 20));
           a.gpus = static_cast<int>(all);
         },
         "GPUs in each node (sets --gpus to --nodes x this); with --gpemu-gpus, 1 (one GPEmu process per node)")
      ->check(whole_number_in(1, kMaxGpusPerNode));
  CLI::Option* per_gpu = cmd->add_option("--batch-size,-b", a.batch_size, "Batch size per GPU")
                             ->capture_default_str()
                             ->check(whole_number_in(1, std::numeric_limits<int>::max()));
  cmd->add_option("--global-batch-size", a.global_batch_size,
                  "Batch size over all GPUs, split evenly over --gpus (instead of --batch-size)")
      ->check(whole_number_in(1, std::numeric_limits<int>::max()))
      ->excludes(per_gpu);
  cmd->add_option("--gpemu-gpus", a.gpemu_gpus,
                  "GPEmu-compatible N GPUs, only to compare with GPEmu's own figures: one process whose batches' H2D "
                  "copy and compute take 1/N of their time, no all-reduce, no GPU memory emulation")
      ->check(whole_number_in(1, 1'000'000));
}

// Its data and loader: the dataset, workers, pinned memory, reads, the modelled loader's costs, decoding.
void add_loader_options(CLI::App* cmd, JobArgs& a) {
  cmd->add_option("--data", a.data, "ImageFolder dataset to train on (default: the cached synthetic dataset)");
  cmd->add_option("--virtual-dataset", a.virtual_dataset,
                  "Sizes without files, for --clock virtual at full scale: imagenet1k, imagenette10g, imagenette or "
                  "sizes=FILE (one size in bytes per line)");
  cmd->add_option("--workers", a.workers, "Loader worker threads per GPU (default: cores / GPUs, 1 to 8)")
      ->check(whole_number_in(0, 1024));
  cmd->add_option("--prefetch-factor", a.prefetch_factor, "Batches in flight per worker")->capture_default_str();
  auto* pin_on =
      cmd->add_flag("--pin-memory", a.pin_on, "Collate batches into pinned (page-locked) staging buffers (default)");
  cmd->add_flag("--no-pin-memory", a.pin_off, "Collate batches into pageable memory")->excludes(pin_on);
  cmd->add_option("--host-memory", a.host_memory, "Same as --pin-memory (pinned) / --no-pin-memory (pageable)");
  cmd->add_option(
         "--pin-mode", a.pin_mode,
         "Pinned buffers: 'lock' (mlock), 'account' (count, do not lock), 'auto' (lock when RLIMIT_MEMLOCK allows)")
      ->capture_default_str();
  cmd->add_option("--read-method", a.read_method,
                  "How loader workers read samples: 'pread' (one at a time) or 'io_uring' (all of a batch's reads "
                  "at once; needs liburing and a kernel that allows io_uring)")
      ->capture_default_str();
  cmd->add_option("--superbatch", a.superbatch,
                  "A loader worker submits the reads of k of its batches at once (GPEmu's async loader; io_uring "
                  "reads in the real loader, queued together at the modelled storage)")
      ->capture_default_str()
      ->check(whole_number_in(1, 4096));
  cmd->add_option("--cores", a.cores,
                  "Modelled loader (virtual clock): CPU cores the loaders share (default: this machine's)");
  cmd->add_option("--decode-us", a.decode_us,
                  "Modelled loader: CPU microseconds to decode and transform one JPEG, fixed part (default 800)")
      ->check(finite_number_in(0, 1e9));
  cmd->add_option("--decode", a.decode,
                  "Where JPEGs are decoded: 'cpu' (the loader workers) or 'gpu' (DALI's mixed pipeline: the workers "
                  "parse, the GPU's JPEG engine or SMs decode, crop, resize and normalise)");
  cmd->add_option("--decode-ns-per-byte", a.decode_ns_per_byte,
                  "Modelled loader: CPU nanoseconds of JPEG decoding per byte of the file (default 15)")
      ->check(finite_number_in(0, 1e9));
  cmd->add_option("--loader-scaling", a.loader_scaling,
                  "Modelled loader: a machine's measured loader scaling (CSV with columns workers, images_per_s), "
                  "whose per-worker efficiency divides each worker's CPU costs (default: linear scaling)");
}

}  // namespace

void add_job_options(CLI::App* cmd, JobArgs& a) {
  add_model_options(cmd, a.model);
  add_cluster_options(cmd, a);
  add_loader_options(cmd, a);
  cmd->add_option("--bucket-cap-mb", a.bucket_cap_mb, "DDP gradient bucket size, MiB")
      ->capture_default_str()
      ->check(finite_number_in(1.0 / 1024, 1024.0 * 1024));
  cmd->add_option("--clock", a.clock,
                  "real (wall time, real loader) or virtual (simulated, modelled loader, as fast as possible)")
      ->capture_default_str();
  cmd->add_option("--sync", a.sync,
                  "Host waits for the GPU every 'iteration' (loss.item()) or at the 'end' of each epoch")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "Seed of the shuffle, augmentations and per-iteration variation")
      ->capture_default_str()
      ->check(unsigned_number_up_to(std::numeric_limits<std::uint64_t>::max()));
  cmd->add_option("--cv", a.cv, "Coefficient of variation of iteration times (default: measured, else 0.01)")
      ->check(finite_number_in(0, 1));
  cmd->add_option("--warmup", a.warmup, "Factor applied to the first iteration's time")->capture_default_str();
  cmd->add_flag("--json", a.json, "Machine-readable output");
}

bool pin_memory(const JobArgs& a) {
  bool pin = true;
  if (!a.host_memory.empty()) pin = parse_host_memory(a.host_memory) == HostMemoryKind::Pinned;
  if (a.pin_on || a.pin_off) {
    if (!a.host_memory.empty() && a.pin_on != pin)
      throw InputError(
          fmt::format("--host-memory {} contradicts --{}pin-memory", a.host_memory, a.pin_on ? "" : "no-"));
    pin = a.pin_on;
  }
  return pin;
}

int workers(const JobArgs& a) { return default_workers(a.workers, a.gpus); }

void check_virtual_dataset(const JobArgs& a) {
  if (a.virtual_dataset.empty()) return;
  if (!a.data.empty()) throw InputError("--virtual-dataset excludes --data: give sizes without files, or a folder");
  if (parse_clock_kind(a.clock) != ClockKind::Virtual)
    throw InputError(
        fmt::format("--virtual-dataset {} has no files for the real loader to read: give --clock virtual "
                    "(the modelled loader), or a folder with --data",
                    a.virtual_dataset));
}

std::string gpemu_compat_label(const JobArgs& a) {
  if (a.gpemu_gpus <= 1) return {};
  return fmt::format(
      "GPEmu-compatible (--gpemu-gpus {0}): one process standing for {0} GPUs, each batch's H2D copy and compute take "
      "1/{0} of their time; no all-reduce, no GPU memory emulated",
      a.gpemu_gpus);
}

int per_gpu_batch_size(const JobArgs& a) {
  if (a.global_batch_size == 0) return a.batch_size;
  if (a.gpus < 1 || a.global_batch_size % a.gpus != 0)
    throw InputError(fmt::format(
        "--global-batch-size {} over --gpus {}: every GPU takes an equal share of the global batch (DDP with a "
        "DistributedSampler); give a multiple of {}, or --batch-size per GPU",
        a.global_batch_size, a.gpus, std::max(a.gpus, 1)));
  return a.global_batch_size / a.gpus;
}

JobSpec job_spec(const JobArgs& a) {
  JobSpec s;
  s.cluster.gpu = &find_gpu(a.model.gpu);
  s.cluster.gpus = a.gpus;
  if (a.gpus < 1) throw InputError(fmt::format("--gpus {} is impossible: it must be at least 1", a.gpus));
  if (a.nodes < 1) throw InputError(fmt::format("--nodes {} is impossible: it must be at least 1", a.nodes));
  s.cluster.nodes = a.nodes;
  s.cluster.network = parse_network(a.network);
  if (!(a.bucket_cap_mb > 0))
    throw InputError(fmt::format("--bucket-cap-mb {} is impossible: it must be positive", a.bucket_cap_mb));
  s.cluster.buckets.bucket_cap_bytes = static_cast<std::uint64_t>(a.bucket_cap_mb * 1024 * 1024);
  s.batch_size = per_gpu_batch_size(a);
  s.compute.model = model_spec(a.model);
  s.compute.sync = parse_sync_mode(a.sync);
  s.compute.variation.seed = a.seed;
  s.compute.variation.warmup_factor = a.warmup;
  s.compute.time_divisor = a.gpemu_gpus;
  // GPEmu's prototype replayed no GPU memory in these runs, and one GPU's
  // memory would hold the whole global batch: none is emulated.
  if (a.gpemu_gpus > 1) s.compute.use_allocator = false;
  // Nor any all-reduce: its "N GPUs" on several nodes are one process per node (GPEmu's distributed runs).
  if (a.gpemu_gpus > 1) s.compute.all_reduce = false;
  if (a.cv >= 0) s.compute.variation.cv = a.cv;
  if (a.prefetch_factor < 1)
    throw InputError(fmt::format("--prefetch-factor {} is impossible: it must be at least 1", a.prefetch_factor));
  if (a.workers < -1) throw InputError(fmt::format("--workers {} is impossible: use 0 or more", a.workers));
  if (a.cores < 0)
    throw InputError(fmt::format("--cores {} is impossible: it must be 0 (this machine) or more", a.cores));
  if (a.pin_mode != "auto" && a.pin_mode != "lock" && a.pin_mode != "account")
    throw InputError(fmt::format("unknown --pin-mode '{}': accepted 'auto', 'lock' or 'account'", a.pin_mode));
  const bool pin = pin_memory(a);
  s.data.pin_memory = pin;
  pipeline::LoaderOptions& lo = s.data.loader;
  lo.batch_size = static_cast<std::size_t>(s.batch_size);
  lo.num_workers = workers(a);
  lo.prefetch_factor = a.prefetch_factor;
  lo.pin_memory = pin;
  lo.pin_mode = a.pin_mode == "account" ? PinMode::AccountOnly : PinMode::Lock;
  lo.shuffle = true;
  lo.seed = a.seed;
  lo.world_size = a.gpus;
  lo.read_method = pipeline::parse_read_method(a.read_method);
  if (a.superbatch > 1) lo.read_method = pipeline::ReadMethod::IoUring;  // a superbatch is io_uring reads
  lo.superbatch = static_cast<std::size_t>(a.superbatch);
  s.data.model.cores = a.cores;
  if (a.decode_us >= 0)
    s.data.model.decode_per_sample = static_cast<Duration>(std::llround(a.decode_us * kMicrosecond));
  if (a.decode_ns_per_byte >= 0) s.data.model.decode_ns_per_byte = a.decode_ns_per_byte;
  if (!a.loader_scaling.empty())
    s.data.model.scaling =
        std::make_shared<const pipeline::LoaderScaling>(pipeline::read_loader_scaling(a.loader_scaling));
  if (a.decode != "cpu" && a.decode != "gpu")
    throw InputError(
        fmt::format("unknown --decode '{}': accepted 'cpu' (the loader workers) or 'gpu' (DALI-style)", a.decode));
  if (a.decode == "gpu") lo.gpu_decode = pipeline::gpu_decode_model(*s.cluster.gpu);
  validate(s);
  return s;
}

}  // namespace gpemu::cli
