#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <sys/resource.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/dlio_train.h"
#include "cli/options.h"
#include "cli/output.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/interconnect/cluster.h"
#include "gpemu/host_memory.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/io.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/pipeline/loader_cache.h"
#include "gpemu/profile.h"
#include "gpemu/report.h"
#include "gpemu/trace.h"
#include "gpemu/train.h"
#include "gpemu/workload.h"

namespace gpemu::cli {
namespace {

struct TrainArgs {
  std::string gpu = "v100";
  std::string model = std::string(kDefaultModel);
  int batch_size = 64;
  int iterations = -1;  // -1: not given
  std::string clock = "real";
  std::string host_memory;  // "", pinned or pageable (older spelling of --pin-memory)
  std::string sync = "iteration";
  std::string profiles;
  std::uint64_t seed = 0;
  double cv = -1;
  double warmup = 1.5;
  bool json = false;
  std::string trace;
  // Data pipeline and GPUs.
  int gpus = 1;
  int nodes = 1;
  std::string network = "100gbe";
  std::string data;
  bool synthetic = false;
  int epochs = 1;
  int workers = -1;  // -1: default
  int prefetch_factor = 2;
  bool pin_on = false, pin_off = false;  // --pin-memory / --no-pin-memory
  std::string pin_mode = "auto";
  std::string cache_bytes = "0";
  bool cold = false;
  std::string read_method = "pread";
  std::string report;
  // DLIO / MLPerf Storage workloads.
  std::string dlio_config;
  std::vector<std::string> dlio_overrides;
  bool gpu_given = false;
  int cores = 0;
  double bucket_cap_mb = 25;
};

constexpr int kDefaultSyntheticIterations = 300;

std::uint64_t parse_bytes(const std::string& text) {
  // 0, 123456, 512K, 256M, 4G (powers of 1024; an optional trailing B or iB).
  std::string s = text;
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }), s.end());
  auto bad = [&] {
    return InputError(fmt::format("--cache-bytes '{}' is not a size: give bytes, or a number with K, M or G", text));
  };
  if (s.empty()) throw bad();
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string unit = s.substr(pos);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB")) unit.resize(unit.size() - 2);
  else if (unit.ends_with("B")) unit.pop_back();
  double mult = 1;
  if (unit == "K") mult = 1024.0;
  else if (unit == "M") mult = 1024.0 * 1024;
  else if (unit == "G") mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) throw bad();
  if (!(v >= 0)) throw bad();
  return static_cast<std::uint64_t>(v * mult);
}

// Whether pinned staging buffers of this size can really be locked: within
// RLIMIT_MEMLOCK, or the process may lock beyond it (CAP_IPC_LOCK, e.g. root),
// which a lock of one page more than the limit shows.
bool can_lock(std::uint64_t bytes) {
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return false;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= bytes + pinned_host_bytes()) return true;
  try {
    HostBuffer probe(static_cast<std::size_t>(lim.rlim_cur) + 4096, HostMemoryKind::Pinned, PinMode::Lock);
    return true;
  } catch (const ResourceError&) {
    return false;
  }
}

void train(const TrainArgs& a) {
  if (!a.dlio_config.empty()) {
    run_dlio_train({.config = a.dlio_config,
                    .overrides = a.dlio_overrides,
                    .clock = a.clock,
                    .gpu = a.gpu_given ? std::optional<std::string>(a.gpu) : std::nullopt,
                    .profiles = a.profiles,
                    .trace = a.trace,
                    .json = a.json});
    return;
  }
  if (!a.dlio_overrides.empty())
    throw InputError(fmt::format("'{}' is an override of a DLIO workload: give the workload with --dlio-config FILE.yaml",
                                 a.dlio_overrides.front()));
  const GpuSpec& spec = find_gpu(a.gpu);
  if (a.batch_size < 1) throw InputError(fmt::format("--batch-size {} is impossible: it must be at least 1", a.batch_size));
  if (a.gpus < 1) throw InputError(fmt::format("--gpus {} is impossible: it must be at least 1", a.gpus));
  if (a.epochs < 1) throw InputError(fmt::format("--epochs {} is impossible: it must be at least 1", a.epochs));
  if (a.iterations < -1) throw InputError(fmt::format("--iterations {} is impossible: it must be 0 or more", a.iterations));
  auto clock = make_clock(a.clock);
  const SyncMode sync = parse_sync_mode(a.sync);
  if (!a.data.empty() && a.synthetic)
    throw InputError("--data and --synthetic exclude each other: train on a folder, or on in-memory batches");
  // Pinned or pageable staging: --pin-memory/--no-pin-memory, or the older --host-memory.
  bool pin = true;
  if (!a.host_memory.empty()) pin = parse_host_memory(a.host_memory) == HostMemoryKind::Pinned;
  if (a.pin_on || a.pin_off) {
    if (!a.host_memory.empty() && a.pin_on != pin)
      throw InputError(fmt::format("--host-memory {} contradicts --{}pin-memory", a.host_memory, a.pin_on ? "" : "no-"));
    pin = a.pin_on;
  }
  if (a.pin_mode != "auto" && a.pin_mode != "lock" && a.pin_mode != "account")
    throw InputError(fmt::format("unknown --pin-mode '{}': accepted 'auto', 'lock' or 'account'", a.pin_mode));
  if (a.prefetch_factor < 1)
    throw InputError(fmt::format("--prefetch-factor {} is impossible: it must be at least 1", a.prefetch_factor));
  if (a.workers < -1) throw InputError(fmt::format("--workers {} is impossible: use 0 or more", a.workers));
  if (a.cores < 0) throw InputError(fmt::format("--cores {} is impossible: it must be 0 (this machine) or more", a.cores));
  if (!(a.bucket_cap_mb > 0)) throw InputError(fmt::format("--bucket-cap-mb {} is impossible: it must be positive", a.bucket_cap_mb));
  const std::uint64_t cache_bytes = parse_bytes(a.cache_bytes);
  const pipeline::ReadMethod read_method = pipeline::parse_read_method(a.read_method);

  // What feeds the GPUs: a folder, in-memory batches, or the default dataset.
  // -n without --data keeps the workload-only runs of earlier versions.
  const bool synthetic = a.synthetic || (a.data.empty() && a.iterations >= 0);
  std::vector<std::string> notes;
  std::filesystem::path data_dir;
  if (!synthetic) {
    data_dir = training_data_dir(a.data, a.json, &notes);
  }

  auto costs = make_cost_model(a.profiles.empty() ? std::nullopt : std::optional<std::filesystem::path>(a.profiles));
  train::TrainOptions o;
  o.model = a.model;
  o.batch_size = a.batch_size;
  o.gpus = a.gpus;
  o.nodes = a.nodes;
  o.network = parse_network(a.network);
  o.epochs = a.epochs;
  o.sync = sync;
  o.variation.seed = a.seed;
  o.variation.warmup_factor = a.warmup;
  if (a.cv >= 0) o.variation.cv = a.cv;
  o.buckets.bucket_cap_bytes = static_cast<std::uint64_t>(a.bucket_cap_mb * 1024 * 1024);
  if (!synthetic && a.iterations >= 0) o.max_iterations = a.iterations;
  train::Trainer trainer(*clock, spec, *costs, o);
  if (!a.trace.empty()) trainer.timeline().enable_trace(true);

  const int workers = default_workers(a.workers, a.gpus);
  std::string loader_kind;
  std::string pin_mode_used = "n/a";
  std::vector<std::unique_ptr<train::BatchSource>> sources;
  std::size_t dataset_images = 0;
  std::uint64_t dataset_bytes = 0;
  if (synthetic) {
    loader_kind = "synthetic";
    const std::int64_t n = a.iterations >= 0 ? a.iterations : kDefaultSyntheticIterations;
    for (int g = 0; g < a.gpus; ++g)
      sources.push_back(std::make_unique<train::SyntheticSource>(*clock, n, a.batch_size,
                                                                 trainer.cost().input_bytes_per_sample,
                                                                 pin ? HostMemoryKind::Pinned : HostMemoryKind::Pageable));
  } else {
    pipeline::Dataset ds = pipeline::open_image_folder(data_dir);
    dataset_images = ds.size();
    dataset_bytes = ds.total_bytes();
    pipeline::LoaderOptions lo;
    lo.batch_size = static_cast<std::size_t>(a.batch_size);
    lo.num_workers = workers;
    lo.prefetch_factor = a.prefetch_factor;
    lo.pin_memory = pin;
    lo.shuffle = true;
    lo.seed = a.seed;
    lo.world_size = a.gpus;
    lo.read_method = read_method;
    if (cache_bytes > 0) lo.cache = std::make_shared<pipeline::LoaderCache>(cache_bytes);  // one per machine
    if (clock->is_virtual()) {
      loader_kind = "modelled";
      if (a.cold) notes.push_back("--cold has no effect on the modelled loader (it reads no files)");
      if (cache_bytes > 0) notes.push_back("--cache-bytes has no effect on the modelled loader");
      if (read_method != pipeline::ReadMethod::Pread)
        notes.push_back("--read-method has no effect on the modelled loader (it reads no files)");
      train::LoaderModelOptions m;
      m.cores = a.cores;
      m.loader_threads = a.gpus * std::max(1, workers);
      for (int g = 0; g < a.gpus; ++g) {
        pipeline::LoaderOptions r = lo;
        r.rank = g;
        r.cache.reset();
        sources.push_back(std::make_unique<train::ModelledLoader>(*clock, ds, r, m, &trainer.timeline()));
      }
    } else {
      loader_kind = "real";
      if (pin) {
        PinMode mode = a.pin_mode == "account" ? PinMode::AccountOnly : PinMode::Lock;
        if (a.pin_mode == "auto") {
          // What the staging pools may hold at once: prefetch * workers + 2
          // buffers per GPU, each a batch rounded up to 1 MiB.
          const std::uint64_t batch = static_cast<std::uint64_t>(a.batch_size) * 3 * 224 * 224 * 4;
          const std::uint64_t buffer = (batch + (1u << 20) - 1) / (1u << 20) * (1u << 20);
          const std::uint64_t need = static_cast<std::uint64_t>(a.gpus) *
                                     (static_cast<std::uint64_t>(a.prefetch_factor) * std::max(1, workers) + 2) * buffer;
          if (!can_lock(need)) {
            mode = PinMode::AccountOnly;
            notes.push_back(fmt::format(
                "pinned staging buffers are accounted, not locked: locking {} MiB exceeds RLIMIT_MEMLOCK (raise "
                "'ulimit -l', or pass --pin-mode account to silence this)",
                need >> 20));
          }
        }
        lo.pin_mode = mode;
        pin_mode_used = mode == PinMode::Lock ? "lock" : "account";
      }
      for (int g = 0; g < a.gpus; ++g) {
        pipeline::LoaderOptions r = lo;
        r.rank = g;
        train::PipelineSourceOptions so;
        so.rank = g;
        so.cold = a.cold;
        so.trace = &trainer.timeline();
        sources.push_back(std::make_unique<train::PipelineSource>(*clock, ds, r, so));
      }
    }
  }

  const auto wall_start = std::chrono::steady_clock::now();
  const std::int64_t planned = trainer.planned_iterations(sources);
  ProgressBar bar(fmt::format("training {} on {}x {}", canonical_model_name(a.model), a.gpus, spec.id), planned);
  train::TrainResult r = trainer.run(std::move(sources), [&](std::int64_t done, std::int64_t) { bar.update(done); });
  bar.finish();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();

  nlohmann::json config = {{"gpu", spec.id},
                           {"gpus", a.gpus},
                           {"nodes", a.nodes},
                           {"network", a.nodes > 1 ? nlohmann::json(o.network.name) : nlohmann::json()},
                           {"model", r.model},
                           {"batch_size", a.batch_size},
                           {"clock", a.clock},
                           {"sync", a.sync},
                           {"seed", a.seed},
                           {"epochs", a.epochs},
                           {"loader", loader_kind},
                           {"workers", workers},
                           {"prefetch_factor", a.prefetch_factor},
                           {"pin_memory", pin},
                           {"pin_mode", pin_mode_used},
                           {"cache_bytes", cache_bytes},
                           {"cold", a.cold},
                           {"read_method", pipeline::to_string(read_method)}};
  if (!data_dir.empty()) config["data"] = data_dir.string();

  if (!a.trace.empty()) {
    train::add_stall_spans(r, trainer.timeline());
    std::ofstream out(a.trace);
    if (!out) throw InputError(fmt::format("cannot write trace file '{}'", a.trace));
    write_chrome_trace(trainer.timeline().trace_records(), trainer.timeline().host_spans(), trainer.trace_devices(), out);
  }
  if (!a.report.empty()) {
    RunReport rep = train::make_run_report(r, config);
    for (const std::string& n : notes) rep.notes.push_back(n);
    write_html_report_file(rep, a.report);
  }

  if (a.json) {
    nlohmann::json j = train::summary_json(r);
    j["wall_s"] = wall_s;
    j["nodes"] = a.nodes;
    if (a.nodes > 1) j["network"] = o.network.name;
    j["loader"] = loader_kind;
    j["workers"] = workers;
    j["prefetch_factor"] = a.prefetch_factor;
    j["pin_memory"] = pin;
    j["pin_mode"] = pin_mode_used;
    if (!synthetic) j["read_method"] = pipeline::to_string(read_method);
    if (!data_dir.empty()) {
      j["data"] = data_dir.string();
      j["dataset_images"] = dataset_images;
    }
    if (!a.trace.empty()) j["trace"] = a.trace;
    if (!a.report.empty()) j["report"] = a.report;
    if (!notes.empty()) j["notes"] = notes;
    std::cout << j.dump(2) << '\n';
    return;
  }

  std::cout << fmt::format("trained {} on {} emulated {} ({} clock), batch size {}, {} epoch{}\n",
                           r.model, a.gpus == 1 ? std::string("an") : std::to_string(a.gpus), spec.id, a.clock,
                           a.batch_size, r.epochs.size(), r.epochs.size() == 1 ? "" : "s");
  if (!data_dir.empty())
    std::cout << fmt::format("data: {} ({} images, {:.1f} MB)\n", data_dir.string(), dataset_images,
                             static_cast<double>(dataset_bytes) / 1e6);
  std::cout << "batches: " << r.source << "\n\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const SummaryRow& row : train::summary_rows(r)) rows.emplace_back(row.key, row.value);
  rows.emplace_back("emulated time", fmt::format("{} s (wall {} s)", fixed(to_seconds(r.elapsed), 3), fixed(wall_s, 3)));
  const std::int64_t its = std::max<std::int64_t>(1, r.iterations * r.gpus);
  rows.emplace_back("forward mean", fmt::format("{} ms", fixed(r.iterations ? to_ms(r.forward_total) / its : 0, 3)));
  rows.emplace_back("backward mean", fmt::format("{} ms", fixed(r.iterations ? to_ms(r.backward_total) / its : 0, 3)));
  print_summary(std::cout, rows);
  if (r.gpus > 1) {
    std::cout << '\n';
    Table t({"GPU", "iterations", "samples", "util %", "stall %", "H2D %", "all-reduce %", "peak MiB"});
    for (const train::GpuResult& g : r.per_gpu) {
      auto share = [&](Duration d) { return fixed(r.elapsed > 0 ? 100.0 * to_seconds(d) / to_seconds(r.elapsed) : 0, 1); };
      t.add({std::to_string(g.gpu), std::to_string(g.iterations), std::to_string(g.samples), share(g.compute_busy),
             share(g.data_stall), share(g.h2d), share(g.all_reduce_wait), fixed(mib(g.peak_allocated_bytes), 1)});
    }
    t.print(std::cout);
    std::cout << "backward split: " << r.backward_split << '\n';
  }
  std::cout << "GPU costs: " << r.cost.note << '\n';
  for (const std::string& n : notes) std::cout << "note: " << n << '\n';
  if (!a.trace.empty()) std::cout << "trace: " << a.trace << " (open in https://ui.perfetto.dev)\n";
  if (!a.report.empty()) std::cout << "report: " << a.report << '\n';
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand(
      "train",
      "Train on emulated GPUs fed by a real data pipeline (with no arguments: one epoch of a synthetic "
      "ImageNet-like dataset, generated once in the cache folder, on one emulated V100)");
  auto* gpu_opt = cmd->add_option("--gpu", a->gpu, "GPU to emulate (see 'gpemu devices')")->capture_default_str();
  cmd->add_option("--gpus", a->gpus, "GPUs of that type in all (data-parallel, DDP all-reduce), at most 8 per node")
      ->capture_default_str();
  cmd->add_option("--nodes", a->nodes, "Nodes the GPUs are spread over evenly, joined by --network")->capture_default_str();
  cmd->add_option("--network", a->network, "NIC and switch between nodes: 25gbe, 100gbe, 400gbe or a JSON file")
      ->capture_default_str();
  cmd->add_option("--model", a->model, "Model name")->capture_default_str();
  cmd->add_option("--batch-size,-b", a->batch_size, "Batch size per GPU")->capture_default_str();
  cmd->add_option("--data", a->data, "ImageFolder dataset to train on (default: the cached synthetic dataset)");
  cmd->add_flag("--synthetic", a->synthetic, "No files: in-memory batches that are always ready");
  cmd->add_option("--iterations,-n", a->iterations,
                  "With --data: stop after this many iterations per GPU. Without --data: run this many iterations "
                  "of in-memory batches (as --synthetic; default 300)");
  cmd->add_option("--epochs", a->epochs, "Epochs")->capture_default_str();
  cmd->add_option("--workers", a->workers, "Loader worker threads per GPU (default: cores / GPUs, 1 to 8)");
  cmd->add_option("--prefetch-factor", a->prefetch_factor, "Batches in flight per worker")->capture_default_str();
  auto* pin_on = cmd->add_flag("--pin-memory", a->pin_on, "Collate batches into pinned (page-locked) staging buffers (default)");
  cmd->add_flag("--no-pin-memory", a->pin_off, "Collate batches into pageable memory")->excludes(pin_on);
  cmd->add_option("--pin-mode", a->pin_mode,
                  "Pinned buffers: 'lock' (mlock), 'account' (count, do not lock), 'auto' (lock when RLIMIT_MEMLOCK allows)")
      ->capture_default_str();
  cmd->add_option("--cache-bytes", a->cache_bytes, "Loader cache (MinIO policy) shared by the GPUs' loaders, e.g. 512M; 0: none")
      ->capture_default_str();
  cmd->add_flag("--cold", a->cold, "Evict the dataset's files from the page cache before each epoch");
  cmd->add_option("--read-method", a->read_method,
                  "How loader workers read samples: 'pread' (one at a time) or 'io_uring' (all of a batch's reads "
                  "at once; needs liburing and a kernel that allows io_uring)")
      ->capture_default_str();
  cmd->add_option("--cores", a->cores, "Modelled loader (virtual clock): CPU cores the loaders share (default: this machine's)");
  cmd->add_option("--bucket-cap-mb", a->bucket_cap_mb, "DDP gradient bucket size, MiB")->capture_default_str();
  cmd->add_option("--clock", a->clock,
                  "real (wall time, real loader) or virtual (simulated, modelled loader, as fast as possible)")
      ->capture_default_str();
  cmd->add_option("--host-memory", a->host_memory, "Same as --pin-memory (pinned) / --no-pin-memory (pageable)");
  cmd->add_option("--sync", a->sync, "Host waits for the GPU every 'iteration' (loss.item()) or at the 'end' of each epoch")
      ->capture_default_str();
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)");
  cmd->add_option("--seed", a->seed, "Seed of the shuffle, augmentations and per-iteration variation")->capture_default_str();
  cmd->add_option("--cv", a->cv, "Coefficient of variation of iteration times (default: measured, else 0.01)");
  cmd->add_option("--warmup", a->warmup, "Factor applied to the first iteration's time")->capture_default_str();
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->add_option("--trace", a->trace, "Write a Chrome/Perfetto trace (GPU tracks, loader workers, stalls) to this file");
  cmd->add_option("--report", a->report, "Write an HTML report with charts to this file");
  cmd->add_option("--dlio-config", a->dlio_config,
                  "Run a DLIO / MLPerf Storage workload (YAML) on emulated accelerators (docs/dlio.md)");
  cmd->add_option("overrides", a->dlio_overrides,
                  "DLIO overrides after --dlio-config: ++workload.<section>.<key>=<value>");
  cmd->callback([a, gpu_opt] {
    a->gpu_given = gpu_opt->count() > 0;
    train(*a);
  });
}

}  // namespace gpemu::cli
