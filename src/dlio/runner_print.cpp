// DLIO runner: the human-readable summary, in the shape of DLIO's [METRIC] block.
#include <fmt/format.h>

#include "dlio/runner.h"
#include "gpemu/dlio.h"

namespace gpemu::dlio {

namespace {

double num(const nlohmann::json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string text(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void data_line(std::ostream& out, const char* what, const nlohmann::json& d) {
  if (!d.is_object() || d.empty()) return;
  const bool generated = d.value("generated", false), skipped = d.value("skipped", false);
  out << fmt::format("[METRIC] {} data: {} files, {} samples, {:.3f} GB in {} ({})\n", what, d.value("files", 0),
                     d.value("samples", 0), num(d, "bytes") / 1e9, text(d, "folder"),
                     generated ? fmt::format("generated in {:.2f} s", num(d, "seconds"))
                               : (skipped ? "already generated, skipped" : "existing"));
}

}  // namespace

void print_dlio_epoch(const nlohmann::json& e, std::ostream& out) {
  out << fmt::format("[METRIC] Epoch {}: AU {:.4f}%, {:.4f} samples/s, {:.4f} MB/s, {} steps ({} measured)\n",
                     e.value("epoch", 0), num(e, "au_pct"), num(e, "samples_per_s"), num(e, "mb_per_s"),
                     e.value("steps", 0), e.value("measured_steps", 0));
}

void print_dlio_result(const nlohmann::json& r, std::ostream& out) {
  const std::string rule = "[METRIC] ==========================================================\n";
  out << rule;
  out << fmt::format("[METRIC] Workload: {} (model {}), {} clock, emulated GPU {}\n", text(r, "workload"),
                     text(r, "model"), text(r, "clock"), text(r, "gpu"));
  if (r.contains("generation")) {
    const auto& g = r["generation"];
    if (g.contains("train")) data_line(out, "Training", g["train"]);
    if (g.contains("eval")) data_line(out, "Evaluation", g["eval"]);
  }
  if (!r.contains("au_pct")) {
    if (r.value("epochs", -1) != 0 || !r.contains("checkpoints")) {
      out << "[METRIC] Data generation only (workflow.train is false)\n";
    }
  }
  out << fmt::format("[METRIC] Number of Simulated Accelerators: {}\n", r.value("gpus", 1));
  if (r.contains("au_pct")) {
    const auto& d = r["dataset"];
    out << fmt::format("[METRIC] Dataset: {} files, {} samples, {:.3f} GB ({})\n", d.value("files", 0),
                       d.value("samples", 0), num(d, "bytes") / 1e9, text(d, "format"));
    const std::string source = text(r, "step_time_source");
    out << fmt::format("[METRIC] Step time: {:.6g} s per step ({})\n", num(r, "step_time_s"),
                       source == "cost_model" ? "gpemu cost model" : "train.computation_time");
    out << fmt::format("[METRIC] Epochs: {}, steps per epoch: {} per rank\n", r.value("epochs", 0),
                       r.value("steps_per_epoch", 0));
    out << fmt::format("[METRIC] Training Accelerator Utilization [AU] (%): {:.4f} ({:.4f})\n", num(r, "au_pct"),
                       num(r, "au_stdev_pct"));
    out << fmt::format("[METRIC] Training Throughput (samples/second): {:.4f}\n", num(r, "samples_per_s"));
    out << fmt::format("[METRIC] Training I/O Throughput (MB/second): {:.4f}\n", num(r, "mb_per_s"));
    const bool measured = r.value("measured_steps", 0) > 0;
    out << fmt::format("[METRIC] train_au_meet_expectation: {} (threshold {:.1f}%)\n",
                       !measured                   ? "undefined, no step measured"
                       : r.value("au_pass", false) ? "success"
                                                   : "fail",
                       num(r, "au_threshold_pct"));
    out << fmt::format(
        "[METRIC] Measured: compute {:.4f} s of {:.4f} s (emulated compute {:.4f} s, data wait {:.4f} s)\n",
        num(r, "compute_s"), num(r, "total_s"), num(r, "emulated_compute_s"), num(r, "load_wait_s"));
    if (r.contains("per_epoch")) {
      for (const auto& e : r["per_epoch"]) print_dlio_epoch(e, out);
    }
    if (r.contains("eval")) {
      const auto& e = r["eval"];
      out << fmt::format("[METRIC] Eval Accelerator Utilization [AU] (%): {:.4f} ({:.4f})\n", num(e, "au_pct"),
                         num(e, "au_stdev_pct"));
      out << fmt::format("[METRIC] Eval Throughput (samples/second): {:.6f}\n", num(e, "samples_per_s"));
      out << fmt::format("[METRIC] Eval Throughput (MB/second): {:.6f}\n", num(e, "mb_per_s"));
    }
  }
  if (r.contains("checkpoints")) {
    for (const auto& c : r["checkpoints"]) {
      out << fmt::format("[METRIC] Checkpoint after epoch {} step {}: {:.3f} GB in {:.3f} s, {:.3f} GB/s",
                         c.value("epoch", 0), c.value("step", 0), num(c, "bytes") / 1e9, num(c, "write_s"),
                         num(c, "write_gb_per_s"));
      if (c.contains("read_gb_per_s")) out << fmt::format(", read back {:.3f} GB/s", num(c, "read_gb_per_s"));
      out << "\n";
    }
    if (r.contains("checkpoint_gb_per_s")) {
      out << fmt::format("[METRIC] Checkpoint write throughput (GB/second): {:.4f}\n", num(r, "checkpoint_gb_per_s"));
    }
  }
  out << fmt::format("[METRIC] Wall time {:.2f} s, emulated time {:.4f} s\n", num(r, "wall_s"), num(r, "emulated_s"));
  if (r.contains("stopped"))
    out << fmt::format("[METRIC] Stopped early ({}): the figures above cover the epochs every rank finished\n",
                       text(r, "stopped"));
  out << rule;
  if (r.contains("warnings")) {
    for (const auto& w : r["warnings"]) out << "warning: " << w.get<std::string>() << "\n";
  }
}

}  // namespace gpemu::dlio
