// The figures of a cluster run (cluster.h): JCT CDF, JSON and CSV.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cluster/run_json.h"
#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

std::vector<double> sorted_jcts(const ClusterRun& run) {
  std::vector<double> v;
  for (const auto& j : run.jobs)
    if (j.finished()) v.push_back(j.jct_s());
  std::sort(v.begin(), v.end());
  return v;
}

// The first value whose CDF value (i / n) reaches q.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(i, 1, sorted.size()) - 1];
}

}  // namespace

double ClusterRun::mean_jct_s() const {
  double s = 0;
  std::size_t n = 0;
  for (const auto& j : jobs)
    if (j.finished()) s += j.jct_s(), ++n;
  return n ? s / static_cast<double>(n) : 0;
}

std::vector<std::pair<double, double>> jct_cdf(const ClusterRun& run) {
  const auto v = sorted_jcts(run);
  std::vector<std::pair<double, double>> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    out.emplace_back(v[i], static_cast<double>(i + 1) / static_cast<double>(v.size()));
  return out;
}

nlohmann::json run_json(const ClusterRun& run) {
  nlohmann::json j;
  j["policy"] = run.policy;
  j["cpu_allocation"] = run.cpu_allocation;
  j["round_s"] = run.round_s;
  j["gpus"] = run.total_gpus;
  j["cpus"] = run.total_cpus;
  j["rounds"] = run.rounds;
  j["speed_configurations"] = run.speed_configurations;
  j["colocation_configurations"] = run.colocations;
  j["fidelity"] = run.fidelity;
  if (run.fidelity == "iteration") j["engine_steps"] = run.engine_steps;
  if (!run.stopped.empty()) j["stopped"] = {{"at_s", run.stopped_at_s}, {"why", run.stopped}};
  const auto v = sorted_jcts(run);
  double wait = 0;
  for (const auto& r : run.jobs) wait += r.wait_s();
  j["summary"] = {{"jobs", run.jobs.size()},
                  {"finished", v.size()},
                  {"mean_jct_s", run.mean_jct_s()},
                  {"median_jct_s", quantile(v, 0.5)},
                  {"p90_jct_s", quantile(v, 0.9)},
                  {"p99_jct_s", quantile(v, 0.99)},
                  {"max_jct_s", v.empty() ? 0 : v.back()},
                  {"mean_wait_s", run.jobs.empty() ? 0 : wait / static_cast<double>(run.jobs.size())},
                  {"makespan_s", run.makespan_s}};
  auto& jobs = j["jobs"] = nlohmann::json::array();
  for (const auto& r : run.jobs)
    jobs.push_back({{"job", r.id},
                    {"user", r.user},
                    {"model", r.model},
                    {"gpus", r.gpus},
                    {"iterations", r.iterations},
                    {"arrival_s", r.arrival_s},
                    {"start_s", r.start_s},
                    {"finish_s", r.finish_s},
                    {"wait_s", r.wait_s()},
                    {"jct_s", r.jct_s()},
                    {"gpu_s", r.gpu_s},
                    {"cpu_s", r.cpu_s},
                    {"preemptions", r.preemptions},
                    {"migrations", r.migrations},
                    {"packed_s", r.packed_s},
                    {"device", r.on_cpu ? "cpu" : "gpu"}});
  auto& cdf = j["jct_cdf"] = nlohmann::json::array();
  for (const auto& [x, p] : jct_cdf(run)) cdf.push_back({x, p});
  auto& util = j["utilisation"] = nlohmann::json::array();
  for (const auto& u : run.utilisation)
    util.push_back({{"t_s", u.t_s},
                    {"busy_gpus", u.busy_gpus},
                    {"gpu_util", run.total_gpus ? static_cast<double>(u.busy_gpus) / run.total_gpus : 0},
                    {"busy_cpus", u.busy_cpus},
                    {"active_jobs", u.active_jobs}});
  return j;
}

std::string run_csv(const ClusterRun& run) {
  std::string out =
      "job,user,model,gpus,iterations,arrival_s,start_s,finish_s,wait_s,jct_s,gpu_s,cpu_s,preemptions,device,"
      "migrations,"
      "packed_s\n";
  for (const auto& r : run.jobs)
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.id, r.user, r.model, r.gpus, r.iterations,
                       r.arrival_s, r.start_s, r.finish_s, r.wait_s(), r.jct_s(), r.gpu_s, r.cpu_s, r.preemptions,
                       r.on_cpu ? "cpu" : "gpu", r.migrations, r.packed_s);
  return out;
}

}  // namespace gpemu::cluster
