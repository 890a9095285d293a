#include "timing_bench.h"

#include <sys/prctl.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "bench_util.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/timeline.h"

namespace gpemu {
namespace {

// The kernel's default timer slack; a Python process running GPEmu's
// time.sleep loop never changes it.
constexpr unsigned long kDefaultTimerSlackNs = 50'000;

struct ChainResult {
  double wall_ns = 0;     // elapsed wall time of the counted operations
  double target_ns = 0;   // emulated end (gpemu) or ops x duration (sleep chains)
  double nominal_ns = 0;  // ops x duration
  double cpu_ns = 0;      // CPU time of the host thread over the chain
  std::vector<double> lateness_us;
};

// Runs f on a fresh host thread, so that timer-slack changes stay there.
template <class F>
ChainResult on_own_thread(F f) {
  ChainResult r;
  std::exception_ptr error;
  std::thread t([&] {
    try {
      r = f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
  return r;
}

// gpemu: launch then synchronize on one stream; the real clock sleeps to the
// operation's absolute emulated end.
ChainResult gpemu_chain(const TimingBenchOptions& o, Duration d) {
  RealClockOptions co;
  co.spin_window = o.spin_window;
  auto clock = make_real_clock(co);
  Timeline timeline(*clock);
  Device device(timeline, find_gpu(o.gpu));
  Stream& stream = device.default_stream();
  for (int i = 0; i < o.warmup_ops; ++i) {
    stream.launch_kernel(d);
    stream.synchronize();
  }
  ChainResult r;
  r.lateness_us.reserve(static_cast<std::size_t>(o.ops));
  const std::int64_t cpu0 = bench::thread_cpu_ns();
  const Time t0 = clock->now();
  Time last_end = t0, last_wall = t0;
  for (int i = 0; i < o.ops; ++i) {
    Completion c = stream.launch_kernel(d);
    stream.synchronize();
    const Time woke = clock->now();
    const Time end = timeline.end_time(c);  // resolved at issue: O(1)
    r.lateness_us.push_back(to_us(woke - end));
    last_end = end;
    last_wall = woke;
  }
  r.cpu_ns = static_cast<double>(bench::thread_cpu_ns() - cpu0);
  r.wall_ns = static_cast<double>(last_wall - t0);
  r.target_ns = static_cast<double>(last_end - t0);
  r.nominal_ns = static_cast<double>(d) * o.ops;
  return r;
}

void sleep_relative_nanosleep(Duration d) {
  timespec req{static_cast<time_t>(d / kSecond), static_cast<long>(d % kSecond)};
  timespec rem{};
  while (clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem) == EINTR) req = rem;
}

// GPEmu's way: one relative sleep per operation.
template <class Sleep>
ChainResult sleep_chain(const TimingBenchOptions& o, Duration d, Sleep sleep) {
  prctl(PR_SET_TIMERSLACK, kDefaultTimerSlackNs, 0, 0, 0);
  for (int i = 0; i < o.warmup_ops; ++i) sleep(d);
  ChainResult r;
  r.lateness_us.reserve(static_cast<std::size_t>(o.ops));
  const std::int64_t cpu0 = bench::thread_cpu_ns();
  const std::int64_t t0 = bench::monotonic_ns();
  std::int64_t after = t0;
  for (int i = 0; i < o.ops; ++i) {
    const std::int64_t before = bench::monotonic_ns();
    sleep(d);
    after = bench::monotonic_ns();
    r.lateness_us.push_back(to_us(after - (before + d)));
  }
  r.cpu_ns = static_cast<double>(bench::thread_cpu_ns() - cpu0);
  r.wall_ns = static_cast<double>(after - t0);
  r.nominal_ns = static_cast<double>(d) * o.ops;
  r.target_ns = r.nominal_ns;
  return r;
}

// The 1-minute load average, or -1 where /proc/loadavg cannot be read. Timing
// figures mean little without the load they were taken under.
double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = -1;
  if (!(f >> l)) return -1;
  return l;
}

double drift_pct(const ChainResult& r) {
  return r.target_ns > 0 ? (r.wall_ns - r.target_ns) / r.target_ns * 100.0 : 0.0;
}

void add_sleep_figures(nlohmann::json& j, const std::string& prefix, const ChainResult& r) {
  const bench::Summary s = bench::summarize(r.lateness_us);
  j[prefix + "_drift_pct"] = drift_pct(r);
  j[prefix + "_p50_lateness_us"] = s.p50;
  j[prefix + "_p99_lateness_us"] = s.p99;
  j[prefix + "_max_lateness_us"] = s.max;
  j[prefix + "_final_lag_ms"] = (r.wall_ns - r.nominal_ns) * 1e-6;
}

}  // namespace

std::string duration_label(Duration d) {
  if (d % kMillisecond == 0) return fmt::format("{}ms", d / kMillisecond);
  if (d % kMicrosecond == 0) return fmt::format("{}us", d / kMicrosecond);
  return fmt::format("{}ns", d);
}

nlohmann::json run_timing_bench(const TimingBenchOptions& o) {
  const GpuSpec& spec = find_gpu(o.gpu);  // fail early on a bad name
  if (o.ops < 1) throw InputError(fmt::format("timing bench: ops must be at least 1, got {}", o.ops));
  for (Duration d : o.durations)
    if (d <= 0) throw InputError(fmt::format("timing bench: kernel durations must be positive, got {} ns", d));
  if (o.spin_window < 0) throw InputError("timing bench: spin window must not be negative");
  nlohmann::json out;
  out["benchmark"] = "timing";
  out["clock"] = "real";
  out["gpu"] = spec.id;
  out["ops"] = o.ops;
  out["warmup_ops"] = o.warmup_ops;
  out["spin_window_us"] = to_us(o.spin_window);
  out["sleep_chain_timer_slack_ns"] = kDefaultTimerSlackNs;
  out["hardware_threads"] = std::thread::hardware_concurrency();
  out["targets"] = {{"drift_pct", 0.01}, {"p99_lateness_us", 50.0}};
  out["load_avg_1m_start"] = load_average();
  nlohmann::json results = nlohmann::json::object();
  nlohmann::json labels = nlohmann::json::array();
  for (Duration d : o.durations) {
    labels.push_back(duration_label(d));
    nlohmann::json j;
    j["kernel_us"] = to_us(d);
    const ChainResult g = on_own_thread([&] { return gpemu_chain(o, d); });
    const bench::Summary s = bench::summarize(g.lateness_us);
    j["drift_pct"] = drift_pct(g);
    j["p50_lateness_us"] = s.p50;
    j["p99_lateness_us"] = s.p99;
    j["max_lateness_us"] = s.max;
    j["mean_lateness_us"] = s.mean;
    j["wall_s"] = g.wall_ns * 1e-9;
    j["emulated_s"] = g.target_ns * 1e-9;
    j["wall_vs_nominal_pct"] = (g.wall_ns - g.nominal_ns) / g.nominal_ns * 100.0;
    j["host_cpu_pct"] = g.wall_ns > 0 ? g.cpu_ns / g.wall_ns * 100.0 : 0.0;
    if (o.sleep_chain) {
      const ChainResult r = on_own_thread([&] {
        return sleep_chain(o, d, [](Duration x) { std::this_thread::sleep_for(std::chrono::nanoseconds(x)); });
      });
      add_sleep_figures(j, "sleep_chain", r);
    }
    if (o.nanosleep_chain) {
      const ChainResult r = on_own_thread([&] { return sleep_chain(o, d, sleep_relative_nanosleep); });
      add_sleep_figures(j, "nanosleep_chain", r);
    }
    results[duration_label(d)] = std::move(j);
  }
  out["load_avg_1m_end"] = load_average();
  out["labels"] = std::move(labels);  // the order durations were given in
  out["results"] = std::move(results);
  return out;
}

void print_timing_bench(const nlohmann::json& r, std::ostream& os) {
  os << fmt::format("timing fidelity, real clock: {} ops per chain on one stream of {}, synchronize after each\n",
                    bench::grouped(r.at("ops").get<double>()), r.at("gpu").get<std::string>());
  auto num = [](const nlohmann::json& j, const char* key) {
    return j.contains(key) ? j.at(key).get<double>() : std::nan("");
  };
  bench::Table t({"kernel", "method", "drift %", "p50 late us", "p99 late us", "max late us", "wall-nominal %"}, 2);
  for (const auto& lj : r.at("labels")) {
    const std::string label = lj.get<std::string>();
    const nlohmann::json& j = r.at("results").at(label);
    t.add_row({label, "gpemu (absolute deadlines)", bench::significant(num(j, "drift_pct"), 2),
               bench::fixed(num(j, "p50_lateness_us"), 1), bench::fixed(num(j, "p99_lateness_us"), 1),
               bench::fixed(num(j, "max_lateness_us"), 1), bench::fixed(num(j, "wall_vs_nominal_pct"), 2)});
    for (const char* p : {"sleep_chain", "nanosleep_chain"}) {
      const std::string k = p;
      if (!j.contains(k + "_drift_pct")) continue;
      const double drift = num(j, (k + "_drift_pct").c_str());
      t.add_row({"", k == "sleep_chain" ? "relative sleep_for (GPEmu)" : "relative nanosleep (time.sleep)",
                 bench::significant(drift, 3), bench::fixed(num(j, (k + "_p50_lateness_us").c_str()), 1),
                 bench::fixed(num(j, (k + "_p99_lateness_us").c_str()), 1),
                 bench::fixed(num(j, (k + "_max_lateness_us").c_str()), 1), bench::fixed(drift, 2)});
    }
  }
  t.print(os);
  for (const auto& lj : r.at("labels")) {
    const nlohmann::json& j = r.at("results").at(lj.get<std::string>());
    os << fmt::format("{}: gpemu wall {:.3f} s vs emulated {:.3f} s; host thread CPU {:.0f}% (sleep then spin)\n",
                      lj.get<std::string>(), j.at("wall_s").get<double>(), j.at("emulated_s").get<double>(),
                      j.at("host_cpu_pct").get<double>());
  }
  os << fmt::format("host: {} hardware threads, 1-min load average {:.2f} at start, {:.2f} at end\n",
                    r.at("hardware_threads").get<int>(), r.at("load_avg_1m_start").get<double>(),
                    r.at("load_avg_1m_end").get<double>());
  const auto& targets = r.at("targets");
  os << fmt::format(
      "drift: (wall - emulated end) / emulated end; lateness: wall at synchronize return - op's emulated end.\n"
      "For relative sleeps the emulated end is ops x duration and lateness is per sleep. "
      "Targets: drift < {}%, p99 lateness < {} us.\n",
      targets.at("drift_pct").get<double>(), targets.at("p99_lateness_us").get<double>());
}

}  // namespace gpemu
