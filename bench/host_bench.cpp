// gpemu bench host (bench/host_bench.h).
#include "host_bench.h"

#include <unistd.h>

#include <filesystem>
#include <ostream>

#include <fmt/format.h>

#include "bench_util.h"
#include "cost/host_profile_json.h"
#include "gpemu/calibration.h"
#include "gpemu/error.h"
#include "gpemu/host.h"
#include "gpemu/zoo.h"

namespace gpemu {

namespace fs = std::filesystem;

nlohmann::json run_host_bench(const HostBenchOptions& o) {
  if (!(o.cuda_launch_us >= 0 && o.cuda_launch_us <= 1000))
    throw InputError(fmt::format("--cuda-launch-us {}: expected microseconds from 0 to 1000", o.cuda_launch_us));
  const std::string script = o.script.empty() ? (zoo::data_dir() / "bench" / "host_bench.py").string() : o.script;
  if (!fs::exists(script))
    throw InputError(fmt::format("bench host: the measurement script {} is missing; give --script FILE", script));
  if (::access(o.python.c_str(), X_OK) != 0)
    throw InputError(
        fmt::format("bench host: no Python interpreter at {}; give --python PATH (one with torch)", o.python));
  const bench::CommandOutput run = bench::run_command(bench::shell_quote(o.python) + " " + bench::shell_quote(script) +
                                                      (o.short_run ? " --quick" : "") + " 2>/dev/null");
  nlohmann::json m;
  try {
    if (!run.last_json_line.empty()) m = nlohmann::json::parse(run.last_json_line);
  } catch (const nlohmann::json::exception&) {
  }
  if (m.is_object() && m.contains("error"))
    throw InputError(fmt::format("bench host: {} ({}); install python3-torch or give --python PATH",
                                 m["error"].get<std::string>(), o.python));
  if (!run.started || !run.succeeded() || !m.is_object() || !m.contains("forward_us"))
    throw InputError(
        fmt::format("bench host: {} {} did not print its measurement (status {})", o.python, script, run.status));
  HostProfile h;
  h.name = o.name.empty() ? "this-host" : o.name;
  h.torch = m.value("torch", std::string("?"));
  char hostname[256] = {};
  ::gethostname(hostname, sizeof hostname - 1);
  h.description = fmt::format("{} ({} cores), PyTorch {} eager, dispatch measured on the CPU by gpemu bench host",
                              hostname, ::sysconf(_SC_NPROCESSORS_ONLN), h.torch);
  // Each kernel: the CPU-only dispatch measured here plus what a CUDA launch
  // adds; a view launches nothing.
  h.forward_us = m["forward_us"].get<double>() + o.cuda_launch_us;
  h.backward_us = m["backward_us"].get<double>() + o.cuda_launch_us;
  h.optimizer_us = m["optimizer_for_loop_kernel_us"].get<double>() + o.cuda_launch_us;
  h.foreach_us = m["optimizer_foreach_call_us"].get<double>() + o.cuda_launch_us;
  h.view_us = m["view_us"].get<double>();
  h.source = fmt::format(
      "gpemu bench host{}: CPU dispatch per op measured with torch {} on 1 thread, plus {:g} us per CUDA kernel "
      "launch (--cuda-launch-us, not measured here)",
      o.short_run ? " --quick" : "", h.torch, o.cuda_launch_us);
  nlohmann::json j;
  j["measured_cpu_us"] = m;
  j["cuda_launch_us"] = o.cuda_launch_us;
  j["host_profile"] = host_profile_json(h);
  if (!o.out.empty()) {
    write_host_profile(h, o.out);
    j["wrote"] = o.out;
  }
  // Beside it, the hosts gpemu knows, for a reader to compare.
  const auto cal = load_default_calibration();
  nlohmann::json known = nlohmann::json::object();
  for (const std::string& name : {std::string(kDefaultHost), std::string("gpemu-2022-volta")})
    if (auto k = cal->host(name)) known[name] = host_profile_json(*k);
  j["known_hosts"] = known;
  return j;
}

void print_host_bench(const nlohmann::json& r, std::ostream& out) {
  const nlohmann::json& h = r["host_profile"];
  const nlohmann::json& m = r["measured_cpu_us"];
  out << fmt::format("host: {}\nsource: {}\n\n", h["description"].get<std::string>(), h["source"].get<std::string>());
  out << fmt::format("{:<34} {:>12} {:>12}", "per op (us)", "CPU measured", "profile");
  for (const auto& [name, k] : r["known_hosts"].items()) out << fmt::format(" {:>18}", name);
  out << '\n';
  auto row = [&](const char* what, const char* measured, const char* field) {
    out << fmt::format("{:<34} {:>12.2f} {:>12.2f}", what, m[measured].get<double>(), h[field].get<double>());
    for (const auto& [name, k] : r["known_hosts"].items()) out << fmt::format(" {:>18.2f}", k[field].get<double>());
    out << '\n';
  };
  row("forward kernel (module call)", "forward_us", "forward_us");
  row("autograd backward kernel", "backward_us", "backward_us");
  row("per-parameter optimizer kernel", "optimizer_for_loop_kernel_us", "optimizer_us");
  row("foreach optimizer call", "optimizer_foreach_call_us", "foreach_us");
  row("view (no kernel)", "view_us", "view_us");
  out << "\nforward per module (us):";
  for (const auto& [name, v] : m["forward_us_per_module"].items())
    out << fmt::format(" {} {:.2f}", name, v.get<double>());
  out << '\n';
  if (r.contains("wrote"))
    out << fmt::format("\nwrote {}: give it to predict, train or analyze as --host {}\n", r["wrote"].get<std::string>(),
                       r["wrote"].get<std::string>());
}

}  // namespace gpemu
