// The torch runtime's outputs at exit: the summary on stderr, the --json
// summary, the Perfetto trace and the HTML report, each rank's part merged
// into the first process's; the trace's host spans and kernel details.
#include "torch/runtime.h"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "device/trace_args.h"
#include "gpemu/error.h"
#include "gpemu/report.h"
#include "report/configuration_rows.h"
#include "torch/settings.h"
#include "torch/summary.h"

namespace gpemu::torch_backend {

using detail::rank_label;

void Runtime::host_span(std::string name, double start_s, double end_s) {
  const Time start = from_seconds(start_s), end = from_seconds(end_s);
  if (!timeline_->tracing() || end <= start) return;
  timeline_->add_host_span(
      {std::move(name), "loader", settings_.main_process ? "host" : "host " + rank_label(), 0, start, end});
}

std::pair<std::vector<TraceRecord>, std::vector<std::string>> Runtime::trace_records() const {
  std::vector<TraceRecord> records = timeline_->trace_records();
  std::vector<std::string> args(records.size());
  // Each stream's kernels run in issue order: the n-th kernel record of a
  // stream (by start) is the n-th kernel issued to it.
  std::map<std::pair<int, std::int64_t>, std::vector<std::size_t>> by_stream;
  for (std::size_t i = 0; i < records.size(); ++i) {
    TraceRecord& r = records[i];
    if (r.stream >= 0) r.engine = -1;  // drawn once: on its stream's track
    if (r.category == "kernel") by_stream[{r.device, r.stream}].push_back(i);
  }
  std::lock_guard lock(mutex_);
  for (auto& [key, idx] : by_stream) {
    const auto d = kernel_details_.find(key);
    if (d == kernel_details_.end() || d->second.size() != idx.size()) continue;  // not every kernel known: none
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t a, std::size_t b) { return records[a].start < records[b].start; });
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const KernelDetail& kd = d->second[k];
      const char* phase = "forward";
      if (kd.section == static_cast<std::uint8_t>(OpProgram::Section::Backward)) phase = "backward";
      if (kd.section == static_cast<std::uint8_t>(OpProgram::Section::Optimizer)) phase = "optimizer";
      args[idx[k]] = fmt::format(R"({{"shapes":{},"bytes":{:.0f},"phase":"{}"}})",
                                 nlohmann::json(shapes_[kd.shapes]).dump(), kd.bytes, phase);
    }
  }
  return {std::move(records), std::move(args)};
}

nlohmann::json Runtime::part_object() {
  nlohmann::json part;
  TorchRunRecord s = record();
  s.process = rank_label();
  part["summary"] = to_json(s);
  const auto epoch = clock_->monotonic_epoch_ns();
  part["epoch_ns"] = epoch ? nlohmann::json(*epoch) : nlohmann::json(nullptr);
  nlohmann::json records = nlohmann::json::array();
  if (timeline_->tracing()) {
    const auto [traced, args] = trace_records();
    for (std::size_t i = 0; i < traced.size(); ++i) {
      const TraceRecord& r = traced[i];
      records.push_back({r.name, r.category, r.device, r.stream, r.engine, r.start, r.end, args[i]});
    }
  }
  part["records"] = std::move(records);
  nlohmann::json spans = nlohmann::json::array();
  if (timeline_->tracing())
    for (const HostSpan& h : timeline_->host_spans())
      spans.push_back({h.name, h.category, h.process, h.thread, h.start, h.end});
  part["spans"] = std::move(spans);
  return part;
}

void Runtime::print_summary(const TorchRunRecord& r) const {
  // The ranks a node is the launcher's (Settings), not a figure of the record.
  std::string out =
      fmt::format("gpemu torch: {}x {}, {} clock, host {}{}\n", r.run.gpus, gpu_->name, r.run.clock, r.host_profile,
                  r.run.nodes > 1 ? fmt::format(", ranks on {} nodes of {} joined by {}", r.run.nodes,
                                                settings_.node_ranks, r.run.network)
                                  : "");
  if (const std::optional<StepStats> st = step_stats(r.steps); r.steps.count > 0 && st)
    out += fmt::format("  step time    {:.3f} ms median ({:.3f} to {:.3f} ms) over {} steps ({})\n", st->median_ms,
                       st->min_ms, st->max_ms, r.steps.count, r.steps.source);
  else
    out += fmt::format(
        "  steps        {} (no step time: a step is an optimizer.step(), a backward or a "
        "--step-marker call)\n",
        r.steps.count);
  out += fmt::format("  emulated     {:.3f} s, GPU busy {}\n", r.elapsed_s,
                     r.gpu_util_pct ? fmt::format("{:.1f} %", *r.gpu_util_pct) : std::string("n/a"));
  if (r.host_load_delay_s && *r.host_load_delay_s > 0.01 * r.elapsed_s)
    out += fmt::format(
        "  host load    {:.3f} s: this machine's other work kept the script from running; made up on the emulated "
        "GPUs, not in the script's own clocks (wall time)\n",
        *r.host_load_delay_s);
  out += fmt::format("  memory peak  {:.1f} MiB allocated, {:.1f} MiB reserved\n", r.peak_allocated_mib,
                     r.peak_reserved_mib);
  out +=
      fmt::format("  kernels      {}, copies {}, syncs {}\n", r.kernels, r.h2d_copies + r.d2h_copies, r.blocking_syncs);
  const std::optional<ExpectedError> e = expected_error(*gpu_, settings_.model, "");
  if (e)
    out += fmt::format("  model error  +-{:.0f} % per step expected for the {} ({})\n", e->pct.iteration, gpu_->name,
                       e->basis);
  else
    out += "  model error  not stated: the calibration holds no validation\n";
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
}

void Runtime::finish() {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
  }
  if (!settings_.main_process) {
    // A rank: its part, for the first process to merge (only when it used a GPU).
    const RunCounters c = counters();
    if (settings_.parts && c.kernels + c.h2d + c.d2h + c.collectives > 0)
      write_file_atomically(*settings_.parts / fmt::format("{}.json", ::getpid()), part_object().dump(),
                            "gpemu torch part");
    return;
  }
  // Each rank's part: its record and (for the trace) its timeline. A part
  // that cannot be read (a rank killed while writing it) is left out.
  struct Part {
    nlohmann::json raw;
    TorchRunRecord record;
  };
  std::vector<Part> parts;
  if (settings_.parts && std::filesystem::is_directory(*settings_.parts)) {
    for (const auto& e : std::filesystem::directory_iterator(*settings_.parts)) {
      if (e.path().extension() != ".json") continue;
      std::ifstream in(e.path());
      nlohmann::json raw = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (raw.is_discarded() || !raw.contains("summary")) continue;
      try {
        TorchRunRecord record = torch_run_record(raw["summary"]);
        parts.push_back({std::move(raw), std::move(record)});
      } catch (const InputError&) {  // NOLINT(bugprone-empty-catch): not a part this build wrote
      }
    }
    std::sort(parts.begin(), parts.end(),
              [](const Part& a, const Part& b) { return a.record.process < b.record.process; });
  }
  const TorchRunRecord main_record = record();
  std::vector<TorchRunRecord> part_records;
  for (const Part& p : parts) part_records.push_back(p.record);
  const TorchRunRecord summary = merge_records(main_record, part_records);
  if (summary.kernels + summary.h2d_copies + summary.d2h_copies > 0) print_summary(summary);
  // One output that cannot be written (a full disk) does not stop the
  // others; every failure is named, and the run fails (gpemu_torch exits 1).
  std::vector<std::string> failed;
  const auto attempt = [&failed](const char* option, const auto& write) {
    try {
      write();
    } catch (const std::exception& e) {
      failed.push_back(fmt::format("{}: {}", option, e.what()));
    }
  };
  const auto report_failures = [&failed] {
    if (failed.empty()) return;
    std::string all;
    for (const std::string& f : failed) all += (all.empty() ? "" : "\n") + f;
    throw Error(all);
  };
  if (settings_.json)
    attempt("--json",
            [&] { write_file_atomically(*settings_.json, to_json(summary).dump(2) + "\n", "gpemu torch summary"); });
  if (!settings_.trace && !settings_.report) return report_failures();

  // Every process's devices: the first process's as they are, each part's
  // on rows of its own, its times moved onto the first process's clock
  // (real clock: the epochs differ; virtual: each process's starts at 0).
  struct Row {
    std::string label;
    int device;
    const RankRecord* rank;
    const TorchDeviceRecord* stats;
  };
  auto [records, args] = trace_records();
  std::vector<TraceDeviceName> names;
  std::vector<Row> rows;
  for (int g = 0; g < process_.gpus(); ++g) {
    const int index = process_.device(g).index();
    names.push_back({index, trace_gpu_name(index, gpu_->id)});
    const auto i = static_cast<std::size_t>(index);
    rows.push_back({fmt::format("GPU {}", index), index, &main_record.run.ranks[i], &main_record.devices[i]});
  }
  const std::int64_t main_epoch = clock_->monotonic_epoch_ns().value_or(0);
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const nlohmann::json& part = parts[p].raw;
    const TorchRunRecord& rec = parts[p].record;
    const std::string& label = rec.process;
    const int base = static_cast<int>(p + 1) * kMaxTorchGpus;
    const std::int64_t shift = part["epoch_ns"].is_null() ? 0 : part["epoch_ns"].get<std::int64_t>() - main_epoch;
    for (std::size_t k = 0; k < rec.devices.size(); ++k) {
      const int i = rec.run.ranks[k].gpu;
      if (rec.devices[k].kernels == 0 && rec.devices[k].collective_busy == 0) continue;
      names.push_back({base + i, fmt::format("{}: {}", label, trace_gpu_name(i, gpu_->id))});
      rows.push_back({fmt::format("{} GPU {}", label, i), base + i, &rec.run.ranks[k], &rec.devices[k]});
    }
    for (const auto& r : part["records"]) {
      records.push_back({r[0].get<std::string>(), r[1].get<std::string>(), base + r[2].get<int>(), r[3].get<int>(),
                         r[4].get<int>(), r[5].get<Time>() + shift, r[6].get<Time>() + shift});
      args.push_back(r.size() > 7 ? r[7].get<std::string>() : std::string());
    }
  }
  std::vector<HostSpan> spans = timeline_->host_spans();
  for (const auto& [part, rec] : parts) {
    const std::int64_t shift = part["epoch_ns"].is_null() ? 0 : part["epoch_ns"].get<std::int64_t>() - main_epoch;
    if (part.contains("spans"))
      for (const auto& h : part["spans"])
        spans.push_back({h[0].get<std::string>(), h[1].get<std::string>(), h[2].get<std::string>(), h[3].get<int>(),
                         h[4].get<Time>() + shift, h[5].get<Time>() + shift});
  }
  if (settings_.trace)
    attempt("--trace", [&] { write_chrome_trace_file_with_args(records, args, spans, names, *settings_.trace); });
  if (settings_.report)
    attempt("--report", [&] {
      RunReport report;
      report.title = fmt::format("gpemu torch: {} on {}x {}", settings_.script.empty() ? "script" : settings_.script,
                                 settings_.gpus, gpu_->name);
      auto fixed = [](std::optional<double> v, const char* unit) {
        return v ? fmt::format("{:.3f}{}", *v, unit) : std::string("n/a");
      };
      report.summary = {{"GPU", gpu_->name},
                        {"clock", std::string(to_string(settings_.clock))},
                        {"emulated time", fixed(summary.elapsed_s, " s")},
                        {"iterations (steps)", fmt::format("{}", summary.iterations)},
                        {"iterations/s", fixed(summary.iterations_per_s, "")},
                        {"forward GPU time per iteration", fixed(summary.forward_ms_mean, " ms")},
                        {"backward GPU time per iteration", fixed(summary.backward_ms_mean, " ms")},
                        {"optimizer GPU time per iteration", fixed(summary.optimizer_ms_mean, " ms")},
                        {"GPU utilization", fixed(summary.gpu_util_pct, " %")},
                        {"peak allocated", fixed(summary.peak_allocated_mib, " MiB")},
                        {"peak reserved", fixed(summary.peak_reserved_mib, " MiB")},
                        {"kernels", fmt::format("{}", summary.kernels)},
                        {"collectives", fmt::format("{}", summary.collectives)}};
      const double elapsed = summary.elapsed_s;
      std::map<int, std::vector<BusyInterval>> busy;
      for (const TraceRecord& r : records)
        if (r.category == "kernel") busy[r.device].push_back({r.start, r.end});
      Time end = 0;
      for (const TraceRecord& r : records) end = std::max(end, r.end);
      for (const Row& row : rows) {
        const TorchDeviceRecord& d = *row.stats;
        if (d.kernels == 0 && d.collective_busy == 0) continue;
        const double compute = to_seconds(row.rank->compute_busy);
        report.breakdown.push_back({row.label,
                                    {{"compute", compute},
                                     {"H2D", to_seconds(d.h2d_busy)},
                                     {"D2H", to_seconds(d.d2h_busy)},
                                     {"communication", to_seconds(d.collective_busy)},
                                     {"idle", std::max(0.0, elapsed - compute)}}});
        const auto& intervals = busy[row.device];
        if (end > 0)
          report.utilization.push_back(
              utilization_from_intervals(row.label, intervals, std::max<Duration>(end / 100, 1), 0, end));
      }
      report.configuration = configuration_rows(
          nlohmann::json{{"gpu", gpu_->id},
                         {"gpus", settings_.gpus},
                         {"clock", std::string(to_string(settings_.clock))},
                         {"model_correction", settings_.model.empty() ? "none" : settings_.model},
                         {"processes", summary.processes.empty() ? std::size_t{1} : summary.processes.size()}});
      report.notes = {
          "Times are gpemu's emulated GPU times (docs/torch.md): each op priced by the analytical model, "
          "collectives by the interconnect model.",
          "Breakdown: busy time of each engine; engines and streams overlap, so the parts may sum to more than "
          "the run's time. Idle: the run's time less compute."};
      write_html_report_file(report, *settings_.report);
    });
  report_failures();
}

}  // namespace gpemu::torch_backend
