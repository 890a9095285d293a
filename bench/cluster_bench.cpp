#include "cluster_bench.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "common/text_table.h"
#include "gpemu/cluster.h"

namespace gpemu {
namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

// The generator's mean GPU-hours per job: E[GPUs] x E[duration] (its laws,
// cluster.h): GPUs 1/2/4/8 at 0.7/0.1/0.15/0.05; duration 60 x 10^U(a, b) s,
// whose mean is 60 (10^b - 10^a) / ((b - a) ln 10).
double mean_gpu_hours_per_job() {
  const auto mean = [](double a, double b) {
    return 60 * (std::pow(10, b) - std::pow(10, a)) / ((b - a) * std::log(10.0));
  };
  const double gpus = 0.7 * 1 + 0.1 * 2 + 0.15 * 4 + 0.05 * 8;
  return gpus * (0.8 * mean(1.5, 3) + 0.2 * mean(3, 4)) / 3600;
}

}  // namespace

nlohmann::json run_cluster_bench(const ClusterBenchOptions& o) {
  nlohmann::json out = {{"benchmark", "cluster"}, {"policy", "las"}, {"cpu_allocation", "prop"}};
  auto& rows = out["sizes"] = nlohmann::json::array();
  for (const auto& [jobs, gpus] : o.sizes) {
    const auto cluster = cluster::parse_cluster(
        fmt::format(R"({{"nodes": [{{"gpu": "v100", "gpus": 8, "cpus": 24, "dram_gib": 500, "count": {}}}]}})",
                    gpus / 8),
        "bench cluster");
    cluster::TraceOptions t;
    t.jobs = jobs;
    t.seed = o.seed;
    t.jobs_per_hour = o.load_factor * gpus / mean_gpu_hours_per_job();
    const auto begin = std::chrono::steady_clock::now();
    const auto trace = cluster::generate_trace(t);
    cluster::JobSpeed speed(cluster.network);
    auto las = cluster::make_policy("las");
    const auto run = cluster::simulate(cluster, trace, *las, cluster::SimOptions{}, speed);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    rows.push_back({{"jobs", jobs},
                    {"gpus", gpus},
                    {"jobs_per_hour", t.jobs_per_hour},
                    {"wall_s", wall},
                    {"jobs_per_s", static_cast<double>(jobs) / wall},
                    {"peak_rss_mib", peak_rss_mib()},
                    {"rounds", run.rounds},
                    {"speed_configurations", run.speed_configurations},
                    {"mean_jct_h", run.mean_jct_s() / 3600},
                    {"makespan_h", run.makespan_s / 3600}});
  }
  return out;
}

void print_cluster_bench(const nlohmann::json& r, std::ostream& os) {
  os << "Cluster simulation cost: Philly-derived traces (Synergy's generator) under LAS, GPU-proportional cores,\n"
        "V100 nodes of 8 GPUs, offered load about 0.8 of the GPUs; one core, wall time includes the engine's\n"
        "job speeds\n\n";
  common::TextTable t({"jobs", "GPUs", "jobs/h", "wall s", "jobs/s", "peak RSS MiB", "rounds", "engine configs",
                       "mean JCT h", "makespan h"});
  for (const auto& s : r["sizes"])
    t.add_row(
        {std::to_string(s["jobs"].get<std::int64_t>()), std::to_string(s["gpus"].get<int>()),
         fmt::format("{:.1f}", s["jobs_per_hour"].get<double>()), fmt::format("{:.2f}", s["wall_s"].get<double>()),
         fmt::format("{:.0f}", s["jobs_per_s"].get<double>()), fmt::format("{:.0f}", s["peak_rss_mib"].get<double>()),
         std::to_string(s["rounds"].get<std::int64_t>()), std::to_string(s["speed_configurations"].get<std::size_t>()),
         fmt::format("{:.2f}", s["mean_jct_h"].get<double>()), fmt::format("{:.1f}", s["makespan_h"].get<double>())});
  t.print(os);
}

}  // namespace gpemu
