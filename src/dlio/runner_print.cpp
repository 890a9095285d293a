// DLIO runner: the human-readable summary, in the shape of DLIO's [METRIC] block.
#include <fmt/format.h>

#include "gpemu/dlio.h"
#include "gpemu/dlio/runner.h"

namespace gpemu::dlio {

namespace {

void data_line(std::ostream& out, const char* what, const DlioGenerated& d) {
  out << fmt::format("[METRIC] {} data: {} files, {} samples, {:.3f} GB in {} ({})\n", what, d.files, d.samples,
                     static_cast<double>(d.bytes) / 1e9, d.folder,
                     d.generated ? fmt::format("generated in {:.2f} s", d.seconds)
                                 : (d.skipped ? "already generated, skipped" : "existing"));
}

}  // namespace

void print_dlio_epoch(const DlioEpoch& e, std::ostream& out) {
  out << fmt::format("[METRIC] Epoch {}: AU {:.4f}%, {:.4f} samples/s, {:.4f} MB/s, {} steps ({} measured)\n", e.epoch,
                     e.au_pct, e.samples_per_s, e.mb_per_s, e.steps, e.measured_steps);
}

void print_dlio_result(const DlioRunRecord& r, std::ostream& out) {
  const std::string rule = "[METRIC] ==========================================================\n";
  out << rule;
  out << fmt::format("[METRIC] Workload: {} (model {}), {} clock, emulated GPU {}\n", r.workload, r.model, r.clock,
                     r.gpu);
  if (r.generated_train) data_line(out, "Training", *r.generated_train);
  if (r.generated_eval) data_line(out, "Evaluation", *r.generated_eval);
  if (r.generation_only) out << "[METRIC] Data generation only (workflow.train is false)\n";
  out << fmt::format("[METRIC] Number of Simulated Accelerators: {}\n", r.gpus);
  if (r.nodes > 1)
    out << fmt::format("[METRIC] Modelled nodes: {} of {} accelerators each, joined by {}\n", r.nodes, r.gpus / r.nodes,
                       r.network);
  if (r.train) {
    const DlioPhaseResult& t = *r.train;
    if (r.dataset) {
      const DlioDataset& d = *r.dataset;
      out << fmt::format("[METRIC] Dataset: {} files, {} samples, {:.3f} GB ({})\n", d.files, d.samples,
                         static_cast<double>(d.bytes) / 1e9, to_string(d.format));
    }
    out << fmt::format("[METRIC] Step time: {:.6g} s per step ({})\n", r.step_time_s,
                       r.step_time_source == StepTimeSource::CostModel ? "gpemu cost model" : "train.computation_time");
    out << fmt::format("[METRIC] Epochs: {}, steps per epoch: {} per rank\n", t.epochs, r.steps_per_epoch);
    out << fmt::format("[METRIC] Training Accelerator Utilization [AU] (%): {:.4f} ({:.4f})\n", t.au_pct,
                       t.au_stdev_pct);
    out << fmt::format("[METRIC] Training Throughput (samples/second): {:.4f}\n", t.samples_per_s);
    out << fmt::format("[METRIC] Training I/O Throughput (MB/second): {:.4f}\n", t.mb_per_s);
    out << fmt::format("[METRIC] train_au_meet_expectation: {} (threshold {:.1f}%)\n",
                       t.measured_steps == 0 ? "undefined, no step measured"
                       : t.au_pass           ? "success"
                                             : "fail",
                       t.au_threshold_pct);
    out << fmt::format(
        "[METRIC] Measured: compute {:.4f} s of {:.4f} s (emulated compute {:.4f} s, data wait {:.4f} s)\n",
        t.compute_s, t.total_s, t.emulated_compute_s, t.load_wait_s);
    if (t.per_epoch)
      for (const DlioEpoch& e : *t.per_epoch) print_dlio_epoch(e, out);
    if (r.eval) {
      const DlioPhaseResult& e = *r.eval;
      out << fmt::format("[METRIC] Eval Accelerator Utilization [AU] (%): {:.4f} ({:.4f})\n", e.au_pct, e.au_stdev_pct);
      out << fmt::format("[METRIC] Eval Throughput (samples/second): {:.6f}\n", e.samples_per_s);
      out << fmt::format("[METRIC] Eval Throughput (MB/second): {:.6f}\n", e.mb_per_s);
    }
  }
  for (const DlioCheckpointResult& c : r.checkpoints) {
    out << fmt::format("[METRIC] Checkpoint after epoch {} step {}: {:.3f} GB in {:.3f} s, {:.3f} GB/s", c.epoch,
                       c.step, static_cast<double>(c.bytes) / 1e9, c.write_s, c.write_gb_per_s);
    if (c.bytes_read > 0) out << fmt::format(", read back {:.3f} GB/s", c.read_gb_per_s);
    out << "\n";
  }
  if (r.checkpoint_gb_per_s)
    out << fmt::format("[METRIC] Checkpoint write throughput (GB/second): {:.4f}\n", *r.checkpoint_gb_per_s);
  out << fmt::format("[METRIC] Wall time {:.2f} s, emulated time {:.4f} s\n", r.wall_s, r.emulated_s);
  if (!r.stopped.empty())
    out << fmt::format("[METRIC] Stopped early ({}): the figures above cover the epochs every rank finished\n",
                       r.stopped);
  out << rule;
  for (const std::string& w : r.warnings) out << "warning: " << w << "\n";
}

}  // namespace gpemu::dlio
