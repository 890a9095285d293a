#include "cli/dlio_train.h"

#include <algorithm>
#include <cctype>
#include <iostream>

#include <fmt/format.h>

#include "cli/job_args.h"
#include "cli/options.h"
#include "cli/output.h"
#include "dist/dlio_ranks.h"
#include "dist/launch_env.h"
#include "dlio/run_json.h"
#include "gpemu/catalog.h"
#include "gpemu/dlio.h"
#include "gpemu/dlio/runner.h"
#include "gpemu/error.h"
#include "gpemu/report.h"
#include "gpemu/timeline.h"
#include "gpemu/train.h"
#include "report/configuration_rows.h"

namespace gpemu::cli {

namespace {

// An override's value for a text: as it is when it is a plain name or path,
// else inside YAML's single quotes (a quote doubled), so that a file name with
// a space, a colon or a quote stays one text, and one named null is not null.
std::string yaml_text(const std::string& text) {
  const bool plain =
      !text.empty() && text != "null" && text != "Null" && text != "NULL" &&
      std::all_of(text.begin(), text.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '/' || c == '_' || c == '-';
      });
  if (plain) return text;
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The flags as the workload's overrides, checked with the file.
std::vector<std::string> dlio_overrides(const DlioTrainArgs& a, const std::optional<dist::LaunchEnv>& launch) {
  std::vector<std::string> overrides = a.overrides;
  if (a.seed) overrides.push_back(fmt::format("++workload.train.seed={}", *a.seed));
  // --gpus is the workload's gpemu.world_size, set before the file is
  // validated (a config whose tensor x pipeline parallelism needs 32 ranks
  // runs with --gpus 32).
  if (a.world_size) {
    if (*a.world_size < 1)
      throw InputError(fmt::format("--gpus {} is impossible: it must be at least 1", *a.world_size));
    overrides.push_back(fmt::format("++workload.gpemu.world_size={}", *a.world_size));
  }
  // --nodes and --network are the workload's gpemu.nodes and gpemu.network,
  // checked with the file (docs/dlio.md, "Several nodes (modelled)").
  if (a.nodes) overrides.push_back(fmt::format("++workload.gpemu.nodes={}", *a.nodes));
  if (a.network) overrides.push_back(fmt::format("++workload.gpemu.network={}", yaml_text(*a.network)));
  if (!launch) return overrides;
  if (a.nodes && *a.nodes > 1)
    throw InputError(
        fmt::format("--nodes {} under {} of {} processes: each process is one of DLIO's ranks, so the "
                    "nodes are the processes' machines; drop --nodes (modelled nodes are for one "
                    "process under --clock virtual)",
                    *a.nodes, launch->launcher, launch->world_size));
  if (a.world_size && *a.world_size != launch->world_size)
    throw InputError(
        fmt::format("--gpus {} under {} of {} processes: each process is one of DLIO's ranks, so the "
                    "launcher gives the world size; drop --gpus or give {}",
                    *a.world_size, launch->launcher, launch->world_size, launch->world_size));
  overrides.push_back(fmt::format("++workload.gpemu.world_size={}", launch->world_size));
  return overrides;
}

void write_dlio_report(const DlioTrainArgs& a, const std::vector<std::string>& overrides,
                       const dlio::DlioRunRecord& result) {
  const RunRecord& record = result.job;
  RunReport rep =
      train::make_run_report(record,
                             configuration_rows(nlohmann::json{{"workload", a.config}, {"overrides", overrides}}));
  rep.generator = "gpemu train --dlio-config";
  rep.title = fmt::format("DLIO workload {} on {}x {}{}", result.workload, record.gpus, record.gpu,
                          result.nodes > 1 ? fmt::format(" ({} nodes)", result.nodes) : std::string());
  if (result.train)
    rep.summary.insert(rep.summary.begin(),
                       SummaryRow{"accelerator utilization (AU)", fmt::format("{:.2f}%", result.train->au_pct)});
  write_html_report_file(rep, a.report);
}

}  // namespace

void run_dlio_train(const DlioTrainArgs& a) {
  check_run_outputs(a.trace, a.report);
  // Under mpirun or torchrun each process is one of DLIO's ranks, as under
  // DLIO's own launcher: -np gives the world size (docs/dlio.md, "Under mpirun").
  const std::optional<dist::LaunchEnv> launch = dist::read_launch_env();
  const std::vector<std::string> overrides = dlio_overrides(a, launch);
  const dlio::DlioWorkload w = dlio::parse_dlio_config(a.config, overrides);
  dlio::DlioRunOptions o;
  std::unique_ptr<dist::DlioRanks> ranks;
  if (launch) {
    ranks = std::make_unique<dist::DlioRanks>(*launch, a.dist_timeout);
    o.world_size = launch->world_size;
    o.ranks = {launch->rank};
    o.after_generation = [r = ranks.get()] { r->wait_for_data(); };
  }
  o.clock = a.clock;
  o.per_rank_epochs = a.json;  // the text output prints each epoch's figures, not each rank's
  if (!a.json) {
    // The text output prints each epoch's line as it ends and keeps none, so a
    // run of many epochs keeps no more than one of few.
    o.keep_epochs = false;
    o.on_epoch = [](const dlio::DlioEpoch& e) {
      dlio::print_dlio_epoch(e, std::cout);
      std::cout.flush();
    };
  }
  if (a.gpu) o.default_gpu = find_gpu(*a.gpu).id;
  if (!a.profiles.empty()) o.profiles_dir = a.profiles;
  warn_skipped_profiles(a.profiles);
  if (!a.trace.empty()) {
    o.trace = true;
    o.on_timeline = [&a](Timeline& t, const std::vector<TraceDeviceName>& names) {
      write_chrome_trace_file(t.trace_records(), t.host_spans(), names, a.trace);
    };
  }
  o.full_record = !a.report.empty();  // every step only for the report: a long run's record is large
  auto print = [&a](const dlio::DlioRunRecord& result) {
    if (a.json)
      std::cout << dlio::dlio_run_json(result).dump(2) << '\n';
    else
      dlio::print_dlio_result(result, std::cout);
  };
  // A run that stops early (a full disk at a checkpoint, ^C) still reports the
  // epochs it finished before the error ends the command.
  o.on_stopped = print;
  const dlio::DlioRunRecord result = dlio::run_dlio_workload(w, o);
  if (!a.report.empty()) write_dlio_report(a, overrides, result);
  print(result);
  if (launch && !a.json)
    std::cout << fmt::format("gpemu: these figures are rank {}'s of {} ({}: one process per rank)\n", launch->rank,
                             launch->world_size, launch->launcher);
  if (!a.trace.empty() && !a.json) std::cout << "trace: " << a.trace << " (open in https://ui.perfetto.dev)\n";
  if (!a.report.empty() && !a.json) std::cout << "report: " << a.report << '\n';
}

}  // namespace gpemu::cli
