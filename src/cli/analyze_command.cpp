// `gpemu analyze`: the DataStall differential analysis (train/analyze.h) of a
// `gpemu train` configuration: gpu-bound, cached and cold epochs, and the
// prep and fetch stall shares they imply. docs/analyze.md.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/interconnect/cluster.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/io.h"
#include "gpemu/train/analyze.h"
#include "gpemu/train/datasets.h"
#include "gpemu/workload.h"

namespace gpemu::cli {
namespace {

// The options `gpemu train` and `gpemu analyze` share (same names, same defaults).
struct AnalyzeArgs {
  std::string gpu = "v100";
  std::string model = std::string(kDefaultModel);
  int batch_size = 64;
  int gpus = 1;
  int nodes = 1;
  std::string network = "100gbe";
  std::string data;
  int workers = -1;
  int prefetch_factor = 2;
  bool pin_off = false;
  std::string read_method = "pread";
  int cores = 0;
  std::string clock = "real";
  std::string sync = "iteration";
  std::string profiles;
  std::uint64_t seed = 0;
  double cv = -1;
  double warmup = 1.5;
  double bucket_cap_mb = 25;
  double storage_latency_us = 100;
  double storage_mb_per_s = 530;
  bool json = false;
};

void analyze(const AnalyzeArgs& a) {
  const GpuSpec& spec = find_gpu(a.gpu);
  if (a.batch_size < 1) throw InputError(fmt::format("--batch-size {} is impossible: it must be at least 1", a.batch_size));
  if (a.gpus < 1) throw InputError(fmt::format("--gpus {} is impossible: it must be at least 1", a.gpus));
  if (a.prefetch_factor < 1)
    throw InputError(fmt::format("--prefetch-factor {} is impossible: it must be at least 1", a.prefetch_factor));
  if (a.workers < -1) throw InputError(fmt::format("--workers {} is impossible: use 0 or more", a.workers));
  if (a.cores < 0) throw InputError(fmt::format("--cores {} is impossible: it must be 0 (this machine) or more", a.cores));
  if (!(a.bucket_cap_mb > 0)) throw InputError(fmt::format("--bucket-cap-mb {} is impossible: it must be positive", a.bucket_cap_mb));
  if (!(a.storage_latency_us >= 0) || !(a.storage_mb_per_s > 0))
    throw InputError("--storage-latency-us must be 0 or more and --storage-mb-per-s positive");

  const pipeline::ReadMethod read_method = pipeline::parse_read_method(a.read_method);
  const std::filesystem::path data_dir = training_data_dir(a.data, a.json);

  train::DataStallOptions o;
  o.clock = a.clock;
  o.train.model = a.model;
  o.train.batch_size = a.batch_size;
  o.train.gpus = a.gpus;
  o.train.nodes = a.nodes;
  o.train.network = parse_network(a.network);
  o.train.sync = parse_sync_mode(a.sync);
  o.train.variation.seed = a.seed;
  o.train.variation.warmup_factor = a.warmup;
  if (a.cv >= 0) o.train.variation.cv = a.cv;
  o.train.buckets.bucket_cap_bytes = static_cast<std::uint64_t>(a.bucket_cap_mb * 1024 * 1024);
  o.dataset = pipeline::open_image_folder(data_dir);
  o.loader.batch_size = static_cast<std::size_t>(a.batch_size);
  o.loader.num_workers = default_workers(a.workers, a.gpus);
  o.loader.prefetch_factor = a.prefetch_factor;
  o.loader.pin_memory = !a.pin_off;
  o.loader.shuffle = true;
  o.loader.seed = a.seed;
  o.loader.read_method = read_method;
  o.model.cores = a.cores;
  o.storage.read_per_sample = static_cast<Duration>(a.storage_latency_us * 1000.0);
  o.storage.bytes_per_s = a.storage_mb_per_s * 1e6;

  auto costs = make_cost_model(a.profiles.empty() ? std::nullopt : std::optional<std::filesystem::path>(a.profiles));
  const train::DataStallResult r = train::analyze_data_stalls(spec, *costs, o);

  const bool modelled = a.clock == "virtual";
  if (a.json) {
    auto pass = [](const train::DataStallPass& p) {
      return nlohmann::json{{"epoch_s", to_seconds(p.epoch)}, {"samples", p.samples},
                            {"samples_per_s", p.samples_per_s}, {"source", p.source}};
    };
    nlohmann::json j = {{"model", r.model},
                        {"gpu", r.gpu},
                        {"gpus", r.gpus},
                        {"batch_size", r.batch_size},
                        {"clock", r.clock},
                        {"loader", modelled ? "modelled" : "real"},
                        {"workers", r.workers},
                        {"read_method", pipeline::to_string(read_method)},
                        {"data", data_dir.string()},
                        {"dataset_images", o.dataset.size()},
                        {"gpu_bound_s", to_seconds(r.gpu_bound.epoch)},
                        {"prep_bound_s", to_seconds(r.cached.epoch)},
                        {"cold_s", to_seconds(r.cold.epoch)},
                        {"prep_stall_pct", r.prep_stall_pct},
                        {"fetch_stall_pct", r.fetch_stall_pct},
                        {"passes", {{"gpu_bound", pass(r.gpu_bound)}, {"cached", pass(r.cached)}, {"cold", pass(r.cold)}}}};
    if (modelled) {
      j["cores"] = r.cores;
      j["storage"] = {{"latency_us", a.storage_latency_us}, {"mb_per_s", a.storage_mb_per_s}};
    }
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("DataStall analysis: {} on {} emulated {} ({} clock, {} loader), batch size {}, {} worker{} per GPU\n",
                           r.model, r.gpus, r.gpu, r.clock, modelled ? "modelled" : "real", r.batch_size, r.workers,
                           r.workers == 1 ? "" : "s");
  std::cout << fmt::format("data: {} ({} images); measured: the second of two epochs per pass\n\n", data_dir.string(),
                           o.dataset.size());
  Table t({"pass", "what it measures", "epoch s", "samples/s"});
  t.add({"gpu-bound", "in-memory batches (T_gpu)", fixed(to_seconds(r.gpu_bound.epoch), 3), fixed(r.gpu_bound.samples_per_s, 1)});
  t.add({"cached", "no storage fetch (T_prep)", fixed(to_seconds(r.cached.epoch), 3), fixed(r.cached.samples_per_s, 1)});
  t.add({"cold", "fetch + prep (T_cold)", fixed(to_seconds(r.cold.epoch), 3), fixed(r.cold.samples_per_s, 1)});
  t.print(std::cout);
  std::cout << '\n';
  print_summary(std::cout, {{"prep stall", fmt::format("{} % of the cold epoch ((T_prep - T_gpu) / T_cold)", fixed(r.prep_stall_pct, 1))},
                            {"fetch stall", fmt::format("{} % of the cold epoch ((T_cold - T_prep) / T_cold)", fixed(r.fetch_stall_pct, 1))}});
  if (modelled)
    std::cout << fmt::format("model: {} cores shared by the loaders; cold reads {} us per file + {} MB/s storage\n", r.cores,
                             a.storage_latency_us, a.storage_mb_per_s);
}

}  // namespace

void add_analyze_command(CLI::App& app) {
  auto a = std::make_shared<AnalyzeArgs>();
  auto* cmd = app.add_subcommand(
      "analyze",
      "DataStall differential analysis of a training configuration: gpu-bound, cached and cold epochs, "
      "prep and fetch stall shares (docs/analyze.md)");
  cmd->add_option("--gpu", a->gpu, "GPU to emulate (see 'gpemu devices')")->capture_default_str();
  cmd->add_option("--gpus", a->gpus, "GPUs of that type in all (data-parallel), at most 8 per node")->capture_default_str();
  cmd->add_option("--nodes", a->nodes, "Nodes the GPUs are spread over evenly, joined by --network")->capture_default_str();
  cmd->add_option("--network", a->network, "NIC and switch between nodes: 25gbe, 100gbe, 400gbe or a JSON file")
      ->capture_default_str();
  cmd->add_option("--model", a->model, "Model name")->capture_default_str();
  cmd->add_option("--batch-size,-b", a->batch_size, "Batch size per GPU")->capture_default_str();
  cmd->add_option("--data", a->data, "ImageFolder dataset (default: the cached synthetic dataset of 'gpemu train')");
  cmd->add_option("--workers", a->workers, "Loader worker threads per GPU (default: cores / GPUs, 1 to 8)");
  cmd->add_option("--prefetch-factor", a->prefetch_factor, "Batches in flight per worker")->capture_default_str();
  cmd->add_flag("--no-pin-memory", a->pin_off, "Collate batches into pageable memory");
  cmd->add_option("--read-method", a->read_method,
                  "Real loader: 'pread' (one sample at a time) or 'io_uring' (all of a batch's reads at once)")
      ->capture_default_str();
  cmd->add_option("--cores", a->cores, "Modelled loader (virtual clock): CPU cores the loaders share (default: this machine's)");
  cmd->add_option("--storage-latency-us", a->storage_latency_us, "Modelled cold reads: latency per file, us")->capture_default_str();
  cmd->add_option("--storage-mb-per-s", a->storage_mb_per_s, "Modelled cold reads: storage bandwidth, MB/s")->capture_default_str();
  cmd->add_option("--clock", a->clock, "real (real loader, page-cache eviction) or virtual (modelled loader)")->capture_default_str();
  cmd->add_option("--sync", a->sync, "Host waits for the GPU every 'iteration' or at the 'end' of each epoch")->capture_default_str();
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)");
  cmd->add_option("--seed", a->seed, "Seed of the shuffle and per-iteration variation")->capture_default_str();
  cmd->add_option("--cv", a->cv, "Coefficient of variation of iteration times (default: measured, else 0.01)");
  cmd->add_option("--warmup", a->warmup, "Factor applied to the first iteration's time")->capture_default_str();
  cmd->add_option("--bucket-cap-mb", a->bucket_cap_mb, "DDP gradient bucket size, MiB")->capture_default_str();
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { analyze(*a); });
}

}  // namespace gpemu::cli
