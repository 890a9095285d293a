// `gpemu cluster`: a trace of training jobs on a cluster of emulated GPUs
// under a scheduling policy, in virtual time (cluster.h, docs/cluster.md);
// `gpemu cluster trace`: a Philly-derived trace. Parses, runs, prints.
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "cluster/run_json.h"
#include "common/atomic_file.h"
#include "common/message_text.h"
#include "common/output_path.h"
#include "gpemu/cluster.h"
#include "gpemu/error.h"

namespace gpemu::cli {
namespace {

struct ClusterArgs {
  std::string cluster, trace, policy = "las", cpu = "prop", clock = "virtual", fidelity = "speed";
  std::string pack_sharing = "timeslice", interference = "gpu";
  double round_s = 300;
  std::vector<double> las_queues = {3600};
  double starvation = 0;
  double allox_alpha = 0.5;
  bool no_checkpoint_cost = false;
  std::string json, csv, report;
};

struct TraceArgs {
  std::int64_t jobs = 100;
  std::uint64_t seed = 0;
  double load = 5;
  int users = 1;
  bool static_arrivals = false;
  std::string dataset = "imagenet1k";
  std::string out;
};

void write_output(const std::string& path, const std::string& text, const std::string& what) {
  if (path == "-")
    std::cout << text;
  else
    write_file_atomically(path, text, what);
}

void run_cluster(const ClusterArgs& a) {
  if (a.cluster.empty() || a.trace.empty())
    throw InputError("gpemu cluster: give --cluster FILE and --trace FILE (or `gpemu cluster trace` to make a trace)");
  if (a.clock != "virtual")
    throw InputError(fmt::format("--clock '{}': a cluster runs in virtual time only; accepted: virtual", a.clock));
  if (!a.json.empty() && a.json != "-") check_output_path(a.json, "--json");
  if (!a.csv.empty() && a.csv != "-") check_output_path(a.csv, "--csv");
  if (!a.report.empty()) check_output_path(a.report, "--report");
  cluster::LasOptions las;
  las.queue_limits_gpu_s = a.las_queues;
  if (las.queue_limits_gpu_s.size() == 1 && las.queue_limits_gpu_s[0] == 0) las.queue_limits_gpu_s.clear();
  las.starvation_factor = a.starvation;
  cluster::AlloxOptions allox;
  allox.alpha = a.allox_alpha;
  auto policy = cluster::make_policy(a.policy, las, allox);
  cluster::SimOptions o;
  o.round_s = a.round_s;
  o.cpu = cluster::parse_cpu_allocation(a.cpu);
  o.fidelity = cluster::parse_fidelity(a.fidelity);
  o.checkpoint_cost = !a.no_checkpoint_cost;
  o.pack_sharing = a.pack_sharing;  // checked by simulate, which names the accepted ones
  if (a.interference != "gpu" && a.interference != "node")
    throw InputError(
        fmt::format("--interference '{}': unknown; accepted: gpu (jobs packed on one GPU slow each other), "
                    "node (and every node's jobs, through its shared cores and PCIe links)",
                    a.interference));
  o.node_interference = a.interference == "node";
  // The flags are checked above, before the files are read.
  const auto cluster = cluster::read_cluster_file(a.cluster);
  const auto trace = cluster::read_trace_file(a.trace, cluster);
  ProgressBar bar("cluster", static_cast<std::int64_t>(trace.jobs.size()));
  o.progress = [&bar](std::size_t done, std::size_t, double) { bar.update(static_cast<std::int64_t>(done)); };
  cluster::JobSpeed speed(cluster.network);
  const auto run = cluster::simulate(cluster, trace, *policy, o, speed);
  bar.finish();
  const nlohmann::json j = cluster::run_json(run);
  if (!a.json.empty()) write_output(a.json, j.dump(2) + "\n", "--json");
  if (!a.csv.empty()) write_output(a.csv, cluster::run_csv(run), "--csv");
  if (!a.report.empty()) write_html_report_file(cluster::cluster_report(run), a.report);
  if (!run.stopped.empty())
    throw Error(fmt::format("the run stopped at {} s: {} (the finished jobs' records are written)", run.stopped_at_s,
                            run.stopped));
  if (a.json == "-" || a.csv == "-") return;
  const auto& s = j["summary"];
  std::cout << fmt::format("{} jobs on {} GPUs ({} nodes) under {} with {} cores, rounds of {} s (virtual time)\n\n",
                           run.jobs.size(), run.total_gpus, cluster.total_nodes(), run.policy, run.cpu_allocation,
                           run.round_s);
  print_summary(std::cout, {{"finished", fmt::format("{} of {}", s["finished"].get<std::size_t>(), run.jobs.size())},
                            {"mean JCT", fmt::format("{} h", fixed(s["mean_jct_s"].get<double>() / 3600, 3))},
                            {"median JCT", fmt::format("{} h", fixed(s["median_jct_s"].get<double>() / 3600, 3))},
                            {"p90 JCT", fmt::format("{} h", fixed(s["p90_jct_s"].get<double>() / 3600, 3))},
                            {"mean wait", fmt::format("{} h", fixed(s["mean_wait_s"].get<double>() / 3600, 3))},
                            {"makespan", fmt::format("{} h", fixed(run.makespan_s / 3600, 3))},
                            {"rounds scheduled", std::to_string(run.rounds)},
                            {"engine configurations", std::to_string(run.speed_configurations)},
                            {"co-location configurations", std::to_string(run.colocations)}});
  if (o.fidelity == cluster::Fidelity::Iteration)
    std::cout << fmt::format("iterations stepped by the engine: {}\n", run.engine_steps);
  if (!a.json.empty()) std::cout << "json: " << a.json << '\n';
  if (!a.csv.empty()) std::cout << "csv: " << a.csv << '\n';
  if (!a.report.empty()) std::cout << "report: " << a.report << '\n';
}

void make_trace(const TraceArgs& a) {
  if (!a.out.empty() && a.out != "-") check_output_path(a.out, "--out");
  cluster::TraceOptions o;
  o.jobs = a.jobs;
  o.seed = a.seed;
  o.jobs_per_hour = a.load;
  o.users = a.users;
  o.static_arrivals = a.static_arrivals;
  o.dataset = a.dataset;
  const auto t = cluster::generate_trace(o);
  write_output(a.out.empty() ? "-" : a.out, cluster::trace_csv(t), "--out");
}

}  // namespace

void add_cluster_command(CLI::App& app) {
  auto a = std::make_shared<ClusterArgs>();
  auto* cmd = app.add_subcommand(
      "cluster", "A trace of training jobs on a cluster of emulated GPUs under a scheduling policy (docs/cluster.md)");
  cmd->add_option("--cluster", a->cluster, "Cluster file (JSON: nodes with GPU model, GPUs, cores, DRAM)");
  cmd->add_option("--trace", a->trace, "Trace file (CSV: one job a line)");
  cmd->add_option("--policy", a->policy,
                  "fifo, srtf, las (Tiresias' discretised 2D-LAS), drf-fifo (DRF between users, FIFO within one), "
                  "drf (DRF, shortest job on either configuration), allox (AlloX's min-cost matching to GPU or CPU), "
                  "es (AlloX's equal-share baseline), "
                  "max-min (Gavel's max-min fairness), max-min-perf (Gavel's heterogeneity-aware max-min), "
                  "timeslice (Gandiva's turns) or gandiva (turns, packing and migration)")
      ->capture_default_str();
  cmd->add_option("--cpu-allocation", a->cpu,
                  "prop (GPU-proportional cores), tune (Synergy-Tune) or greedy (Synergy-Greedy)")
      ->capture_default_str();
  cmd->add_option("--round", a->round_s, "Round length, s")->capture_default_str();
  cmd->add_option("--las-queues", a->las_queues, "LAS queue limits in GPU-seconds, increasing (0: continuous LAS)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--starvation", a->starvation, "LAS starvation factor (0: off)")->capture_default_str();
  cmd->add_option("--allox-alpha", a->allox_alpha,
                  "AlloX: the share of users (least fairness score) matched each round")
      ->capture_default_str();
  cmd->add_flag("--no-checkpoint-cost", a->no_checkpoint_cost, "Preemption and migration cost nothing");
  cmd->add_option("--pack-sharing", a->pack_sharing,
                  "How jobs packed on one GPU share it: timeslice, mps, priority or fifo (gpemu share's policies)")
      ->capture_default_str();
  cmd->add_option("--interference", a->interference,
                  "gpu (jobs packed on one GPU run at the engine's speed for the pair) or node (also every node's "
                  "jobs together: shared cores and PCIe links)")
      ->capture_default_str();
  cmd->add_option("--fidelity", a->fidelity,
                  "speed (each configuration's engine speed, memoised) or iteration (every iteration stepped "
                  "through the engine; small clusters)")
      ->capture_default_str();
  cmd->add_option("--clock", a->clock, "virtual (the only one a cluster runs on)")->capture_default_str();
  cmd->add_option("--json", a->json, "Write every figure as JSON to this file ('-': stdout)");
  cmd->add_option("--csv", a->csv, "Write one row per job to this file ('-': stdout)");
  cmd->add_option("--report", a->report, "Write an HTML report (utilisation over time, JCTs) to this file");

  auto t = std::make_shared<TraceArgs>();
  auto* tr = cmd->add_subcommand("trace", "A Philly-derived trace as Synergy's generator defines it (CSV)");
  tr->add_option("--jobs", t->jobs, "Jobs")->capture_default_str();
  tr->add_option("--seed", t->seed, "Seed")->capture_default_str();
  tr->add_option("--load", t->load, "Arrivals, jobs per hour (Poisson)")->capture_default_str();
  tr->add_option("--users", t->users, "Users the jobs are spread over")->capture_default_str();
  tr->add_flag("--static", t->static_arrivals, "Every job arrives at time 0");
  tr->add_option("--dataset", t->dataset, "Virtual dataset the image models read")->capture_default_str();
  tr->add_option("--out", t->out, "Write the trace here (default: stdout)");
  tr->callback([t] { make_trace(*t); });
  cmd->callback([a, tr] {
    if (tr->parsed()) return;
    run_cluster(*a);
  });
}

}  // namespace gpemu::cli
