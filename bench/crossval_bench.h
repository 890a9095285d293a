// Cross-validation benchmark of the analytical cost model (`gpemu bench
// crossval`): how well the calibrated model predicts GPUs and models it was
// not calibrated on, on the shared GPEmu profiles.
//
//   in-sample          calibrate on every measured row, predict them
//   leave one GPU out  calibrate on the other GPUs (other families), predict
//                      the held-out GPU with factors derived for its family
//                      (geometric mean of the calibrated families' factors,
//                      and the nearest calibrated family, both reported)
//   leave models out   5 folds over the models sorted by name: calibrate on
//                      the other models, predict the held-out ones (no
//                      per-model correction for them) on every GPU
//   memory             the model zoo's allocator replay against the measured
//                      peak allocated memory, and OOM-decision agreement
//                      (validate(), docs/validation.md)
//
// Figures are median absolute percentage errors. Targets (issue "predictive
// cost model with a stated error"): iteration median APE <= 10% on GPUs left
// out, <= 5% on calibrated GPUs; peak memory within 10%; OOM agreement >= 95%.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace gpemu {

struct CrossvalBenchOptions {
  // GPEmu or gpemu profiles; empty: <data dir>/../shared/reference/gpemu-profiles.
  std::string profiles;
  // The published step times (docs/validation.md); empty:
  // <data dir>/../shared/reference/published/gpu_training_step_times.csv,
  // skipped with a note when that file is absent.
  std::string step_times;
  // gpemu's own measured steps of a GPU family without profiles (the H200
  // rows); empty: <data dir>/../shared/reference/measured/h200-2026-12-04/
  // steps_as_step_times.csv, skipped with a note when absent. Their family
  // and host are fitted on them (fit_step_times), each row and each model
  // family's rows left out.
  std::string measured_steps;
  int model_folds = 5;
  int rounds = 3;  // calibration rounds (family factors <-> model corrections)
  double robust_scale =
      0.05;            // pseudo-Huber scale of the calibration (CalibrationOptions::robust_scale; 0: least squares)
  bool memory = true;  // also validate peak memory and OOM decisions
  // `--per-model GPU`: also each model's signed errors on that measured GPU,
  // in-sample and with its family left out, and its measured backward /
  // forward ratio beside the other GPUs' (where a left-out error comes from).
  std::string per_model_gpu;
  // `--quick`: one calibration round, no memory validation.
  static CrossvalBenchOptions quick() {
    CrossvalBenchOptions o;
    o.rounds = 1;
    o.memory = false;
    return o;
  }
  // The inputs of `given` (its files), kept when --quick replaces the rest.
  void keep_inputs(const CrossvalBenchOptions& given) {
    profiles = given.profiles;
    measured_steps = given.measured_steps;
    step_times = given.step_times;
    per_model_gpu = given.per_model_gpu;
  }
};

// Returns {"benchmark": "crossval", "profiles", "rows", "seconds",
//   "in_sample": {"overall": E, "per_gpu": {gpu: E}},
//   "gpu_left_out": {"geometric_mean": {"overall": E, "per_gpu": {...}},
//                    "nearest": {...}, "rule_used": "geometric_mean"},
//   "models_left_out": {"overall": E, "folds": [{"models": [...], "errors": E,
//                       "per_gpu": {...}}]},
//   "memory": {"peak_memory": stats, "oom_agreement_pct", "oom_exact_pct"},
//   "step_times": {"file", "rows", "gpu_left_out": {gpu: {"family", "rows",
//                  "median_ape_pct", "median_ape_in_sample_pct", "within", "left_out"}},
//                  "gpu_left_out_median_ape_pct", "source_left_out": {source: {"rows",
//                  "median_ape_pct", "within"}}} (or {"skipped": why}),
//   "per_model" (with --per-model): {"gpu", "rule", "models": {model:
//                {"in_sample_forward_pct", "in_sample_backward_pct",
//                 "left_out_forward_pct", "left_out_backward_pct" (signed),
//                 "measured_backward_ratio", "other_gpus_backward_ratio": {gpu: r}}}},
//   "targets": {...}, "met": {...}}
// with E = {"forward", "backward", "iteration"} median APE %. Throws
// InputError when the profile folder is missing, or --per-model names a GPU
// without measured profiles.
nlohmann::json run_crossval_bench(const CrossvalBenchOptions& options = {});

void print_crossval_bench(const nlohmann::json& result, std::ostream& os);

}  // namespace gpemu
