// Calibration of the analytical model (analytical_model.h) on measured
// profiles: per GPU architecture family, the FamilyFactors that minimise the
// squared log error of forward and backward times over every measured
// (GPU, model, batch) row of that family, and per zoo model a ModelCorrection
// learned across all GPUs. Families without measurements get the factors of a
// calibrated family (see family_fallback_order). The result is
// data/calibration.json (`gpemu calibrate`), read at run time from
// data_dir(); without that file the documented defaults apply.
// docs/analytical-model.md describes the fit; docs/validation.md its errors.
//
// Thread safety: a Calibration is immutable once built; calibrate() is
// reentrant.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/cost/analytical_model.h"
#include "gpemu/cost/cost_model.h"
#include "gpemu/cost/profile.h"
#include "gpemu/host.h"

namespace gpemu {

inline constexpr std::string_view kCalibrationFormat = "gpemu-calibration/1";

// PhaseErrors and ExpectedError are in cost_model.h ("cost model").

// What published step times say of one kind of program (a model family in
// one precision, "transformer x tf32"): the absolute errors of gpemu's
// predictions for those rows (`gpemu calibrate --step-times`).
struct ProgramEvidence {
  int rows = 0;
  double p80_pct = 0;     // 80th percentile of the rows' step-time APE: the error stated for the kind
  double median_pct = 0;  // for people
  bool operator==(const ProgramEvidence&) const = default;
};
// A kind needs this many rows to state its own error; kinds with fewer take
// the widest error of those that have them.
inline constexpr int kMinEvidenceRows = 3;
// The share of a kind's rows its stated error covers.
inline constexpr double kEvidenceQuantile = 0.8;
// The q-quantile of `values` as the smallest value with at least q of them
// at or below it (the stated error covers at least that share); 0 when empty.
double covering_quantile(std::vector<double> values, double q);

// The precision a program runs its bulk in, as the published step times name
// it: "amp" (FP16 autocast), "bf16" (BF16 autocast), "half" / "half_bf16" (pure
// half, apex O2-like: another program, with evidence of its own), "tf32" (FP32
// on a card with TF32 tensor cores, with matmuls at precision "high" or, for a
// convolutional family ("cnn", "unet"), cuDNN's TF32 convolutions), else "fp32".
std::string evidence_precision(const AnalyticalOptions& o, const GpuSpec& gpu, std::string_view model_family);
// "<family> x <precision>", the key of Calibration::program_errors.
std::string evidence_kind(std::string_view model_family, std::string_view precision);

// How a family without measurements gets its factors (Calibration::finish).
enum class FallbackRule {
  Nearest,        // the first calibrated family of family_fallback_order()
  GeometricMean,  // the geometric mean of all calibrated families' factors
  // Per GPU: interpolated between the two calibrated GPUs that bracket its
  // FP32 peak (log-log; the bandwidth factors as effective GB/s, the others
  // as they are); the geometric mean outside the calibrated GPUs' span.
  Trend,
};
std::string_view to_string(FallbackRule r);  // "nearest", "geometric_mean", "trend"
// Parses those names; nullopt for anything else.
std::optional<FallbackRule> parse_fallback_rule(std::string_view name);
inline constexpr FallbackRule kFallbackRules[] = {FallbackRule::Nearest, FallbackRule::GeometricMean,
                                                  FallbackRule::Trend};

class Calibration {
 public:
  // Factors per architecture family ("Volta", ...). Every catalog family has an
  // entry once finish() ran.
  std::map<std::string, FamilyFactors> families;
  // family -> where its factors come from: "calibrated on <gpu ids>" or
  // "from <family> (no measurements)" or "defaults".
  std::map<std::string, std::string> origin;
  // Per canonical model name.
  std::map<std::string, ModelCorrection> models;
  // Families calibrated on measured profiles: the anchors of the fallback
  // rules.
  std::vector<std::string> calibrated_families;
  // Families calibrated on measured step times (cost/step_times.h,
  // fit_step_times: Hopper on the H200 rows). Calibrated, but no anchor of the
  // geometric-mean or trend rules: their factors are in the tensor-core form
  // (FamilyFactors::tensor_core_conv_efficiency), the anchors' are not.
  std::vector<std::string> step_time_families;
  // family -> the GPU ids it was calibrated on (the trend rule's anchors).
  std::map<std::string, std::vector<std::string>> calibrated_gpus;
  // GPU id -> factors of a GPU of an uncalibrated family, derived by the trend
  // rule (finish()); such a GPU uses them instead of its family's.
  std::map<std::string, FamilyFactors> gpu_factors;
  std::map<std::string, std::string> gpu_origin;
  // Expected errors (median APE %), from `gpemu bench crossval`:
  //   in_sample[family]        calibrated family, model measured
  //   gpu_left_out[family]     a family predicted from other families' factors
  //   gpu_left_out_overall     the same over all held-out GPUs
  //   models_left_out[model family ("cnn", ...)]  a model without a correction
  std::map<std::string, PhaseErrors> in_sample, gpu_left_out, models_left_out;
  std::optional<PhaseErrors> gpu_left_out_overall;
  // Errors against published step times per kind of program (evidence_kind),
  // and the file they come from; empty when calibrated without them.
  std::map<std::string, ProgramEvidence> program_errors;
  std::string program_errors_source;
  FallbackRule fallback = FallbackRule::Trend;
  // Host profiles fitted on measured step times (host.h), by name
  // ("h200-2026"), and per host the step-time sources whose rows it issued.
  std::map<std::string, HostProfile> hosts;
  // Free text: what it was fitted on, when, with which command.
  std::string source;
  int rows = 0;  // measured rows fitted

  // Factors for a GPU (its architecture family; built-in defaults for an
  // unknown family).
  const FamilyFactors& factors(const GpuSpec& gpu) const;
  // The correction of a model (identity when none).
  ModelCorrection correction(std::string_view model) const;
  bool has_correction(std::string_view model) const;
  bool is_calibrated(std::string_view family) const;
  // Whether `gpu`'s die was measured: a calibrated GPU of its family has the
  // same chip (or is that GPU). A10 (GA102) is not, its family's A100 (GA100)
  // is; without calibrated_gpus (older files) the family decides.
  bool measured_die(const GpuSpec& gpu) const;
  // The dies of a family's calibrated GPUs, for people ("GA100").
  std::string calibrated_chips(const std::string& family) const;
  std::string origin_of(std::string_view family) const;
  // Where a GPU's factors come from (its own trend entry, else its family's).
  std::string origin_of(const GpuSpec& gpu) const;

  // Fills every catalog family without factors from the fallback rule (or the
  // defaults when none is calibrated); with the trend rule also gpu_factors.
  void finish();

  // The expected error of a prediction for `model` on `gpu`: in-sample when
  // the GPU's family is calibrated and the model has a correction; the
  // models-left-out figure of the model's family when it has none; the
  // GPU-left-out figure when the family is not calibrated (the larger of the
  // two when both apply). With `precision` (evidence_precision) and program
  // errors: at least the published step times' figure for the program's kind,
  // or, for a kind with fewer than kMinEvidenceRows rows, the widest kind's.
  // nullopt when the calibration holds no validation.
  std::optional<ExpectedError> expected_error(const GpuSpec& gpu, std::string_view model,
                                              std::string_view model_family = "cnn",
                                              std::string_view precision = "") const;
  // A host profile by name: the fitted hosts above; "gpemu-2022-<family>"
  // (lower case: the launch factors of a calibrated family, the host GPEmu's
  // profiles of that family were measured in); kDefaultHost and "default"
  // (the fitted one, else built-in values of that host). nullopt otherwise.
  std::optional<HostProfile> host(std::string_view name) const;
  // The names host() accepts, for messages.
  std::vector<std::string> host_names() const;
  // The kind with the widest stated error among those with enough rows; nullptr when none.
  const std::pair<const std::string, ProgramEvidence>* widest_program_kind() const;

  // Throws InputError naming the file and field for malformed input.
  static Calibration load(const std::filesystem::path& file);
  // Writes the JSON (2-space indented) via a temporary file and rename.
  void save(const std::filesystem::path& file) const;

 private:
  void fill_trend_factors();
  void fill_sibling_factors();
};

// Built-in factors, used when data/calibration.json is missing (documented in
// docs/analytical-model.md).
Calibration default_calibration();
// A host by name (Calibration::host of the product's calibration) or, when
// `name_or_file` names no built-in host, a host profile file (host.h).
// Throws InputError naming `what` (the flag), the value and the accepted names.
HostProfile find_host(std::string_view name_or_file, std::string_view what = "--host");
// data_dir()/data/calibration.json.
std::filesystem::path default_calibration_path();
// The calibration the product uses: default_calibration_path() when it exists
// (parsed once per process), else default_calibration(). A malformed file is
// an InputError.
std::shared_ptr<const Calibration> load_default_calibration();

// Which calibrated family a family without measurements borrows from, in
// order of preference (same generation of memory system and tensor cores
// first). E.g. Turing -> Volta, Ada/Hopper/Blackwell -> Ampere.
const std::vector<std::string>& family_fallback_order(std::string_view family);
// All architecture families of the catalog, oldest first.
std::vector<std::string> catalog_families();

// ---- measurements -------------------------------------------------------------

// One measured time: GPEmu's forward or backward phase.
struct TimeSample {
  std::string gpu;    // catalog id
  std::string model;  // canonical name
  bool backward = false;
  int batch_size = 0;
  double seconds = 0;
};
// Every forward/backward row of the database (a ProfileDatabase holds measured
// rows only: GPEmu's extrapolated tails are removed when read). Profiles of
// models not in the zoo are skipped.
std::vector<TimeSample> measured_time_samples(const ProfileDatabase& profiles);

// ---- fitting -------------------------------------------------------------------

struct CalibrationOptions {
  AnalyticalOptions model;
  // Fit every measured row (false: batch sizes 1, 2, 3, 4, 6, 8, 12 and the
  // multiples of 16, which is ~8x faster and loses nothing measurable).
  bool all_rows = false;
  // Learn per-model corrections (alternating with the family factors).
  bool model_corrections = true;
  // Alternations between family factors and model corrections.
  int rounds = 3;
  // Levenberg-Marquardt iterations per fit.
  int max_iterations = 60;
  // Ridge weight pulling log corrections towards 0, in units of residuals.
  double correction_prior = 2.0;
  // Weak ridge weight pulling each log factor towards the built-in default,
  // so that a factor the data cannot see (e.g. matmul efficiency on a card
  // whose matmuls are all launch-bound) stays finite instead of running off.
  double factor_prior = 0.3;
  // Scale of the pseudo-Huber loss on the log errors (0: least squares):
  // errors beyond it count linearly, not squared (docs/analytical-model.md).
  double robust_scale = 0.05;
  // How families without measurements get factors.
  FallbackRule fallback = FallbackRule::Trend;
  // Factors set from first principles instead of fitted, by name
  // (family_factor_names()), for every fitted family. matmul_efficiency: the
  // CNN profiles cannot determine it (their few FC layers are launch- or
  // memory-bound), so it is the achievable fraction of the matmul peak that
  // large cuBLAS GEMMs reach (docs/analytical-model.md, "Matmuls").
  std::map<std::string, double> pinned = {{"matmul_efficiency", kMatmulEfficiency}};
  // Families whose factors are fixed (not fitted), e.g. for a synthetic test.
  std::map<std::string, FamilyFactors> fixed;
  // Start values for families that are fitted (default: FamilyFactors{}).
  std::map<std::string, FamilyFactors> start;
  // Used for the origin strings.
  std::string source;
};

// Fits on explicit samples (tests, cross-validation). Samples whose model is
// not in the zoo are an InputError. The result is finish()ed.
Calibration calibrate(const std::vector<TimeSample>& samples, const CalibrationOptions& options = {});
// Fits on every measured row of `profiles`.
Calibration calibrate(const ProfileDatabase& profiles, const CalibrationOptions& options = {});

// Squared log error and median APE of `calibration` on `samples` (for
// reports): n, median APE %, root mean squared log error.
struct FitQuality {
  int n = 0;
  double median_ape_pct = 0, rms_log_error = 0;
};
FitQuality fit_quality(const Calibration& calibration, const std::vector<TimeSample>& samples,
                       const AnalyticalOptions& options = {});

// Expected error of a prediction with the product's calibration
// (load_default_calibration()); the model family is read from the zoo
// ("cnn" for models not in it). The `expected_error_pct` of `gpemu predict`.
// nullopt when the calibration in use holds no validation figures (the
// built-in defaults).
std::optional<ExpectedError> expected_error(const GpuSpec& gpu, std::string_view model,
                                            std::string_view precision = "");

}  // namespace gpemu
