// Validation of gpemu's predictions against measured profiles: for every
// measured row, the calibrated analytical model's forward, backward and
// iteration (forward + backward) times, the PCIe model's transfer time and
// the zoo memory model's peak allocated memory, compared with the
// measurement; and whether gpemu's "does not fit" decision agrees with where
// the measurements stop (the first extrapolated batch size: OOM evidence).
// The profiles are never replayed here: predictions come from the models only.
// `gpemu validate` prints this; docs/validation.md has the figures.
//
// Statistics (APE = |predicted - measured| / measured x 100):
//   median: the middle value of the sorted APEs (mean of the two middle ones
//           for an even count); p90: nearest rank, the ceil(0.9 n)-th
//           smallest; mean: arithmetic mean.
//
// Thread safety: free functions on immutable inputs.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/cost/analytical_model.h"
#include "gpemu/cost/calibration.h"
#include "gpemu/cost/cost_model.h"
#include "gpemu/cost/profile.h"
#include "gpemu/device/device.h"

namespace gpemu {

enum class ValidationPhase { Forward, Backward, Iteration, Transfer, PeakMemory };
inline constexpr int kValidationPhaseCount = 5;
// "forward", "backward", "iteration", "transfer", "peak_memory".
std::string_view to_string(ValidationPhase p);

// One compared value.
struct ValidationPoint {
  std::string gpu, model;
  ValidationPhase phase = ValidationPhase::Forward;
  int batch_size = 0;
  double measured = 0, predicted = 0;  // seconds, or MiB for peak_memory
  double ape_pct() const;              // |predicted - measured| / measured x 100
};

// Per-op times of a gpemu profile (Profile::ops) beside the analytical
// model's per-op predictions for the same step, summed per phase and kind:
// conv, matmul, or memory (every other class with a kernel: memory-bound in
// the model). Views are left out (no kernel).
struct OpClassPoint {
  std::string gpu, model;
  int batch_size = 0;
  std::string phase;                          // forward, loss, backward, optimizer (zero_grad included)
  std::string kind;                           // conv, matmul, memory
  std::string timer;                          // the profile's op_timer: "cuda", or "cpu" (CPU time, not a GPU's)
  double measured_calls = 0, measured_s = 0;  // per step: sum of calls x seconds per call
  int predicted_ops = 0;                      // kernels of the model's program
  double predicted_s = 0;                     // sum of op_kernel_seconds x the phase correction
};
// The points of one profile's ops at every batch size they were measured at
// (none without ops).
std::vector<OpClassPoint> op_class_points(const Profile& profile, const OpProgram& program, const GpuPeaks& peaks,
                                          const FamilyFactors& f, const ModelCorrection& correction);

struct ErrorStats {
  int n = 0;
  double mean_ape_pct = 0, median_ape_pct = 0, p90_ape_pct = 0, max_ape_pct = 0;
  // Signed median of (predicted / measured - 1) x 100: the bias.
  double median_bias_pct = 0;
};
// Statistics of a set of APEs (see the top of this file). n = 0: all zero.
ErrorStats error_stats(const std::vector<double>& ape_pct, const std::vector<double>& signed_pct = {});

// OOM decision of one (GPU, model) pair.
struct OomCheck {
  std::string gpu, model;
  std::optional<int> measured_oom_batch;  // first tail batch, nullopt: everything measured fit
  int measured_last_batch = 0;            // largest measured batch size
  std::int64_t predicted_max_batch = 0;   // gpemu's largest batch that fits
  int batches_checked = 0;                // batch sizes 1..grid compared
  int batches_agreeing = 0;
  bool exact = false;  // predicted max batch == measured_oom_batch - 1 (or >= grid when none)
  // Tolerances on the largest batch that fits, M = measured_oom_batch - 1:
  // |predicted - M| <= 2 batches, <= 2% of M. Without an OOM point (M >= grid):
  // predicted >= grid - 2, >= 98% of grid.
  bool within_2_batches = false;
  bool within_2pct = false;
  // For the margin fit (ValidationOptions::oom_fit): the card's capacity
  // before the margin (zoo::oom_capacity(gpu, 0)), and the least capacity at
  // which the replay fits the measured largest batch M and M + 1 (0: not
  // computed; need_next_bytes stays 0 without an OOM point).
  std::uint64_t raw_capacity_bytes = 0;
  std::uint64_t need_last_bytes = 0, need_next_bytes = 0;
};

// The workspace/fragmentation margin (kDefaultWorkspaceMargin)
// refitted on the profiles being validated, in-sample and leaving one GPU out.
// A pair counts as exact for margin m when
//   need_last_bytes <= raw_capacity_bytes / (1 + m) < need_next_bytes
// (the boundary criterion: the measured largest batch fits, the next does not).
struct OomMarginFit {
  bool computed = false;
  int pairs = 0;
  double best_margin = 0;           // middle of the widest best range
  double best_lo = 0, best_hi = 0;  // that range
  int exact_at_best = 0;            // pairs exact at best_margin (in-sample)
  double used_margin = 0;           // ValidationOptions::oom_margin
  int exact_at_used = 0;            // pairs exact at used_margin
  struct Fold {
    std::string gpu;    // held out
    double margin = 0;  // fitted on the other GPUs
    int pairs = 0, exact = 0;
  };
  std::vector<Fold> held_out;  // one per GPU
  int exact_held_out = 0;      // pooled over the folds
};

struct ValidationOptions {
  AnalyticalOptions model;
  // Compare peak memory and OOM decisions with the zoo memory model (replays
  // through the caching allocator; the slow part).
  bool memory = true;
  // The batch-size grid for OOM agreement: 1..max(oom_grid, last measured).
  // GPEmu profiled batch sizes up to 256.
  int oom_grid = 256;
  // Keep the points (for plots and worst cases).
  bool keep_points = true;
  // How many worst cases per phase to report.
  int worst_cases = 5;
  // Memory replay: PyTorch < 1.10's saved result of in-place hardtanh_
  // (zoo_memory.h ReplayOptions::legacy_inplace_hardtanh).
  bool legacy_inplace_hardtanh = false;
  // OOM decisions: the workspace/fragmentation margin of zoo::oom_capacity,
  // and whether grads and momentum exist before the first iteration
  // (ReplayOptions::warm_start: GPEmu's profiler ran batch sizes 1..256 in one
  // process per model, emptying the cache in between).
  double oom_margin = kDefaultWorkspaceMargin;
  bool oom_warm_start = true;
  // Refit the margin on these profiles and cross-check it leaving one GPU out
  // (OomMarginFit; about two more replays per pair and bisection step).
  bool oom_fit = true;
};

struct ValidationReport {
  std::string calibration_source;
  std::map<std::string, std::map<ValidationPhase, ErrorStats>> per_gpu;    // gpu -> phase -> stats
  std::map<std::string, std::map<ValidationPhase, ErrorStats>> per_model;  // model -> phase -> stats
  std::map<ValidationPhase, ErrorStats> overall;
  std::map<ValidationPhase, std::vector<ValidationPoint>> worst;  // largest APE first
  std::vector<OomCheck> oom;
  double oom_agreement_pct = 0;         // agreeing batch decisions / checked, all pairs
  double oom_exact_pct = 0;             // pairs whose predicted boundary is exact
  double oom_within_2_batches_pct = 0;  // pairs within 2 batches (OomCheck)
  double oom_within_2pct_pct = 0;       // pairs within 2%
  // Median of (predicted / measured - 1) x 100 of the largest batch, over
  // pairs with an OOM point: the bias.
  double oom_median_error_pct = 0;
  OomMarginFit oom_fit;
  std::vector<ValidationPoint> points;   // when keep_points
  std::vector<std::string> skipped;      // profiles not validated, and why
  std::vector<OpClassPoint> op_classes;  // profiles with per-op times (op_class_points)
};

// Validates `calibration` (never the profiles themselves) on every measured
// row of `profiles`.
ValidationReport validate(const ProfileDatabase& profiles, std::shared_ptr<const Calibration> calibration,
                          const ValidationOptions& options = {});

// Tables for people: per GPU, per model, overall, worst cases, OOM.
void print_validation(const ValidationReport& report, std::ostream& out);
// An SVG of predicted vs measured iteration times, one log-log panel per GPU
// with the y = x line (hand-written SVG, no dependencies).
std::string validation_svg(const ValidationReport& report);

// ---- cross-validation -------------------------------------------------------------

// Median APEs of `calibration`'s predictions of measured times: forward and
// backward over their rows, iteration over the batch sizes measured in both.
PhaseErrors time_errors(const Calibration& calibration, const std::vector<TimeSample>& samples,
                        const AnalyticalOptions& options = {});

struct CrossValidationOptions {
  CalibrationOptions calibration;
  int model_folds = 5;  // models sorted by name, model i in fold i % model_folds
  bool gpu_out = true, models_out = true;
};

struct ModelFold {
  std::vector<std::string> models;  // held out
  PhaseErrors errors;               // on the held-out models, all GPUs
  std::map<std::string, PhaseErrors> per_gpu;
};

// One (GPU, model) of the cross-validation: signed median errors, % (+:
// predicted slower than measured), per phase, in-sample and with the GPU's
// family left out (the calibration's fallback rule), and the measured
// backward / forward time ratio (median over the batch sizes with both).
struct ModelBias {
  double in_forward = 0, in_backward = 0, out_forward = 0, out_backward = 0;
  double measured_backward_ratio = 0;
};

struct CrossValidation {
  Calibration full;                              // calibrated on every sample
  std::map<std::string, PhaseErrors> in_sample;  // gpu -> errors of the full calibration
  PhaseErrors in_sample_overall;
  // Leave one GPU out: calibrate on the others (model corrections included),
  // predict the held-out GPU with its family's factors derived by each rule.
  std::map<FallbackRule, std::map<std::string, PhaseErrors>> gpu_left_out;  // rule -> gpu -> errors
  std::map<FallbackRule, PhaseErrors> gpu_left_out_overall;                 // rule -> pooled rows
  std::map<std::string, std::map<std::string, ModelBias>> per_model;        // gpu -> model -> bias
  std::vector<ModelFold> model_folds;
  PhaseErrors models_left_out_overall;                        // pooled rows
  std::map<std::string, PhaseErrors> models_left_out_family;  // model family -> pooled
  double seconds = 0;
};

CrossValidation cross_validate(const std::vector<TimeSample>& samples, const CrossValidationOptions& options = {});

// Stores the cross-validation's figures in the calibration as its expected
// errors: in_sample per family, gpu_left_out per family (by the
// calibration's fallback rule) and overall, models_left_out per model family.
void apply_expected_errors(Calibration& calibration, const CrossValidation& cv);

}  // namespace gpemu
