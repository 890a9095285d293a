// `gpemu share`: several training jobs on one emulated GPU under a sharing
// policy (share.h, docs/sharing.md). Parses, runs, prints.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/job_args.h"
#include "cli/option_checks.h"
#include "cli/options.h"
#include "cli/output.h"
#include "common/message_text.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/report.h"
#include "gpemu/share.h"
#include "gpemu/timeline.h"
#include "share/serve.h"
#include "share/share_json.h"

namespace gpemu::cli {
namespace {

// The time-slicing policy's parameters (gpemu share and gpemu serve).
void add_timeslice_options(CLI::App* cmd, double& timeslice_ms, double& switch_us) {
  cmd->add_option("--timeslice-ms", timeslice_ms, "Policy timeslice: the time slice, ms")
      ->capture_default_str()
      ->check(finite_number_in(0.001, 1000));
  cmd->add_option("--switch-us", switch_us, "Policy timeslice: one context switch, us")
      ->capture_default_str()
      ->check(finite_number_in(0, 1e6));
}

ShareOptions share_options(const std::string& policy, double timeslice_ms, double switch_us) {
  ShareOptions o;
  o.policy = parse_share_policy(policy);
  o.timeslice = from_seconds(timeslice_ms / 1e3);
  o.switch_cost = from_seconds(switch_us / 1e6);
  return o;
}

struct ShareArgs {
  std::string jobs;
  std::string policy = "fifo";
  std::string gpu;  // "": the jobs file's, else v100
  std::string clock = "real";
  std::string profiles;
  double timeslice_ms = 2, switch_us = 25, window_s = 1;
  std::string trace, report;
  bool json = false;
  bool connect = false;
  std::string connect_socket;  // --connect [SOCKET]: "" for the default
  int cores = 0;               // 0: the jobs file's, else this machine's
  std::string storage;         // "": the jobs file's, else none (each job reads from memory)
  bool steps = false;
};

// A run in which no job finished has no result: after its output (each
// job's error), the command fails. One in which some failed reports them and
// succeeds: a job's OOM next to others is an outcome of a sharing study.
void fail_if_no_job_finished(const ShareResult& r) {
  if (std::any_of(r.jobs.begin(), r.jobs.end(), [](const SharedJobResult& j) { return j.error.empty(); })) return;
  throw Error(
      fmt::format("share: none of the {} jobs finished (each one's error is in the output above)", r.jobs.size()));
}

// The run's spec: the jobs file's, with the flags over it.
ShareSpec share_spec(const ShareArgs& a) {
  const JobsFile file = load_jobs_file(a.jobs);
  ShareSpec spec;
  spec.gpu = &find_gpu(!a.gpu.empty() ? a.gpu : !file.gpu.empty() ? file.gpu : "v100");
  spec.options = share_options(a.policy, a.timeslice_ms, a.switch_us);
  spec.utilization_window = from_seconds(a.window_s);
  spec.trace = !a.trace.empty();
  spec.jobs = file.jobs;
  spec.cpu_cores = a.cores > 0 ? a.cores : file.cores;
  spec.storage = file.storage;
  if (!a.storage.empty()) {
    try {
      spec.storage = pipeline::parse_storage(a.storage);
    } catch (const InputError& e) {
      throw InputError(fmt::format("share --storage: {}", e.what()));
    }
  }
  spec.per_step = (a.json && a.steps) || !a.report.empty();  // what prints them; otherwise flat in steps
  return spec;
}

void share(const ShareArgs& a) {
  check_run_outputs(a.trace, a.report);
  ShareSpec spec = share_spec(a);
  warn_skipped_profiles(a.profiles);
  const auto profiles = a.profiles.empty() ? std::nullopt : std::optional<std::filesystem::path>(a.profiles);
  if (a.connect && (!a.trace.empty() || !a.report.empty()))
    throw InputError(
        "share --connect: --trace and --report are not available: the server's timeline has the kernels "
        "(gpemu smi shows them)");
  if (a.connect && spec.storage)
    throw InputError(
        "share --connect: --storage (or the jobs file's 'storage') is the disk of jobs with a 'dataset', which run in "
        "one process only; drop --connect or the storage");
  // --connect: the server runs each job as its jobs-file entry says (torch and host included).
  if (!a.connect) give_cost_models(spec, profiles);
  const std::unique_ptr<Clock> clock = make_clock(parse_clock_kind(a.clock));
  const ShareResult r = a.connect
                            ? run_shared_remote(a.connect_socket.empty() ? default_socket_path()
                                                                         : std::filesystem::path(a.connect_socket),
                                                spec, profiles)
                            : run_shared(*clock, *spec.jobs.front().costs, spec);
  if (!a.trace.empty()) write_chrome_trace_file(r.trace, r.host_spans, r.trace_devices, a.trace);
  if (!a.report.empty()) write_html_report_file(share_report(r), a.report);

  if (a.json) {
    nlohmann::json j = share_json(r, a.steps);
    if (!a.trace.empty()) j["trace"] = a.trace;
    if (!a.report.empty()) j["report"] = a.report;
    std::cout << j.dump(2) << '\n';
    return fail_if_no_job_finished(r);
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
    t.add({terminal_text(j.name), j.model().empty() ? "fixed step" : terminal_text(j.model()),
           std::to_string(j.batch_size()), fixed(to_seconds(j.arrival), 1), fixed(to_seconds(j.end), 2),
           fixed(j.jct_s(), 2), std::to_string(j.iterations()), fixed(j.samples_per_s(), 1),
           fixed(j.gpu_share_pct(), 1), fixed(mib(j.peak_allocated_bytes()), 0), fixed(mib(j.peak_reserved_bytes()), 0),
           ended});
  }
  t.print(std::cout);
  std::cout << '\n';
  std::vector<std::pair<std::string, std::string>> rows = {
      {"makespan", fmt::format("{} s", fixed(to_seconds(r.makespan), 2))},
      {"mean JCT", mean_jct_text(r)},
      {"GPU utilisation", fmt::format("{} % of the makespan with a kernel running (per {} s window: --json)",
                                      fixed(r.mean_utilization_pct, 1), to_seconds(r.utilization_window))}};
  if (a.connect) rows.pop_back();  // the server saw the kernels: gpemu smi
  if (r.policy != SharePolicy::Mig && !a.connect)
    rows.push_back(
        {"GPU memory", fmt::format("peak {} MiB of {} MiB in use (contexts and segments of all jobs)",
                                   fixed(mib(r.peak_memory_used_bytes), 0), fixed(mib(r.memory_capacity_bytes), 0))});
  print_summary(std::cout, rows);
  for (const SharedJobResult& j : r.jobs)
    if (!j.error.empty()) std::cout << fmt::format("{}: {}\n", terminal_text(j.name), one_line_message(j.error));
  if (!a.trace.empty()) std::cout << "trace: " << a.trace << " (open in https://ui.perfetto.dev)\n";
  if (!a.report.empty()) std::cout << "report: " << a.report << '\n';
  fail_if_no_job_finished(r);
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
  add_timeslice_options(cmd, a->timeslice_ms, a->switch_us);
  cmd->add_option("--window-s", a->window_s, "Utilisation window, s")
      ->capture_default_str()
      ->check(finite_number_in(0.001, 1e6));
  cmd->add_option("--trace", a->trace, "Write a Perfetto/Chrome trace of the shared GPU to this file");
  cmd->add_option("--report", a->report, "Write an HTML report with charts to this file");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->add_flag("--steps", a->steps, "With --json: each job's step end times and samples");
  cmd->add_option("--cores", a->cores,
                  "CPU cores the jobs' data loaders share (default: the jobs file's 'cores', else this machine's)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--storage", a->storage,
                  "The disk the jobs with a 'dataset' read their samples from, each job an even share while it runs: "
                  "hdd, ssd, nvme, nfs or a JSON file (default: the jobs file's 'storage', else every read from "
                  "memory)");
  // A bare --connect has no value for each() to see: count() tells that it
  // was given, and it means the default socket (never the in-process run).
  auto* connect =
      cmd->add_option("--connect", a->connect_socket,
                      "Run the jobs as clients of a running 'gpemu serve' (its socket; default: the default socket)")
          ->expected(0, 1);
  cmd->callback([a, connect] {
    a->connect = connect->count() > 0;
    share(*a);
  });
}

// ---- gpemu serve -------------------------------------------------------------

namespace {

struct ServeArgs {
  std::string gpu = "v100";
  int gpus = 1;
  std::string policy = "fifo";
  std::string socket;
  std::string metrics;
  double idle_timeout_s = 600;
  int max_clients = 256;
  double timeslice_ms = 2, switch_us = 25;
};

void serve(const ServeArgs& a) {
  ServeOptions o;
  o.gpu = &find_gpu(a.gpu);
  o.gpus = a.gpus;
  o.share = share_options(a.policy, a.timeslice_ms, a.switch_us);
  o.socket = a.socket;
  o.metrics = a.metrics;
  o.idle_timeout = from_seconds(a.idle_timeout_s);
  o.max_clients = a.max_clients;
  ShareServer server(o);
  std::cout << fmt::format("serving {} emulated {} under policy {} at {}\n", o.gpus, o.gpu->id,
                           to_string(o.share.policy), server.socket_path().string());
  if (server.metrics_port() > 0) {
    std::cout << fmt::format("metrics (Prometheus text, DCGM names) at http://{}/metrics (port {})\n",
                             server.metrics_address(), server.metrics_port());
    // The body names the host, the GPU model and its use, and the endpoint
    // has no authentication.
    if (!server.metrics_on_loopback())
      print_warnings({fmt::format(
          "--metrics {}: the metrics endpoint listens on {}, which is not loopback: it is reachable from other "
          "machines and shows this host's name and GPU use; give a bare PORT (127.0.0.1) to keep it local",
          a.metrics, server.metrics_address())});
  }
  std::cout << "stop with Ctrl-C" << std::endl;
  server.run();
  std::cout << "stopped\n";
}

// ---- gpemu smi -----------------------------------------------------------------

struct SmiArgs {
  std::string socket;
  std::string query;
  std::string format;
  bool json = false;
  double timeout_s = to_seconds(kServeReplyTimeout);
};

// What no gpemu serve says: no GPU list, memory used beyond the total, a
// utilisation outside 0 to 100 %. The table is not printed from it.
void check_smi_reply(const nlohmann::json& s, const std::filesystem::path& socket) {
  const auto bad = [&](const std::string& what) {
    return Error(
        fmt::format("gpemu smi: the server at {} replied {}: not a reply of gpemu serve's", socket.string(), what));
  };
  if (!s.contains("gpus") || !s["gpus"].is_array()) throw bad("no list of GPUs");
  for (const auto& g : s["gpus"]) {
    const auto field = [&](const char* name) -> const nlohmann::json& {
      static const nlohmann::json none;
      return g.is_object() && g.contains(name) ? g[name] : none;
    };
    const nlohmann::json &total = field("memory_total_bytes"), &used = field("memory_used_bytes"),
                         &util = field("utilization_pct");
    if (!total.is_number_unsigned() || !used.is_number_unsigned() ||
        used.get<std::uint64_t>() > total.get<std::uint64_t>())
      throw bad(
          fmt::format("memory used {} of a total {}", one_line_message(used.dump()), one_line_message(total.dump())));
    if (!util.is_number() || !(util.get<double>() >= 0 && util.get<double>() <= 100))
      throw bad(fmt::format("a utilisation of {} %", one_line_message(util.dump())));
    if (!field("index").is_number_integer() || !field("name").is_string() || !field("uuid").is_string() ||
        !field("policy").is_string() || !field("processes").is_array())
      throw bad("a GPU without its index, name, uuid, policy or processes");
  }
}

constexpr double kMiB = 1048576.0;

// --format csv[,noheader][,nounits]: whether to print the header and the units.
std::pair<bool, bool> smi_csv_format(const std::string& format) {
  bool header = true, units = true;
  if (format.rfind("csv", 0) != 0)
    throw InputError(fmt::format("--format '{}': give csv, optionally with ,noheader and ,nounits", format));
  for (std::size_t at = 3; at < format.size();) {
    const std::size_t next = format.find(',', at + 1);
    const std::string opt = format.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (opt == "noheader")
      header = false;
    else if (opt == "nounits")
      units = false;
    else
      throw InputError(fmt::format("--format: '{}' is not known; give noheader or nounits", opt));
    at = next == std::string::npos ? format.size() : next;
  }
  return {header, units};
}

// --query-gpu's comma-separated fields, each one gpemu smi answers.
std::vector<std::string> smi_query_fields(const std::string& query) {
  std::vector<std::string> fields;
  for (std::size_t at = 0; at <= query.size();) {
    const std::size_t next = query.find(',', at);
    std::string f = query.substr(at, next == std::string::npos ? std::string::npos : next - at);
    f.erase(0, f.find_first_not_of(' '));
    f.erase(f.find_last_not_of(' ') + 1);
    fields.push_back(f);
    if (next == std::string::npos) break;
    at = next + 1;
  }
  const std::set<std::string> known = {"index",        "name",        "uuid",        "count",
                                       "memory.total", "memory.used", "memory.free", "utilization.gpu",
                                       "compute_mode"};
  for (const auto& f : fields)
    if (!known.contains(f))
      throw InputError(
          fmt::format("--query-gpu: field '{}' is not known; gpemu smi answers index, name, uuid, count, "
                      "memory.total, memory.used, memory.free, utilization.gpu, compute_mode",
                      f));
  return fields;
}

// nvidia-smi --query-gpu=...: the fields scripts ask for most.
void print_smi_query(const SmiArgs& a, const nlohmann::json& s) {
  const auto [header, units] = smi_csv_format(a.format);
  const std::vector<std::string> fields = smi_query_fields(a.query);
  const std::map<std::string, std::string> unit = {
      {"memory.total", "MiB"}, {"memory.used", "MiB"}, {"memory.free", "MiB"}, {"utilization.gpu", "%"}};
  if (header) {
    std::string line;
    for (const auto& f : fields)
      line += (line.empty() ? "" : ", ") + f + (units && unit.contains(f) ? " [" + unit.at(f) + "]" : "");
    std::cout << line << '\n';
  }
  for (const auto& g : s["gpus"]) {
    std::string line;
    const auto total = g["memory_total_bytes"].get<std::uint64_t>(), used = g["memory_used_bytes"].get<std::uint64_t>();
    for (const auto& f : fields) {
      std::string v;
      if (f == "index") v = std::to_string(g["index"].get<int>());
      if (f == "name") v = terminal_text(g["name"].get<std::string>());
      if (f == "uuid") v = terminal_text(g["uuid"].get<std::string>());
      if (f == "count") v = std::to_string(s["gpus"].size());
      if (f == "memory.total") v = std::to_string(static_cast<std::uint64_t>(total / kMiB));
      if (f == "memory.used") v = std::to_string(static_cast<std::uint64_t>(used / kMiB));
      if (f == "memory.free") v = std::to_string(static_cast<std::uint64_t>((total - std::min(total, used)) / kMiB));
      if (f == "utilization.gpu") v = std::to_string(static_cast<int>(g["utilization_pct"].get<double>() + 0.5));
      if (f == "compute_mode") v = g["policy"] == "mps" ? "Exclusive_Process" : "Default";
      if (units && unit.contains(f)) v += " " + unit.at(f);
      line += (line.empty() ? "" : ", ") + v;
    }
    std::cout << line << '\n';
  }
}

// The familiar table.
void print_smi_table(const nlohmann::json& s) {
  std::cout << "gpemu smi: emulated GPUs of 'gpemu serve' (utilisation over the last second)\n\n";
  Table t({"GPU", "Name", "Policy", "Memory-Usage", "GPU-Util"});
  for (const auto& g : s["gpus"])
    t.add({std::to_string(g["index"].get<int>()), terminal_text(g["name"].get<std::string>()),
           terminal_text(g["policy"].get<std::string>()),
           fmt::format("{:.0f}MiB / {:.0f}MiB", g["memory_used_bytes"].get<double>() / kMiB,
                       g["memory_total_bytes"].get<double>() / kMiB),
           fmt::format("{:.0f}%", g["utilization_pct"].get<double>())});
  t.print(std::cout);
  std::cout << "\nProcesses:\n";
  Table p({"GPU", "PID", "Process name", "GPU Memory"});
  for (const auto& g : s["gpus"])
    for (const auto& proc : g["processes"])
      p.add({std::to_string(g["index"].get<int>()), std::to_string(proc["pid"].get<int>()),
             terminal_text(proc["name"].get<std::string>()),
             fmt::format("{:.0f}MiB", proc["memory_bytes"].get<double>() / kMiB)});
  p.print(std::cout);
}

void smi(const SmiArgs& a) {
  const std::filesystem::path socket = a.socket.empty() ? default_socket_path() : std::filesystem::path(a.socket);
  ServeClient client(socket, from_seconds(a.timeout_s));
  const nlohmann::json s = client.request({{"op", "smi"}});
  if (!s.value("ok", false)) throw Error(s.value("error", std::string("smi refused")));
  check_smi_reply(s, socket);
  if (a.json)
    std::cout << s.dump(2) << '\n';
  else if (!a.query.empty())
    print_smi_query(a, s);
  else
    print_smi_table(s);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve",
                                 "Own a node's emulated GPUs; processes attach over a Unix socket and share "
                                 "them under a policy (docs/sharing.md)");
  cmd->add_option("--gpu", a->gpu, "GPU to emulate (see 'gpemu devices')")->capture_default_str();
  cmd->add_option("--gpus", a->gpus, "Emulated GPUs")->capture_default_str()->check(whole_number_in(1, 64));
  cmd->add_option("--policy", a->policy, "fifo, timeslice, priority, mps or mig")->capture_default_str();
  cmd->add_option("--socket", a->socket,
                  "Unix socket path (default: $XDG_RUNTIME_DIR/gpemu/serve.sock, else "
                  "/tmp/gpemu-UID/serve.sock)");
  cmd->add_option("--metrics", a->metrics, "Prometheus text with DCGM exporter's names on PORT or IPv4:PORT");
  cmd->add_option("--idle-timeout-s", a->idle_timeout_s, "Drop a client silent this long, s")
      ->capture_default_str()
      ->check(finite_number_in(0.01, 1e7));
  cmd->add_option("--max-clients", a->max_clients, "Clients at once")
      ->capture_default_str()
      ->check(whole_number_in(1, 4096));
  add_timeslice_options(cmd, a->timeslice_ms, a->switch_us);
  cmd->callback([a] { serve(*a); });
}

void add_smi_command(CLI::App& app) {
  auto a = std::make_shared<SmiArgs>();
  auto* cmd = app.add_subcommand("smi", "What nvidia-smi prints, for the emulated GPUs of a running 'gpemu serve'");
  cmd->add_option("--socket", a->socket, "The server's socket (default: the default socket)");
  cmd->add_option("--query-gpu", a->query,
                  "Fields, as nvidia-smi: index, name, uuid, count, memory.total, memory.used, memory.free, "
                  "utilization.gpu, compute_mode");
  cmd->add_option("--format", a->format, "csv[,noheader][,nounits] (with --query-gpu)")->default_str("csv");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->add_option("--timeout-s", a->timeout_s, "Give up on a server that does not answer in this long, s")
      ->capture_default_str()
      ->check(finite_number_in(0.01, 1e6));
  cmd->callback([a] {
    SmiArgs b = *a;
    if (b.format.empty()) b.format = "csv";
    smi(b);
  });
}

}  // namespace gpemu::cli
