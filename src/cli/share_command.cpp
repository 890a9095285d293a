// `gpemu share`: several training jobs on one emulated GPU under a sharing
// policy (share.h, docs/sharing.md). Parses, runs, prints.
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/job_args.h"
#include "cli/option_checks.h"
#include "cli/options.h"
#include "cli/output.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/share.h"
#include "gpemu/timeline.h"

namespace gpemu::cli {
namespace {

struct ShareArgs {
  std::string jobs;
  std::string policy = "fifo";
  std::string gpu;  // "": the jobs file's, else v100
  std::string clock = "real";
  std::string profiles;
  double timeslice_ms = 2, switch_us = 25, window_s = 1;
  std::string trace;
  bool json = false;
};

void share(const ShareArgs& a) {
  check_run_outputs(a.trace, "");
  const JobsFile file = load_jobs_file(a.jobs);
  ShareSpec spec;
  spec.gpu = &find_gpu(!a.gpu.empty() ? a.gpu : !file.gpu.empty() ? file.gpu : "v100");
  spec.options.policy = parse_share_policy(a.policy);
  spec.options.timeslice = from_seconds(a.timeslice_ms / 1e3);
  spec.options.switch_cost = from_seconds(a.switch_us / 1e6);
  spec.utilization_window = from_seconds(a.window_s);
  spec.trace = !a.trace.empty();
  spec.jobs = file.jobs;
  // One cost model per program variant the jobs use (precision, optimizer).
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const CostModel>> models;
  for (SharedJobSpec& j : spec.jobs) {
    ModelArgs m;
    m.gpu = spec.gpu->id;
    m.profiles = a.profiles;
    m.precision = std::string(zoo::to_string(j.job.compute.model.precision));
    m.optimizer = std::string(zoo::to_string(j.job.compute.model.optimizer));
    auto& c = models[{m.precision, m.optimizer}];
    if (!c) c = job_cost_model(m);
    j.costs = c;
  }
  const std::unique_ptr<Clock> clock = make_clock(parse_clock_kind(a.clock));
  const ShareResult r = run_shared(*clock, *models.begin()->second, spec);
  if (!a.trace.empty()) write_chrome_trace_file(r.trace, r.host_spans, r.trace_devices, a.trace);

  if (a.json) {
    nlohmann::json j = share_json(r);
    if (!a.trace.empty()) j["trace"] = a.trace;
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("{} jobs sharing one emulated {} under policy {} ({} clock)\n", r.jobs.size(), r.gpu,
                           to_string(r.policy), r.clock);
  if (r.policy == SharePolicy::TimeSlice)
    std::cout << fmt::format("time slices of {} ms, {} us per context switch\n", a.timeslice_ms, a.switch_us);
  std::cout << '\n';
  Table t({"job", "model", "batch", "arrival s", "end s", "JCT s", "iterations", "samples/s", "GPU share %",
           "peak alloc MiB", "peak reserved MiB", "ended"});
  for (const SharedJobResult& j : r.jobs) {
    std::string ended = j.error.empty() ? "finished" : "failed (below)";
    t.add({j.name, j.model.empty() ? "fixed step" : j.model, std::to_string(j.batch_size),
           fixed(to_seconds(j.arrival), 1), fixed(to_seconds(j.end), 2), fixed(j.jct_s, 2),
           std::to_string(j.iterations), fixed(j.samples_per_s, 1), fixed(j.gpu_share_pct, 1),
           fixed(mib(j.peak_allocated_bytes), 0), fixed(mib(j.peak_reserved_bytes), 0), ended});
  }
  t.print(std::cout);
  std::cout << '\n';
  std::vector<std::pair<std::string, std::string>> rows = {
      {"makespan", fmt::format("{} s", fixed(to_seconds(r.makespan), 2))},
      {"mean JCT", fmt::format("{} s (jobs that finished)", fixed(r.mean_jct_s, 2))},
      {"GPU utilisation", fmt::format("{} % of the makespan with a kernel running (per {} s window: --json)",
                                      fixed(r.mean_utilization_pct, 1), a.window_s)}};
  if (r.policy != SharePolicy::Mig)
    rows.push_back(
        {"GPU memory", fmt::format("peak {} MiB of {} MiB in use (contexts and segments of all jobs)",
                                   fixed(mib(r.peak_memory_used_bytes), 0), fixed(mib(r.memory_capacity_bytes), 0))});
  print_summary(std::cout, rows);
  for (const SharedJobResult& j : r.jobs)
    if (!j.error.empty()) std::cout << fmt::format("{}: {}\n", j.name, j.error);
  if (!a.trace.empty()) std::cout << "trace: " << a.trace << " (open in https://ui.perfetto.dev)\n";
}

}  // namespace

void add_share_command(CLI::App& app) {
  auto a = std::make_shared<ShareArgs>();
  auto* cmd =
      app.add_subcommand("share", "Several training jobs on one emulated GPU under a sharing policy (docs/sharing.md)");
  cmd->add_option("--jobs", a->jobs, "JSON file of the jobs (docs/sharing.md)")->required();
  cmd->add_option("--policy", a->policy, "fifo, timeslice, priority, mps or mig")->capture_default_str();
  cmd->add_option("--gpu", a->gpu, "GPU to emulate (default: the jobs file's, else v100)");
  cmd->add_option("--clock", a->clock, "real (jobs take wall time) or virtual (as fast as the CPU allows)")
      ->capture_default_str();
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)");
  cmd->add_option("--timeslice-ms", a->timeslice_ms, "Policy timeslice: the time slice, ms")
      ->capture_default_str()
      ->check(finite_number_in(0.001, 1000));
  cmd->add_option("--switch-us", a->switch_us, "Policy timeslice: one context switch, us")
      ->capture_default_str()
      ->check(finite_number_in(0, 1e6));
  cmd->add_option("--window-s", a->window_s, "Utilisation window, s")
      ->capture_default_str()
      ->check(finite_number_in(0.001, 1e6));
  cmd->add_option("--trace", a->trace, "Write a Perfetto/Chrome trace of the shared GPU to this file");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([a] { share(*a); });
}

}  // namespace gpemu::cli
