// Timing-fidelity benchmark under the real clock (`gpemu bench timing`).
//
// Runs chains of back-to-back emulated kernels on one stream of an emulated
// GPU with the host synchronizing after each (launch_kernel then synchronize,
// as a PyTorch loop that calls .item() every step), and measures how closely
// wall-clock time follows the emulated timeline:
//   drift_pct          (wall elapsed - emulated end) / emulated end, in %,
//                      both measured from the chain's start;
//   lateness           wall time when synchronize returned minus the
//                      operation's emulated end (p50, p99, max, in us);
//   wall_vs_nominal_pct  (wall elapsed - ops x duration) / (ops x duration):
//                      what the host loop itself adds (launch, wake-up,
//                      bookkeeping); the emulated timeline contains it too,
//                      as a real GPU's would.
// For comparison it runs the same chain the way the GPEmu prototype did, as
// relative sleeps: std::this_thread::sleep_for(d) per operation and, unless
// disabled, relative clock_nanosleep (what Python's time.sleep does), both
// with the process's default timer slack. Their drift is measured against
// ops x duration and their lateness per sleep against (start of sleep + d).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpemu/time.h"

namespace gpemu {

struct TimingBenchOptions {
  // Operations per chain (each kernel duration runs its own chains).
  // Default 10,000: about 33 s in all with the defaults below (1 ms chains
  // 3 x 10 s, 100 us chains 3 x 1 s). quick() uses 1,000 (about 3.3 s).
  int ops = 10000;
  // Kernel durations to measure, each reported under its label ("1ms", "100us").
  std::vector<Duration> durations = {kMillisecond, 100 * kMicrosecond};
  // Operations run before each chain and not counted (first-touch effects).
  int warmup_ops = 20;
  // Also run the relative-sleep chains (GPEmu's way).
  bool sleep_chain = true;      // std::this_thread::sleep_for
  bool nanosleep_chain = true;  // clock_nanosleep relative, as Python's time.sleep
  // The real clock's spin window (RealClockOptions::spin_window).
  Duration spin_window = 100 * kMicrosecond;
  // Emulated GPU (catalog name).
  std::string gpu = "v100";

  // The `--quick` settings: 1,000 operations per chain.
  static TimingBenchOptions quick() {
    TimingBenchOptions o;
    o.ops = 1000;
    return o;
  }
};

// "1ms", "100us", "250ns": the label a duration is reported under.
std::string duration_label(Duration d);

// Throws InputError for ops < 1, a non-positive duration, a negative spin
// window or an unknown GPU name. Runs the benchmark (wall time: about
// 3.3 x ops x sum(durations) with both sleep chains). Returns
//   {"benchmark": "timing", "clock": "real", "gpu": ..., "ops": N,
//    "warmup_ops": ..., "spin_window_us": ..., "sleep_chain_timer_slack_ns": ...,
//    "hardware_threads": ..., "load_avg_1m_start": ..., "load_avg_1m_end": ...,
//    "targets": {"drift_pct": 0.01, "p99_lateness_us": 50},
//    "labels": ["1ms", "100us"],   (durations in the order given)
//    "results": {"1ms": {"kernel_us", "drift_pct", "p50_lateness_us",
//        "p99_lateness_us", "max_lateness_us", "mean_lateness_us", "wall_s",
//        "emulated_s", "wall_vs_nominal_pct", "host_cpu_pct",
//        "sleep_chain_drift_pct", "sleep_chain_p50_lateness_us",
//        "sleep_chain_p99_lateness_us", "sleep_chain_max_lateness_us",
//        "sleep_chain_final_lag_ms", "nanosleep_chain_drift_pct",
//        "nanosleep_chain_p50_lateness_us", "nanosleep_chain_p99_lateness_us",
//        "nanosleep_chain_max_lateness_us", "nanosleep_chain_final_lag_ms"},
//      "100us": {...}}}
// Sleep-chain keys are absent when that chain is disabled.
nlohmann::json run_timing_bench(const TimingBenchOptions& options = {});

// A small aligned table of the figures above.
void print_timing_bench(const nlohmann::json& result, std::ostream& os);

}  // namespace gpemu
