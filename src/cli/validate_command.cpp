// `gpemu validate`: the calibrated analytical model (never the profiles
// themselves) against every measured row of a profile folder.
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "common/atomic_file.h"
#include "common/output_path.h"
#include "cost/step_times.h"
#include "cost/validation_json.h"
#include "gpemu/calibration.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu::cli {
namespace {

struct ValidateArgs {
  std::string profiles, plot, points, calibration, step_times;
  bool json = false, no_memory = false, legacy_hardtanh = false, nearest = false;
};

std::shared_ptr<const Calibration> calibration_for(const ValidateArgs& a) {
  return a.calibration.empty() ? load_default_calibration()
                               : std::make_shared<const Calibration>(Calibration::load(a.calibration));
}

// Published step times: every row's stated program, predicted by the
// analytical model (docs/validation.md, "Step times").
void run_step_times(const ValidateArgs& a) {
  const std::vector<StepTimeRow> rows = read_step_times(a.step_times);
  StepTimeOptions o;
  o.nearest = a.nearest;
  const StepTimeReport r = validate_step_times(rows, calibration_for(a), o);
  if (!a.points.empty()) {
    std::ofstream out(a.points, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(fmt::format("--points {}: cannot write the file", a.points));
    out << "line,gpu,model,zoo_model,precision,batch_size,seq_len,fit,measured_ms,predicted_ms,error_pct\n";
    for (const StepTimePoint& p : r.points)
      out << fmt::format("{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.2f}\n", p.row.line, p.row.gpu, p.row.model,
                         p.program.zoo_model, p.row.precision, p.row.batch_size, p.row.seq_len,
                         to_string(p.program.fit), p.measured_ms, p.predicted_ms, p.signed_pct());
  }
  if (a.json) {
    nlohmann::json j = step_time_json(r);
    j["step_times"] = a.step_times;
    j["nearest"] = a.nearest;
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format(
      "gpemu validate: predictions of the analytical model (calibration: {}) against the "
      "published step times of {}{}\n",
      a.calibration.empty() ? default_calibration_path().string() : a.calibration, a.step_times,
      a.nearest ? " (rows gpemu cannot express: with the nearest program it has)" : "");
  std::cout << "(APE = |predicted - measured| / measured of one step, forward + backward + amortised optimizer "
               "update)\n\n";
  print_step_times(r, std::cout);
}

void run_validate(const ValidateArgs& a) {
  if (a.profiles.empty() == a.step_times.empty())
    throw InputError("give --profiles DIR (measured profiles) or --step-times CSV (published step times), one of them");
  if (!a.step_times.empty()) {
    if (!a.plot.empty()) throw InputError("--plot works with --profiles only");
    run_step_times(a);
    return;
  }
  if (a.nearest) throw InputError("--nearest works with --step-times only");
  if (!a.plot.empty()) check_output_path(a.plot, "--plot");
  if (!a.points.empty()) check_output_path(a.points, "--points");
  const ProfileDatabase db = ProfileDatabase::load(a.profiles);
  print_warnings(db.warnings());
  std::shared_ptr<const Calibration> cal = calibration_for(a);
  ValidationOptions o;
  o.memory = !a.no_memory;
  o.legacy_inplace_hardtanh = a.legacy_hardtanh;
  o.keep_points = !a.plot.empty() || !a.points.empty();
  const ValidationReport r = validate(db, cal, o);
  if (!a.plot.empty()) {
    write_file_atomically(a.plot, validation_svg(r), "--plot");
  }
  if (!a.points.empty()) {
    std::string out = "gpu,model,phase,batch_size,measured,predicted,ape_pct\n";
    for (const ValidationPoint& p : r.points)
      out += fmt::format("{},{},{},{},{:.6g},{:.6g},{:.3f}\n", p.gpu, p.model, to_string(p.phase), p.batch_size,
                         p.measured, p.predicted, p.ape_pct());
    write_file_atomically(a.points, out, "--points");
  }
  if (a.json) {
    nlohmann::json j = validation_json(r);
    j["profiles"] = a.profiles;
    if (!a.plot.empty()) j["plot"] = a.plot;
    if (!a.points.empty()) j["points"] = a.points;
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format(
      "gpemu validate: predictions of the analytical model (calibration: {}) against the "
      "measured rows of {}\n",
      a.calibration.empty() ? default_calibration_path().string() : a.calibration, a.profiles);
  std::cout << "(APE = |predicted - measured| / measured; transfer = PCIe model for the host memory measured; "
               "peak_memory = model-zoo allocator replay)\n\n";
  print_validation(r, std::cout);
  if (!a.plot.empty()) std::cout << "\nplot: " << a.plot << '\n';
  if (!a.points.empty()) std::cout << "points: " << a.points << '\n';
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto a = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Compare gpemu's predictions (calibrated analytical model, PCIe and memory models) with measured profiles");
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)");
  cmd->add_option("--step-times", a->step_times,
                  "CSV of published step times (the format of gpu_training_step_times.csv; docs/validation.md)");
  cmd->add_flag("--nearest", a->nearest,
                "With --step-times: also compare rows gpemu cannot express, with the nearest program it has");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->add_option("--plot", a->plot, "Write an SVG of predicted vs measured iteration times, one panel per GPU");
  cmd->add_option("--points", a->points,
                  "Write every compared row as CSV (gpu,model,phase,batch_size,measured,predicted,ape_pct; seconds or "
                  "MiB)");
  cmd->add_option("--calibration", a->calibration,
                  "Calibration file to validate (default: the product's data/calibration.json)");
  cmd->add_flag("--no-memory", a->no_memory, "Skip peak memory and OOM decisions (the slow part)");
  cmd->add_flag("--legacy-hardtanh", a->legacy_hardtanh,
                "Memory replay as PyTorch < 1.10 (saved result of in-place hardtanh_)");
  cmd->callback([a] { run_validate(*a); });
}

}  // namespace gpemu::cli
