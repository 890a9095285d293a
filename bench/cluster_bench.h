// Cluster benchmark (`gpemu bench cluster`): what simulating a cluster costs
// (cluster.h). For each size, a Philly-derived trace (Synergy's generator) of
// `jobs` jobs on a cluster of `gpus` V100s (8 per node, 24 cores each) under
// LAS, loaded to about `load_factor` of the GPUs: wall time, jobs per wall
// second, the engine configurations the run met, and the process's peak
// resident memory after the size (getrusage: it only grows, so each row is
// the peak so far). One core: the simulation is single-threaded.
#pragma once

#include <cstdint>
#include <ostream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpemu {

struct ClusterBenchOptions {
  // (jobs, GPUs)
  std::vector<std::pair<std::int64_t, int>> sizes = {{1000, 100}, {10000, 1000}, {100000, 10000}};
  double load_factor = 0.8;  // offered GPU-hours per hour over the GPUs
  std::uint64_t seed = 1;
  static ClusterBenchOptions quick() {
    ClusterBenchOptions o;
    o.sizes = {{1000, 100}, {10000, 1000}};
    return o;
  }
};

// {"benchmark": "cluster", "policy": "las", "sizes": [{"jobs", "gpus", "jobs_per_hour", "wall_s",
//   "jobs_per_s", "peak_rss_mib", "rounds", "speed_configurations", "mean_jct_h", "makespan_h"}]}
nlohmann::json run_cluster_bench(const ClusterBenchOptions& options = {});
void print_cluster_bench(const nlohmann::json& result, std::ostream& os);

}  // namespace gpemu
