// `gpemu analyze`: the DataStall differential analysis (train/analyze.h) of a
// `gpemu train` configuration: gpu-bound, cached and cold epochs, and the
// prep and fetch stall shares they imply. docs/analyze.md.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/job_args.h"
#include "cli/option_checks.h"
#include "cli/options.h"
#include "cli/output.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/loader_choice.h"
#include "gpemu/pipeline.h"
#include "gpemu/train.h"

namespace gpemu::cli {
namespace {

struct AnalyzeArgs {
  JobArgs job;  // the options `gpemu train` has, with the same names and defaults
  double storage_latency_us = 100;
  double storage_mb_per_s = 530;
};

// What the analysis ran on, for its outputs.
struct AnalyzedData {
  std::string name;  // the folder, or the virtual dataset's name
  bool virtual_data = false;
  bool modelled = false;  // the modelled loader (the clock's choice: loader_choice.h)
  pipeline::ReadMethod read_method{};
};

nlohmann::json analysis_json(const AnalyzeArgs& args, const train::DataStallOptions& o, const train::DataStallResult& r,
                             const AnalyzedData& d) {
  auto pass = [](const train::DataStallPass& p) {
    return nlohmann::json{{"epoch_s", to_seconds(p.epoch)},
                          {"samples", p.samples},
                          {"samples_per_s", p.samples_per_s},
                          {"source", p.source}};
  };
  nlohmann::json j = {
      {"model", r.model},
      {"gpu", r.gpu},
      {"gpus", r.gpus},
      {"nodes", o.job.cluster.nodes},
      {"network", o.job.cluster.nodes > 1 ? nlohmann::json(o.job.cluster.network.name) : nlohmann::json()},
      {"batch_size", r.batch_size},
      {"gpemu_gpus", args.job.gpemu_gpus},
      {"clock", r.clock},
      {"loader", d.modelled ? "modelled" : "real"},
      {"workers", r.workers},
      {"read_method", pipeline::to_string(d.read_method)},
      {"data", d.name},
      {"virtual_dataset", d.virtual_data},
      {"dataset_images", o.dataset.size()},
      {"gpu_bound_s", to_seconds(r.gpu_bound.epoch)},
      {"prep_bound_s", to_seconds(r.cached.epoch)},
      {"cold_s", to_seconds(r.cold.epoch)},
      {"prep_stall_pct", r.prep_stall_pct},
      {"fetch_stall_pct", r.fetch_stall_pct},
      {"passes", {{"gpu_bound", pass(r.gpu_bound)}, {"cached", pass(r.cached)}, {"cold", pass(r.cold)}}}};
  if (d.modelled) {
    j["cores"] = r.cores;
    j["storage"] = {{"latency_us", args.storage_latency_us}, {"mb_per_s", args.storage_mb_per_s}};
  }
  return j;
}

void print_analysis(const AnalyzeArgs& args, const train::DataStallOptions& o, const train::DataStallResult& r,
                    const AnalyzedData& d) {
  std::cout << fmt::format(
      "DataStall analysis: {} on {} emulated {} ({} clock, {} loader), batch size {}, {} worker{} per GPU\n", r.model,
      r.gpus, r.gpu, r.clock, d.modelled ? "modelled" : "real", r.batch_size, r.workers, r.workers == 1 ? "" : "s");
  if (const std::string label = gpemu_compat_label(args.job); !label.empty()) std::cout << label << '\n';
  std::cout << fmt::format("data: {}{} ({} images); measured: the second of two epochs per pass\n\n", d.name,
                           d.virtual_data ? ", sizes without files" : "", o.dataset.size());
  Table t({"pass", "what it measures", "epoch s", "samples/s"});
  t.add({"gpu-bound", "in-memory batches (T_gpu)", fixed(to_seconds(r.gpu_bound.epoch), 3),
         fixed(r.gpu_bound.samples_per_s, 1)});
  t.add(
      {"cached", "no storage fetch (T_prep)", fixed(to_seconds(r.cached.epoch), 3), fixed(r.cached.samples_per_s, 1)});
  t.add({"cold", "fetch + prep (T_cold)", fixed(to_seconds(r.cold.epoch), 3), fixed(r.cold.samples_per_s, 1)});
  t.print(std::cout);
  std::cout << '\n';
  print_summary(std::cout, {{"prep stall", fmt::format("{} % of the cold epoch ((T_prep - T_gpu) / T_cold)",
                                                       fixed(r.prep_stall_pct, 1))},
                            {"fetch stall", fmt::format("{} % of the cold epoch ((T_cold - T_prep) / T_cold)",
                                                        fixed(r.fetch_stall_pct, 1))}});
  if (d.modelled)
    std::cout << fmt::format("model: {} cores shared by the loaders; cold reads {} us per file + {} MB/s storage\n",
                             r.cores, args.storage_latency_us, args.storage_mb_per_s);
}

void analyze(const AnalyzeArgs& args) {
  const JobArgs& a = args.job;
  if (!(args.storage_latency_us >= 0) || !(args.storage_mb_per_s > 0) || !std::isfinite(args.storage_latency_us) ||
      !std::isfinite(args.storage_mb_per_s))
    throw InputError("--storage-latency-us must be 0 or more and --storage-mb-per-s positive (finite numbers)");

  check_virtual_dataset(a);
  train::DataStallOptions o;
  o.job = job_spec(a);
  o.clock = parse_clock_kind(a.clock);
  AnalyzedData d;
  d.read_method = o.job.data.loader.read_method;
  d.virtual_data = !a.virtual_dataset.empty();
  d.modelled = dataset_source(o.clock) == DataSource::Modelled;
  const std::filesystem::path data_dir = d.virtual_data ? std::filesystem::path() : training_data_dir(a.data, a.json);
  o.dataset =
      d.virtual_data ? pipeline::virtual_dataset(a.virtual_dataset, a.seed) : pipeline::open_dataset_folder(data_dir);
  d.name = d.virtual_data ? o.dataset.root : data_dir.string();
  o.loader = o.job.data.loader;
  o.loader.group_size = o.dataset.group_size;
  o.model = o.job.data.model;  // --cores, --decode-us, --decode-ns-per-byte
  pipeline::use_ffcv_loader(o.dataset, static_cast<std::size_t>(o.job.batch_size), o.loader,
                            d.modelled ? &o.model : nullptr);  // an FFCV-style file
  d.read_method = o.loader.read_method;
  o.storage.read_per_sample = static_cast<Duration>(args.storage_latency_us * 1000.0);
  o.storage.bytes_per_s = args.storage_mb_per_s * 1e6;

  auto costs = job_cost_model(a.model);
  const train::DataStallResult r = train::analyze_data_stalls(*costs, o);
  if (a.json)
    std::cout << analysis_json(args, o, r, d).dump(2) << '\n';
  else
    print_analysis(args, o, r, d);
}

}  // namespace

void add_analyze_command(CLI::App& app) {
  auto a = std::make_shared<AnalyzeArgs>();
  auto* cmd = app.add_subcommand(
      "analyze",
      "DataStall differential analysis of a training configuration: gpu-bound, cached and cold epochs, "
      "prep and fetch stall shares (docs/analyze.md)");
  add_job_options(cmd, a->job);
  cmd->add_option("--storage-latency-us", a->storage_latency_us, "Modelled cold reads: latency per file, us")
      ->capture_default_str()
      ->check(finite_number_in(0, kMaxInputSeconds * 1e6));
  cmd->add_option("--storage-mb-per-s", a->storage_mb_per_s, "Modelled cold reads: storage bandwidth, MB/s")
      ->capture_default_str()
      ->check(finite_number_in(1e-6, 1e9));
  cmd->callback([a] { analyze(*a); });
}

}  // namespace gpemu::cli
