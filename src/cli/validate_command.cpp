// `gpemu validate`: the calibrated analytical model (never the profiles
// themselves) against every measured row of a profile folder.
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gpemu/calibration.h"
#include "gpemu/common/atomic_file.h"
#include "gpemu/common/output_path.h"
#include "gpemu/error.h"
#include "gpemu/profile.h"
#include "gpemu/validation.h"

namespace gpemu::cli {
namespace {

struct ValidateArgs {
  std::string profiles, plot, points, calibration;
  bool json = false, no_memory = false, legacy_hardtanh = false;
};

void run_validate(const ValidateArgs& a) {
  if (!a.plot.empty()) check_output_path(a.plot, "--plot");
  if (!a.points.empty()) check_output_path(a.points, "--points");
  const ProfileDatabase db = ProfileDatabase::load(a.profiles);
  std::shared_ptr<const Calibration> cal = a.calibration.empty()
                                               ? load_default_calibration()
                                               : std::make_shared<const Calibration>(Calibration::load(a.calibration));
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
  std::cout << fmt::format("gpemu validate: predictions of the analytical model (calibration: {}) against the "
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
      "validate", "Compare gpemu's predictions (calibrated analytical model, PCIe and memory models) with measured profiles");
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)")->required();
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
