// The trace file of `gpemu cluster` (cluster.h): CSV with a header, one job a line.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "common/message_text.h"
#include "gpemu/cluster.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/spec_error.h"
#include "gpemu/zoo.h"

namespace gpemu::cluster {
namespace {

constexpr std::size_t kMaxTraceBytes = 256u << 20;
constexpr std::size_t kMaxJobs = 10'000'000;

const std::vector<std::string> kColumns = {"job",     "arrival_s", "user",       "model",           "batch",
                                           "variant", "gpus",      "iterations", "duration_s",      "step_s",
                                           "dataset", "cpus",      "mem_gib",    "cpu_config_cpus", "cpu_step_s"};

std::string column_list() {
  std::string s;
  for (const auto& c : kColumns) s += (s.empty() ? "" : ", ") + c;
  return s;
}

std::vector<std::string_view> split(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t p = line.find(sep, start);
    out.push_back(line.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

struct Line {
  std::string_view source;
  std::size_t number;
  std::string at(std::string_view column) const { return fmt::format("{}:{}: '{}'", source, number, column); }
};

double number(const Line& l, std::string_view column, std::string_view v, double lo, double hi) {
  double x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || !std::isfinite(x) || x < lo || x > hi)
    throw InputError(fmt::format("{} is '{}': expected a number from {} to {}", l.at(column), v, lo, hi));
  return x;
}

std::int64_t whole(const Line& l, std::string_view column, std::string_view v, std::int64_t lo, std::int64_t hi) {
  std::int64_t x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || x < lo || x > hi)
    throw InputError(fmt::format("{} is '{}': expected a whole number from {} to {}", l.at(column), v, lo, hi));
  return x;
}

std::string name(const Line& l, std::string_view column, std::string_view v) {
  if (v.size() > 200 || has_control_characters(v) || v.find('"') != std::string_view::npos)
    throw InputError(
        fmt::format("{}: expected at most 200 characters without quotes or control characters", l.at(column)));
  return std::string(v);
}

// "precision=amp;memory_format=channels_last": the keywords of `gpemu predict`'s flags.
ModelSpec model_spec(const Line& l, const std::string& model, const std::string& variant) {
  ModelSpec m;
  m.name = zoo::canonical_name(model);
  if (!zoo::has_model(m.name))
    throw InputError(fmt::format("{} is '{}': not a model of the zoo (gpemu models lists them)", l.at("model"), model));
  if (variant.empty()) return m;
  ProgramVariantNames names;
  zoo::Precision precision = zoo::Precision::FP32;
  for (std::string_view part : split(variant, ';')) {
    part = trim(part);
    if (part.empty()) continue;
    const auto eq = part.find('=');
    if (eq == std::string_view::npos)
      throw InputError(fmt::format("{}: '{}' is not key=value (e.g. precision=amp;memory_format=channels_last)",
                                   l.at("variant"), part));
    const std::string key(trim(part.substr(0, eq))), value(trim(part.substr(eq + 1)));
    if (key == "precision") {
      try {
        precision = zoo::parse_precision(value);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", l.at("variant"), e.what()));
      }
    } else if (key == "matmul_precision")
      names.matmul_precision = value;
    else if (key == "amp")
      names.amp = value;
    else if (key == "memory_format")
      names.memory_format = value;
    else if (key == "attention")
      names.attention = value;
    else if (key == "fused")
      names.fused = value;
    else if (key == "cudnn_tf32")
      names.cudnn_tf32 = value;
    else if (key == "foreach")
      names.foreach = value;
    else if (key == "micro_steps")
      names.micro_steps = static_cast<int>(whole(l, "variant micro_steps", value, 1, 1024));
    else
      throw InputError(
          fmt::format("{}: unknown key '{}'; accepted: precision, matmul_precision, amp, memory_format, "
                      "attention, fused, cudnn_tf32, foreach, micro_steps",
                      l.at("variant"), key));
  }
  try {
    ProgramVariant v = to_variant(names, precision, /*keywords=*/true);
    v.micro_steps = names.micro_steps;
    m.name = variant_model(m.name, v, "fused");
    set_program_variant(m, v);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", l.at("variant"), e.what()));
  }
  return m;
}

// The most GPUs of one model the cluster has (a job's GPUs are of one model).
std::map<std::string, int> gpus_per_model(const ClusterConfig& c) {
  std::map<std::string, int> m;
  for (const auto& n : c.nodes) m[n.gpu->id] += n.gpus * n.count;
  return m;
}

std::string fmt_double(double x) { return fmt::format("{}", x); }

}  // namespace

Trace parse_trace(std::string_view text, std::string_view source, const ClusterConfig& cluster) {
  if (text.size() > kMaxTraceBytes)
    throw InputError(fmt::format("{}: {} bytes is too large for a trace (at most {} MiB)", source, text.size(),
                                 kMaxTraceBytes >> 20));
  int most_gpus = 0;
  std::string most_model;
  for (const auto& [model, g] : gpus_per_model(cluster))
    if (g > most_gpus) most_gpus = g, most_model = model;
  int total_cpus = 0;
  for (const auto& n : cluster.nodes) total_cpus += n.cpus * n.count;
  Trace trace;
  std::vector<int> col;  // header position -> column index
  std::set<std::string> ids, checked_datasets;
  std::size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const Line l{source, line_no};
    auto cells = split(line, ',');
    if (col.empty()) {
      std::set<int> seen;
      for (auto c : cells) {
        c = trim(c);
        auto it = std::find(kColumns.begin(), kColumns.end(), c);
        if (it == kColumns.end())
          throw InputError(
              fmt::format("{}:{}: unknown column '{}' in the header; accepted: {}", source, line_no, c, column_list()));
        const int index = static_cast<int>(it - kColumns.begin());
        if (!seen.insert(index).second)
          throw InputError(fmt::format("{}:{}: column '{}' appears twice in the header", source, line_no, c));
        col.push_back(index);
      }
      for (const char* need : {"job", "arrival_s", "gpus"})
        if (!seen.contains(static_cast<int>(std::find(kColumns.begin(), kColumns.end(), need) - kColumns.begin())))
          throw InputError(
              fmt::format("{}:{}: the header has no '{}' column; a trace needs job, arrival_s, gpus and "
                          "iterations or duration_s",
                          source, line_no, need));
      continue;
    }
    if (cells.size() != col.size())
      throw InputError(fmt::format("{}:{}: {} fields where the header has {} ({})", source, line_no, cells.size(),
                                   col.size(), column_list()));
    if (trace.jobs.size() >= kMaxJobs)
      throw InputError(fmt::format("{}:{}: more than {} jobs; split the trace", source, line_no, kMaxJobs));
    TraceJob j;
    bool has_batch = false;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string_view v = trim(cells[i]);
      const std::string& c = kColumns[static_cast<std::size_t>(col[i])];
      if (v.empty() && c != "job") continue;
      if (c == "job")
        j.id = name(l, c, v);
      else if (c == "arrival_s")
        j.arrival_s = number(l, c, v, 0, 1e9);
      else if (c == "user")
        j.user = name(l, c, v);
      else if (c == "model")
        j.model = name(l, c, v);
      else if (c == "batch")
        j.batch = static_cast<int>(whole(l, c, v, 1, 1 << 20)), has_batch = true;
      else if (c == "variant")
        j.variant = name(l, c, v);
      else if (c == "gpus")
        j.gpus = static_cast<int>(whole(l, c, v, 1, 1 << 20));
      else if (c == "iterations")
        j.iterations = whole(l, c, v, 1, std::int64_t{1} << 40);
      else if (c == "duration_s")
        j.duration_s = number(l, c, v, 1e-3, 1e9);
      else if (c == "step_s")
        j.step_s = number(l, c, v, 1e-6, 1e6);
      else if (c == "dataset")
        j.dataset = name(l, c, v);
      else if (c == "cpus")
        j.cpus = static_cast<int>(whole(l, c, v, 1, 4096));
      else if (c == "mem_gib")
        j.mem_gib = number(l, c, v, 0, 1 << 20);
      else if (c == "cpu_config_cpus")
        j.cpu_config_cpus = static_cast<int>(whole(l, c, v, 1, 1 << 20));
      else if (c == "cpu_step_s")
        j.cpu_step_s = number(l, c, v, 1e-6, 1e6);
    }
    if (j.id.empty()) throw InputError(fmt::format("{}: empty; every job needs an id", l.at("job")));
    if (!ids.insert(j.id).second)
      throw InputError(fmt::format("{}: job '{}' appears twice; job ids are unique", l.at("job"), j.id));
    if ((j.iterations > 0) == (j.duration_s > 0))
      throw InputError(fmt::format("{}:{}: job '{}': give either iterations or duration_s, not {}", source, line_no,
                                   j.id, j.iterations > 0 ? "both" : "neither"));
    if (j.model.empty() == (j.step_s == 0))
      throw InputError(
          fmt::format("{}:{}: job '{}': give either model (a zoo model) or step_s (a fixed time per "
                      "iteration), not {}",
                      source, line_no, j.id, j.model.empty() ? "neither" : "both"));
    if (j.model.empty() && (has_batch || !j.variant.empty() || !j.dataset.empty()))
      throw InputError(fmt::format("{}:{}: job '{}': batch, variant and dataset are for a model job, not a step_s one",
                                   source, line_no, j.id));
    if ((j.cpu_config_cpus > 0) != (j.cpu_step_s > 0) || (j.cpu_config_cpus > 0 && !j.model.empty()))
      throw InputError(
          fmt::format("{}:{}: job '{}': a CPU configuration is cpu_config_cpus and cpu_step_s together, on a "
                      "step_s job: its time per iteration is given, since gpemu has no model of training on CPU "
                      "cores (no CPU's peak FLOP/s and bandwidth in the catalog, no cost-model factors fitted to "
                      "CPU runs; docs/cluster.md)",
                      source, line_no, j.id));
    if (j.cpu_config_cpus > total_cpus)
      throw InputError(
          fmt::format("{}:{}: job '{}' asks for {} cores on CPU; the cluster has {}: lower its "
                      "cpu_config_cpus or add nodes",
                      source, line_no, j.id, j.cpu_config_cpus, total_cpus));
    if (!j.model.empty()) j.model_spec = model_spec(l, j.model, j.variant);
    if (!j.dataset.empty() && checked_datasets.insert(j.dataset).second) {
      try {
        pipeline::virtual_dataset(j.dataset);
      } catch (const SpecError& e) {  // the engine's data.dataset: this file's column
        throw InputError(fmt::format("{}: {}", l.at("dataset"), e.worded([](std::string_view) { return "dataset"; })));
      }
    }
    if (j.gpus > most_gpus)
      throw InputError(
          fmt::format("{}:{}: job '{}' asks for {} GPUs; the cluster has at most {} of one model ({}): "
                      "lower its gpus or add nodes",
                      source, line_no, j.id, j.gpus, most_gpus, most_model));
    trace.jobs.push_back(std::move(j));
  }
  if (col.empty()) throw InputError(fmt::format("{}: empty; a trace is a CSV header and one job per line", source));
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.arrival_s < b.arrival_s; });
  return trace;
}

Trace read_trace_file(const std::string& path, const ClusterConfig& cluster) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("--trace '{}': cannot be read; give a trace (CSV, docs/cluster.md)", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_trace(ss.str(), path, cluster);
}

std::string trace_csv(const Trace& trace) {
  std::string out =
      "job,arrival_s,user,model,batch,variant,gpus,iterations,duration_s,step_s,dataset,cpus,mem_gib,cpu_config_cpus,"
      "cpu_step_s\n";
  for (const auto& j : trace.jobs) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", j.id, fmt_double(j.arrival_s), j.user, j.model,
                       j.model.empty() ? std::string() : std::to_string(j.batch), j.variant, j.gpus,
                       j.iterations > 0 ? std::to_string(j.iterations) : std::string(),
                       j.duration_s > 0 ? fmt_double(j.duration_s) : std::string(),
                       j.step_s > 0 ? fmt_double(j.step_s) : std::string(), j.dataset,
                       j.cpus > 0 ? std::to_string(j.cpus) : std::string(),
                       j.mem_gib > 0 ? fmt_double(j.mem_gib) : std::string(),
                       j.cpu_config_cpus > 0 ? std::to_string(j.cpu_config_cpus) : std::string(),
                       j.cpu_step_s > 0 ? fmt_double(j.cpu_step_s) : std::string());
  }
  return out;
}

}  // namespace gpemu::cluster
