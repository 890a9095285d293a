// `gpemu calibrate`: fits the analytical model's factors on measured
// profiles, cross-validates them for the expected errors, and writes
// --out FILE (or, when asked with --replace-shipped, data/calibration.json).
#include <array>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/option_checks.h"
#include "cli/output.h"
#include "common/output_path.h"
#include "cost/step_times.h"
#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu::cli {
namespace {

struct CalibrateArgs {
  std::string profiles, out, fallback = "trend";
  std::vector<std::string> step_times, fit_step_times;
  bool no_crossval = false, all_rows = false, replace_shipped = false;
  int rounds = 3;
};

// Below this many distinct models a family's factors and the per-model
// corrections cannot be told apart: the fit splits one model's error between
// them arbitrarily (a single resnet50 table gives conv efficiency 3.2, over
// the card's peak).
constexpr std::size_t kMinModelsPerFamily = 2;

// Where the calibration goes. The shipped file is what every prediction
// reads, so it is replaced only when asked for by name.
std::filesystem::path calibration_target(const CalibrateArgs& a) {
  if (!a.out.empty() && a.replace_shipped)
    throw InputError("--out and --replace-shipped exclude each other: write a new file, or replace the shipped one");
  if (a.replace_shipped) return default_calibration_path();
  if (a.out.empty())
    throw InputError(
        fmt::format("give --out FILE for the new calibration, or --replace-shipped to overwrite {} "
                    "(used by every prediction)",
                    default_calibration_path().string()));
  return a.out;
}

// Families with rows but too few models are refused; families without rows
// get the fallback rule's factors, which is said, not left silent.
void check_coverage(const std::vector<TimeSample>& samples, const CalibrateArgs& a) {
  std::map<std::string, std::set<std::string>> models;                   // family -> models measured
  std::map<std::string, std::array<std::set<std::string>, 2>> by_phase;  // family -> [forward, backward] models
  for (const TimeSample& s : samples) {
    const std::string& family = find_gpu(s.gpu).architecture;
    models[family].insert(s.model);
    by_phase[family][s.backward ? 1 : 0].insert(s.model);
  }
  auto names = [](const std::set<std::string>& m) {
    std::string out;
    for (const std::string& n : m) out += (out.empty() ? "" : ", ") + n;
    return m.empty() ? std::string("none") : out;
  };
  for (const auto& [family, m] : models) {
    if (m.size() < kMinModelsPerFamily)
      throw InputError(
          fmt::format("{}: the {} family has rows of {} model{} ({}) only; calibrating a family needs "
                      "rows of at least {} models, or its factors and the model corrections cannot be "
                      "told apart",
                      a.profiles, family, m.size(), m.size() == 1 ? "" : "s", *m.begin(), kMinModelsPerFamily));
  }
  // The backward factor and the backward and optimizer launch times are fitted
  // on backward rows only, the rest on both: a family with forward rows alone
  // kept the defaults of the backward ones and was still called calibrated.
  for (const auto& [family, phases] : by_phase) {
    for (int phase = 0; phase < 2; ++phase) {
      const std::set<std::string>& m = phases[static_cast<std::size_t>(phase)];
      if (m.size() >= kMinModelsPerFamily) continue;
      const char* name = phase == 1 ? "backward" : "forward";
      throw InputError(fmt::format(
          "{}: the {} family has {} rows of {} model{} ({}) and {} rows of {}; calibrating a family needs forward "
          "and backward rows of at least {} models each, or some of its factors are not fitted but kept at their "
          "defaults; add time/compute/{}/<GPU>/<model>/time_by_batch_size.csv tables for its GPUs, or leave the "
          "family out",
          a.profiles, family, name, m.size(), m.size() == 1 ? "" : "s", names(m), phase == 1 ? "forward" : "backward",
          names(phases[static_cast<std::size_t>(1 - phase)]), kMinModelsPerFamily, name));
    }
  }
  std::string missing;
  for (const std::string& fam : catalog_families())
    if (!models.contains(fam)) missing += (missing.empty() ? "" : ", ") + fam;
  if (!missing.empty())
    std::cerr << fmt::format(
        "note: no measured rows for {}: their factors are not fitted but derived from the "
        "calibrated families by the '{}' fallback rule\n",
        missing, a.fallback);
}

std::string errs(const PhaseErrors& e) {
  return fmt::format("{} / {} / {}", fixed(e.forward, 1), fixed(e.backward, 1), fixed(e.iteration, 1));
}

// The fitted factors per family and GPU, and the expected errors stored.
void print_calibration(const Calibration& cal, const CalibrateArgs& a) {
  Table t({"family", "conv eff", "conv bytes eff", "matmul eff", "memory eff", "bwd factor", "launch fwd us",
           "launch bwd us", "launch opt us", "view us", "origin"});
  for (const std::string& fam : catalog_families()) {
    const FamilyFactors& f = cal.families.at(fam);
    t.add({fam, fixed(f.conv_efficiency, 3), fixed(f.conv_bytes_efficiency, 3), fixed(f.matmul_efficiency, 3),
           fixed(f.memory_efficiency, 3), fixed(f.backward_factor, 3), fixed(f.launch_forward_us, 1),
           fixed(f.launch_backward_us, 1), fixed(f.launch_optimizer_us, 1), fixed(f.launch_view_us, 1),
           cal.origin_of(fam)});
  }
  for (const auto& [id, f] : cal.gpu_factors)
    t.add({id, fixed(f.conv_efficiency, 3), fixed(f.conv_bytes_efficiency, 3), fixed(f.matmul_efficiency, 3),
           fixed(f.memory_efficiency, 3), fixed(f.backward_factor, 3), fixed(f.launch_forward_us, 1),
           fixed(f.launch_backward_us, 1), fixed(f.launch_optimizer_us, 1), fixed(f.launch_view_us, 1),
           cal.origin_of(find_gpu(id))});
  t.print(std::cout);
  std::cout << fmt::format("\n{} model corrections; {} rows fitted\n", cal.models.size(), cal.rows);
  if (!a.no_crossval) {
    std::cout << "\nexpected errors stored (median APE %, forward / backward / iteration)\n";
    for (const auto& [fam, e] : cal.in_sample) std::cout << fmt::format("  in-sample {:<10} {}\n", fam, errs(e));
    for (const auto& [fam, e] : cal.gpu_left_out) std::cout << fmt::format("  GPU left out {:<7} {}\n", fam, errs(e));
    if (cal.gpu_left_out_overall)
      std::cout << fmt::format("  GPU left out, all     {}\n", errs(*cal.gpu_left_out_overall));
    for (const auto& [fam, e] : cal.models_left_out)
      std::cout << fmt::format("  models left out ({}) {}\n", fam, errs(e));
  }
  if (!cal.program_errors.empty()) {
    std::cout << "\nprogram kinds against published step times (APE %: 80th percentile, the stated error; median)\n";
    for (const auto& [kind, e] : cal.program_errors)
      std::cout << fmt::format("  {:<22} {:>3} rows  {:>5.1f}  {:>5.1f}{}\n", kind, e.rows, e.p80_pct, e.median_pct,
                               e.rows < kMinEvidenceRows ? "  (too few rows: the widest kind's error is stated)" : "");
  }
}

void run_calibrate(const CalibrateArgs& a) {
  if (a.rounds < 1) throw InputError(fmt::format("--rounds {} is impossible: it must be at least 1", a.rounds));
  const std::filesystem::path out = calibration_target(a);
  check_output_path(out, a.replace_shipped ? "--replace-shipped" : "--out");
  const ProfileDatabase db = ProfileDatabase::load(a.profiles);
  print_warnings(db.warnings());
  const std::vector<TimeSample> samples = measured_time_samples(db);
  if (samples.empty())
    throw InputError(fmt::format("{}: no measured forward/backward rows of models in the zoo", a.profiles));
  check_coverage(samples, a);
  CrossValidationOptions o;
  o.calibration.all_rows = a.all_rows;
  o.calibration.rounds = a.rounds;
  const auto rule = parse_fallback_rule(a.fallback);
  if (!rule)
    throw InputError(fmt::format("unknown --fallback '{}': expected trend, geometric_mean or nearest", a.fallback));
  o.calibration.fallback = *rule;
  std::set<std::string> gpus;
  for (const TimeSample& s : samples) gpus.insert(s.gpu);
  o.calibration.source = fmt::format("gpemu calibrate --profiles {}: {} measured forward/backward rows on {}",
                                     std::filesystem::path(a.profiles).filename().string(), samples.size(), [&] {
                                       std::string s;
                                       for (const std::string& g : gpus) s += (s.empty() ? "" : ", ") + g;
                                       return s;
                                     }());
  Calibration cal;
  if (a.no_crossval) {
    cal = calibrate(samples, o.calibration);
  } else {
    std::cerr << "calibrating, then cross-validating (leave one GPU out, 5 model folds): about a minute\n";
    const CrossValidation cv = cross_validate(samples, o);
    cal = cv.full;
    apply_expected_errors(cal, cv);
  }
  for (const std::string& file : a.fit_step_times) {
    // A family without profiles and the host that measured it, fitted on its
    // measured step times (docs/host.md).
    StepTimeFitOptions fo;
    fo.source = std::filesystem::path(file).filename().string();
    const std::vector<StepTimeRow> rows = read_step_times(file);
    std::cerr << fmt::format("fitting on the step times of {} (each row also left out): a few seconds\n", file);
    const StepTimeFit fit = fit_step_times(cal, rows, fo);
    print_step_time_fit(fit, std::cout);
    cal = fit.calibration;
  }
  if (!a.step_times.empty()) {
    // The errors stated for kinds of programs the profiles do not cover
    // (transformers, TF32, AMP): the calibration's own errors on published
    // step times, which it was not fitted on.
    std::vector<StepTimeRow> rows;
    std::string names;
    for (const std::string& file : a.step_times) {
      std::vector<StepTimeRow> r = read_step_times(file);
      rows.insert(rows.end(), r.begin(), r.end());
      names += (names.empty() ? "" : " ") + std::filesystem::path(file).filename().string();
    }
    const StepTimeReport rep = validate_step_times(rows, std::make_shared<Calibration>(cal));
    cal.program_errors = program_evidence(rep);
    cal.program_errors_source =
        fmt::format("gpemu calibrate --step-times {}: {} rows compared", names, rep.points.size());
  }
  cal.save(out);
  print_calibration(cal, a);
  std::cout << "\nwrote " << out.string() << '\n';
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* cmd =
      app.add_subcommand("calibrate",
                         "Fit the analytical model's factors on measured profiles and write the calibration file");
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)")->required();
  cmd->add_option("--out", a->out, "Where to write the new calibration");
  cmd->add_flag("--replace-shipped", a->replace_shipped,
                "Overwrite data/calibration.json in the data directory, which every prediction uses");
  cmd->add_option("--step-times", a->step_times,
                  "Also state errors per kind of program (model family x precision) from published step times "
                  "(the CSV format of gpemu validate --step-times; may be given more than once)");
  cmd->add_option("--fit-step-times", a->fit_step_times,
                  "Fit the GPU family without profiles whose measured step times these are, and the host profile "
                  "that issued them (rows of gpemu's own measurements, e.g. the H200 rows; docs/host.md)");
  cmd->add_flag("--no-crossval", a->no_crossval, "Skip the cross-validation (no expected errors are stored)");
  cmd->add_flag("--all-rows", a->all_rows, "Fit every measured row instead of the thinned batch-size grid");
  cmd->add_option("--rounds", a->rounds, "Alternations of family factors and model corrections")
      ->capture_default_str()
      ->check(whole_number_in(1, 100));
  cmd->add_option("--fallback", a->fallback,
                  "Factors of GPUs whose family has no measurements: trend, geometric_mean or nearest "
                  "(docs/analytical-model.md)")
      ->capture_default_str();
  cmd->callback([a] { run_calibrate(*a); });
}

}  // namespace gpemu::cli
