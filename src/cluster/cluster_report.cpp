// The HTML report of a cluster run (cluster.h): its figures, the GPUs' and
// cores' utilisation over time, and each job's JCT sorted (the CDF on its side).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cluster/run_json.h"
#include "gpemu/cluster.h"
#include "gpemu/report.h"
#include "report/configuration_rows.h"

namespace gpemu::cluster {

RunReport cluster_report(const ClusterRun& run) {
  RunReport rep;
  rep.title = fmt::format("{} jobs on {} GPUs under {} ({} cores)", run.jobs.size(), run.total_gpus, run.policy,
                          run.cpu_allocation);
  nlohmann::json j = run_json(run);
  const auto& s = j["summary"];
  rep.summary = {{"policy", run.policy},
                 {"CPU allocation", run.cpu_allocation},
                 {"cluster", fmt::format("{} GPUs, {} cores", run.total_gpus, run.total_cpus)},
                 {"finished", fmt::format("{} of {}", s["finished"].get<std::size_t>(), run.jobs.size())},
                 {"mean JCT", fmt::format("{:.3f} h", s["mean_jct_s"].get<double>() / 3600)},
                 {"median JCT", fmt::format("{:.3f} h", s["median_jct_s"].get<double>() / 3600)},
                 {"p90 JCT", fmt::format("{:.3f} h", s["p90_jct_s"].get<double>() / 3600)},
                 {"mean wait", fmt::format("{:.3f} h", s["mean_wait_s"].get<double>() / 3600)},
                 {"makespan", fmt::format("{:.3f} h", run.makespan_s / 3600)}};
  UtilizationSeries gpus{"GPUs busy", {}, run.makespan_s};
  UtilizationSeries cpus{"cores held", {}, run.makespan_s};
  for (const UtilSample& u : run.utilisation) {
    gpus.samples.push_back({u.t_s, run.total_gpus ? static_cast<double>(u.busy_gpus) / run.total_gpus : 0});
    cpus.samples.push_back({u.t_s, run.total_cpus ? static_cast<double>(u.busy_cpus) / run.total_cpus : 0});
  }
  rep.utilization = {std::move(gpus), std::move(cpus)};
  BatchSeries jcts{"JCT of each job, shortest first (the JCT CDF on its side)", "h", {}, 1};
  for (const auto& [jct, fraction] : jct_cdf(run)) jcts.values.push_back(jct / 3600);
  rep.per_batch.push_back(std::move(jcts));
  j.erase("jobs");
  j.erase("jct_cdf");
  j.erase("utilisation");
  rep.configuration = configuration_rows(j);
  return rep;
}

}  // namespace gpemu::cluster
