// Published training step times of real GPUs as evidence for the analytical
// model: the CSV format of ../shared/reference/published/gpu_training_step_times.csv
// (its columns are documented beside it, gpu_training_step_times.md), read
// into rows that state the measured program, each mapped onto the program
// gpemu can run (a zoo model, a ProgramVariant, an optimizer), and compared
// with the analytical model's prediction (`gpemu validate --step-times CSV`).
//
// A row is one of:
//   Exact        gpemu runs the program the row states;
//   Approximated gpemu runs a program that differs in ways the row lists
//                (e.g. LAMB run as Adam's kernels, fused kernels as eager
//                ones); such rows are compared and counted;
//   Unsupported  the program is not one gpemu can express (a model or task
//                the zoo lacks, sparse embedding gradients, an unknown GPU):
//                listed with the reason, never compared unless
//                StepTimeOptions::nearest asks for the nearest program.
//
// Thread safety: free functions on immutable inputs.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpemu/calibration.h"
#include "gpemu/cost_model.h"

namespace gpemu {

// One row of the CSV, as written (enumerated columns lower-cased).
struct StepTimeRow {
  int line = 0;  // 1-based line of the file
  std::string gpu, model, precision;
  int batch_size = 0;
  std::int64_t seq_len = 0;  // 0: empty (no sequence)
  std::string task, optimizer, matmul_precision, conv_precision, amp, memory_format, attention, fused_ops,
      mlm_positions, includes_h2d, includes_loss_and_optimizer;
  int micro_steps = 1;  // 0: "unknown"
  std::string confidence;
  double published_iteration_ms = 0;
  std::string published_figure, source, notes;
  // "owner/repo" of `source` (the text before '@'), e.g. "NVIDIA/DeepLearningExamples".
  std::string source_repo() const;
};

// Reads the CSV (RFC 4180 quoting; the header names the columns, in any
// order, extra columns ignored). Throws InputError naming the file, line and
// column for a missing column, a malformed number or an enumerated value the
// format does not define (the message lists the accepted values).
std::vector<StepTimeRow> read_step_times(const std::filesystem::path& file);

enum class RowFit { Exact, Approximated, Unsupported };
std::string_view to_string(RowFit f);  // "exact", "approximated", "unsupported"

// How gpemu runs a row's program.
struct RowProgram {
  RowFit fit = RowFit::Unsupported;
  std::string gpu_id;     // catalog id ("" when the GPU is unknown)
  std::string zoo_model;  // the zoo model that runs the row's task
  AnalyticalOptions options;
  // The host profile that issued the row's steps (Calibration::host), when
  // its source names one; "" keeps the GPU family's launch factors.
  std::string host;
  std::vector<std::string> approximations;  // what differs (Approximated)
  std::vector<std::string> unsupported;     // why not (Unsupported)
  // The nearest program gpemu has for an Unsupported row (StepTimeOptions::nearest);
  // false when not even that exists (unknown GPU or model).
  bool nearest_available = false;
};
// Maps a row onto gpemu's programs (see the top of this file).
RowProgram row_program(const StepTimeRow& row);

struct StepTimeOptions {
  // Also compare Unsupported rows, with the nearest program gpemu has (as a
  // user would get from `gpemu predict` with the row's model, batch and
  // precision): how far off gpemu is on them today.
  bool nearest = false;
  int worst_cases = 8;
};

// One compared row.
struct StepTimePoint {
  StepTimeRow row;
  RowProgram program;
  std::string family;  // zoo model family ("cnn", "transformer", "recommender", "unet")
  double measured_ms = 0, predicted_ms = 0;
  std::string precision_kind;             // evidence_precision of its program ("amp")
  std::string kind;                       // evidence_kind of its program ("cnn x amp")
  std::optional<ExpectedError> expected;  // the prediction's stated error
  // The same without the published step times' evidence (profiles only).
  std::optional<ExpectedError> expected_profiles;
  double signed_pct() const { return (predicted_ms / measured_ms - 1) * 100; }
  double ape_pct() const;
  // Whether the actual error is within the stated iteration error.
  bool covered() const;
};

struct StepTimeReport {
  std::string calibration_source;
  std::vector<StepTimePoint> points;                             // compared rows, file order
  std::vector<std::pair<StepTimeRow, RowProgram>> not_compared;  // Unsupported rows (without nearest)
  ErrorStats overall;
  // by GPU, by model family, by CSV precision, by (family x precision), by
  // source repository, by how the row is expressed (exact / approximated / unsupported)
  std::map<std::string, ErrorStats> per_gpu, per_family, per_precision, per_group, per_source, per_fit;
  int covered = 0, with_expected = 0;  // rows within their stated error / with one
  // Rows within the error that would be stated for them if their own row
  // were not among the published step times (leave one row out): the
  // stated error's coverage on rows it has not seen.
  int covered_leave_one_out = 0;
  // The same with a whole GPU's rows, or a whole source's, left out of the
  // evidence: per GPU / source repository, its rows with a stated error and
  // how many fall within the error stated from the other GPUs' (sources') rows.
  struct Coverage {
    int rows = 0, covered = 0;
  };
  std::map<std::string, Coverage> gpu_left_out, source_left_out;
  int beyond_2x = 0;  // rows predicted > 2x or < 0.5x the measurement
};

// Predicts every row gpemu can express (and with options.nearest the others)
// with `calibration` and compares.
StepTimeReport validate_step_times(const std::vector<StepTimeRow>& rows, std::shared_ptr<const Calibration> calibration,
                                   const StepTimeOptions& options = {});

// Calibration::program_errors from a report: per kind of program, its rows,
// the error that covers kEvidenceQuantile of them, and their median.
std::map<std::string, ProgramEvidence> program_evidence(const StepTimeReport& report);

// Predicted iteration (forward + backward) milliseconds of one row's program.
double predict_row_ms(const RowProgram& program, int batch_size, const Calibration& calibration);

// ---- fitting a family and its host on step times -------------------------------

struct StepTimeFitOptions {
  double prior = 0.1;  // ridge weight per log factor towards its start
  // pseudo-Huber scale of the log errors: rows within about 15 % are fitted
  // by least squares, farther ones linearly. (0.05, calibrate's, fitted the
  // median and left the worst H200 rows at -27 and +26 %; docs/host.md.)
  double robust_scale = 0.15;
  int max_iterations = 60;
  int min_rows = 8;               // no family is fitted on fewer rows
  bool refit_calibrated = false;  // also rows of families with profiles
  std::string source;             // the file, for the origin strings
};
struct StepTimeFit {
  Calibration calibration;  // the base with the family, its host and its in-sample error
  std::string family, host;
  struct Row {
    int line = 0;
    std::string model, precision, family;
    double measured_ms = 0, in_sample_ms = 0, left_out_ms = 0, family_left_out_ms = 0;
  };
  std::vector<Row> rows;  // every fitted row: in sample, left out alone, its model family left out
  double in_sample_median_pct = 0, leave_one_out_median_pct = 0, family_left_out_median_pct = 0;
};
// Fits the GPU-side factors (conv, conv bytes, memory, backward; matmul
// pinned) of the one GPU family without profiles among `rows`, and the host
// profile their source names (RowProgram::host), on the rows of that family,
// starting from `base` (its fallback factors, its host or the built-in one).
// Every row is also predicted by a fit without it and by a fit without its
// model family's rows. Throws InputError when no row, more than one family
// or host, or fewer than options.min_rows rows of at least two models qualify.
StepTimeFit fit_step_times(const Calibration& base, const std::vector<StepTimeRow>& rows,
                           const StepTimeFitOptions& options = {});

// The fitted factors and host, and every row in sample and left out.
void print_step_time_fit(const StepTimeFit& fit, std::ostream& out);

nlohmann::json step_time_json(const StepTimeReport& report);
// Tables for people: overall, per GPU, per model family, per precision, per
// (family x precision), per source, worst rows, rows not compared and why.
void print_step_times(const StepTimeReport& report, std::ostream& out);

}  // namespace gpemu
