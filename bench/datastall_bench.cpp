#include "datastall_bench.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/train.h"

namespace gpemu {
namespace {

// The paper's fetch stall, in percent of epoch time (Mohan et al., VLDB 2021;
// shared/reference/published/reproductions.md). Only the published figures.
const std::vector<std::pair<std::string, double>>& paper_fetch_stall() {
  static const std::vector<std::pair<std::string, double>> figures = {{"alexnet", 41},       {"resnet18", 35},
                                                                      {"shufflenet_v2", 20}, {"mobilenet_v2", 8},
                                                                      {"resnet50", 6},       {"vgg11", 2}};
  return figures;
}

const std::vector<std::string> kModels = {"alexnet", "resnet18", "mobilenet_v2", "resnet50", "vgg11"};

// ImageNet-like JPEG sizes without files: 55 KB to 165 KB, mean 110 KB,
// spread deterministically over the samples.
pipeline::Dataset imagenet_like(std::size_t n) {
  pipeline::Dataset d;
  d.root = "memory:imagenet-like";
  for (std::size_t i = 0; i < n; ++i) {
    pipeline::Sample s;
    s.path = "memory/" + std::to_string(i) + ".jpg";
    const double u = static_cast<double>((i * 2654435761ull) % 1000) / 1000.0;
    s.length = static_cast<std::uint64_t>(110000.0 * (0.5 + u));
    s.format = pipeline::SampleFormat::Jpeg;
    s.label = static_cast<std::int64_t>(i % 1000);
    d.samples.push_back(s);
  }
  return d;
}

std::vector<std::string> order_by(std::vector<std::pair<std::string, double>> v) {
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> names;
  for (const auto& [n, x] : v) names.push_back(n);
  return names;
}

}  // namespace

nlohmann::json run_datastall_bench(const DatastallBenchOptions& o) {
  if (o.cores < 0 || o.gpus < 1 || o.batch_size < 1 || o.batches < 1)
    throw InputError("datastall bench: cores must be 0 or more, GPUs, batch size and batches at least 1");
  const int cores = o.cores > 0 ? o.cores : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int workers = std::clamp(cores / o.gpus, 1, 8);  // as gpemu train's default
  const std::size_t images = static_cast<std::size_t>(o.gpus) * static_cast<std::size_t>(o.batch_size) * o.batches;
  const GpuSpec& spec = find_gpu(o.gpu);
  auto costs = make_cost_model(std::nullopt);

  train::DataStallOptions base;
  base.clock = ClockKind::Virtual;
  base.job.cluster.gpu = &spec;
  base.job.batch_size = o.batch_size;
  base.job.cluster.gpus = o.gpus;
  base.job.compute.variation.cv = 0;
  base.dataset = imagenet_like(images);
  base.loader.batch_size = static_cast<std::size_t>(o.batch_size);
  base.loader.num_workers = workers;
  base.loader.pin_memory = true;
  base.loader.shuffle = true;
  base.model.cores = cores;  // the per-image costs: LoaderModelOptions' documented defaults
  base.storage.read_per_sample = static_cast<Duration>(o.storage_latency_us * 1000.0);
  base.storage.bytes_per_s = o.storage_mb_per_s * 1e6;

  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::pair<std::string, double>> ours, theirs;
  for (const std::string& m : kModels) {
    train::DataStallOptions opt = base;
    opt.job.compute.model.name = m;
    const train::DataStallResult r = train::analyze_data_stalls(*costs, opt);
    double paper = 0;
    for (const auto& [name, x] : paper_fetch_stall())
      if (name == m) paper = x;
    rows.push_back({{"model", m},
                    {"gpu_bound_s", to_seconds(r.gpu_bound.epoch)},
                    {"prep_bound_s", to_seconds(r.cached.epoch)},
                    {"cold_s", to_seconds(r.cold.epoch)},
                    {"prep_stall_pct", r.prep_stall_pct},
                    {"fetch_stall_pct", r.fetch_stall_pct},
                    {"paper_fetch_stall_pct", paper}});
    ours.emplace_back(m, r.fetch_stall_pct);
    theirs.emplace_back(m, paper);
  }
  nlohmann::json paper_only = nlohmann::json::array();
  for (const auto& [name, x] : paper_fetch_stall())
    if (std::find(kModels.begin(), kModels.end(), name) == kModels.end())
      paper_only.push_back({{"model", name}, {"paper_fetch_stall_pct", x}});
  const auto order_ours = order_by(ours), order_paper = order_by(theirs);
  return {{"gpu", spec.id},
          {"gpus", o.gpus},
          {"cores", cores},
          {"workers", workers},
          {"batch_size", o.batch_size},
          {"images", images},
          {"storage", {{"latency_us", o.storage_latency_us}, {"mb_per_s", o.storage_mb_per_s}}},
          {"citation", "Mohan et al., Analyzing and Mitigating Data Stalls in DNN Training, VLDB 2021"},
          {"rows", rows},
          {"paper_only", paper_only},
          {"order_gpemu", order_ours},
          {"order_paper", order_paper},
          {"ordering_matches", order_ours == order_paper}};
}

void print_datastall_bench(const nlohmann::json& r, std::ostream& out) {
  out << "DataStall differential analysis: " << r["gpus"].get<int>() << "x " << r["gpu"].get<std::string>()
      << ", virtual clock, modelled loader, " << r["cores"].get<int>() << " cores, " << r["workers"].get<int>()
      << (r["workers"].get<int>() == 1 ? " worker" : " workers") << " per GPU, batch " << r["batch_size"].get<int>()
      << " per GPU, " << r["images"].get<std::size_t>() << " images of ~110 KB\n";
  out << "cold reads: " << bench::fixed(r["storage"]["latency_us"].get<double>(), 0) << " us per file, "
      << bench::fixed(r["storage"]["mb_per_s"].get<double>(), 0) << " MB/s storage\n\n";
  bench::Table t({"model", "T_gpu s", "T_prep s", "T_cold s", "prep stall %", "fetch stall %", "paper fetch stall %"});
  for (const auto& row : r["rows"])
    t.add_row({row["model"].get<std::string>(), bench::fixed(row["gpu_bound_s"].get<double>(), 3),
               bench::fixed(row["prep_bound_s"].get<double>(), 3), bench::fixed(row["cold_s"].get<double>(), 3),
               bench::fixed(row["prep_stall_pct"].get<double>(), 1),
               bench::fixed(row["fetch_stall_pct"].get<double>(), 1),
               bench::fixed(row["paper_fetch_stall_pct"].get<double>(), 0)});
  t.print(out);
  for (const auto& p : r["paper_only"])
    out << "paper only (not run): " << p["model"].get<std::string>() << " "
        << bench::fixed(p["paper_fetch_stall_pct"].get<double>(), 0) << " %\n";
  auto join = [](const nlohmann::json& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : " > ") + n.get<std::string>();
    return s;
  };
  out << "order by fetch stall, gpemu: " << join(r["order_gpemu"]) << '\n';
  out << "order by fetch stall, paper: " << join(r["order_paper"]) << '\n';
  out << "ordering matches the paper: " << (r["ordering_matches"].get<bool>() ? "yes" : "no") << '\n';
  out << "paper: " << r["citation"].get<std::string>() << '\n';
}

}  // namespace gpemu
