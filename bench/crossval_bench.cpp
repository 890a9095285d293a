#include "crossval_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include "bench_util.h"
#include "cost/step_times.h"
#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {

namespace {

nlohmann::json errors_json(const PhaseErrors& e) {
  return {{"forward", e.forward}, {"backward", e.backward}, {"iteration", e.iteration}};
}

nlohmann::json per_gpu_json(const std::map<std::string, PhaseErrors>& m) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [k, v] : m) o[k] = errors_json(v);
  return o;
}

double median_of(const std::vector<double>& v) { return error_stats(v).median_ape_pct; }

// The published step times with each GPU's family left out of the profile
// calibration (rows of a family the profiles never measured, Hopper's, are
// out of sample with the full calibration already), and the stated error's
// coverage with each GPU's and each source's rows left out of the evidence.
nlohmann::json step_time_crossval(const std::filesystem::path& csv, const std::vector<TimeSample>& samples,
                                  const CalibrationOptions& options) {
  const std::vector<StepTimeRow> rows = read_step_times(csv);
  const auto shipped = load_default_calibration();
  const StepTimeReport in_sample = validate_step_times(rows, shipped);
  std::set<std::string> calibrated;
  for (const TimeSample& s : samples) calibrated.insert(find_gpu(s.gpu).architecture);
  std::map<std::string, std::vector<double>> left_out_ape, in_sample_ape;
  std::map<std::string, std::string> left_out_how;
  for (const StepTimePoint& p : in_sample.points) in_sample_ape[p.row.gpu].push_back(p.ape_pct());
  std::set<std::string> families;
  for (const StepTimePoint& p : in_sample.points) families.insert(find_gpu(p.program.gpu_id).architecture);
  for (const std::string& family : families) {
    if (!calibrated.count(family)) {
      for (const StepTimePoint& p : in_sample.points)
        if (find_gpu(p.program.gpu_id).architecture == family) {
          left_out_ape[p.row.gpu].push_back(p.ape_pct());
          left_out_how[p.row.gpu] =
              shipped->is_calibrated(family)
                  ? family + " never profiled: the shipped calibration (fitted on another GPU's measured steps)"
                  : family + " never measured: the shipped calibration";
        }
      continue;
    }
    std::vector<TimeSample> others;
    for (const TimeSample& s : samples)
      if (find_gpu(s.gpu).architecture != family) others.push_back(s);
    const auto without = std::make_shared<const Calibration>(calibrate(others, options));
    for (const StepTimePoint& p : validate_step_times(rows, without).points)
      if (find_gpu(p.program.gpu_id).architecture == family) {
        left_out_ape[p.row.gpu].push_back(p.ape_pct());
        left_out_how[p.row.gpu] = family + " left out of the calibration";
      }
  }
  nlohmann::json j;
  j["file"] = csv.string();
  j["rows"] = in_sample.points.size();
  std::vector<double> pooled;
  for (const auto& [gpu, ape] : left_out_ape) {
    const auto c = in_sample.gpu_left_out.count(gpu) ? in_sample.gpu_left_out.at(gpu) : StepTimeReport::Coverage{};
    j["gpu_left_out"][gpu] = {{"family", find_gpu(gpu).architecture},
                              {"rows", ape.size()},
                              {"median_ape_pct", median_of(ape)},
                              {"median_ape_in_sample_pct", median_of(in_sample_ape[gpu])},
                              {"within", c.covered},
                              {"left_out", left_out_how[gpu]}};
    pooled.insert(pooled.end(), ape.begin(), ape.end());
  }
  j["gpu_left_out_median_ape_pct"] = median_of(pooled);
  for (const auto& [source, c] : in_sample.source_left_out)
    j["source_left_out"][source] = {{"rows", c.rows},
                                    {"median_ape_pct", in_sample.per_source.at(source).median_ape_pct},
                                    {"within", c.covered}};
  return j;
}

}  // namespace

nlohmann::json run_crossval_bench(const CrossvalBenchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::filesystem::path csv = options.step_times.empty() ? zoo::data_dir() / ".." / "shared" / "reference" /
                                                                     "published" / "gpu_training_step_times.csv"
                                                               : std::filesystem::path(options.step_times);
  const bool have_csv = std::filesystem::is_regular_file(csv);
  if (!have_csv && !options.step_times.empty())
    throw InputError(
        fmt::format("--step-times {}: not a file; expected the published step-time CSV "
                    "(../shared/reference/published/gpu_training_step_times.csv)",
                    csv.string()));
  std::filesystem::path dir = options.profiles.empty()
                                  ? zoo::data_dir() / ".." / "shared" / "reference" / "gpemu-profiles"
                                  : std::filesystem::path(options.profiles);
  if (!std::filesystem::is_directory(dir))
    throw InputError(
        fmt::format("profiles folder {} not found; pass --profiles DIR (GPEmu's profiled_data layout, "
                    "e.g. ../shared/reference/gpemu-profiles)",
                    dir.string()));
  dir = std::filesystem::weakly_canonical(dir);
  const ProfileDatabase db = ProfileDatabase::load(dir);
  for (const std::string& w : db.warnings()) std::cerr << "gpemu: warning: " << w << '\n';
  const std::vector<TimeSample> samples = measured_time_samples(db);
  std::string per_model_id;
  if (!options.per_model_gpu.empty()) {  // checked before the minute of calibrations
    per_model_id = find_gpu(options.per_model_gpu).id;
    std::set<std::string> measured;
    for (const TimeSample& s : samples) measured.insert(s.gpu);
    if (!measured.count(per_model_id))
      throw InputError(fmt::format("--per-model {}: {} has no measured profiles here; measured: {}",
                                   options.per_model_gpu, per_model_id, fmt::join(measured, ", ")));
  }
  CrossValidationOptions o;
  o.model_folds = options.model_folds;
  o.calibration.rounds = options.rounds;
  o.calibration.robust_scale = options.robust_scale;
  const CrossValidation cv = cross_validate(samples, o);

  nlohmann::json j;
  j["benchmark"] = "crossval";
  j["profiles"] = dir.string();
  j["rows"] = samples.size();
  j["calibration_rounds"] = options.rounds;
  j["robust_scale"] = options.robust_scale;
  j["in_sample"] = {{"overall", errors_json(cv.in_sample_overall)}, {"per_gpu", per_gpu_json(cv.in_sample)}};
  nlohmann::json lo = {{"rule_used", std::string(to_string(o.calibration.fallback))}};
  for (const auto& [rule, per_gpu] : cv.gpu_left_out)
    lo[std::string(to_string(rule))] = {{"overall", errors_json(cv.gpu_left_out_overall.at(rule))},
                                        {"per_gpu", per_gpu_json(per_gpu)}};
  j["gpu_left_out"] = lo;
  nlohmann::json folds = nlohmann::json::array();
  for (const ModelFold& f : cv.model_folds)
    folds.push_back({{"models", f.models}, {"errors", errors_json(f.errors)}, {"per_gpu", per_gpu_json(f.per_gpu)}});
  j["models_left_out"] = {{"overall", errors_json(cv.models_left_out_overall)}, {"folds", folds}};
  if (!per_model_id.empty() && cv.per_model.count(per_model_id)) {
    const std::string& id = per_model_id;
    const auto it = cv.per_model.find(id);
    nlohmann::json models = nlohmann::json::object();
    for (const auto& [m, b] : it->second) {
      nlohmann::json others = nlohmann::json::object();
      for (const auto& [g, per] : cv.per_model)
        if (g != id && per.count(m)) others[g] = per.at(m).measured_backward_ratio;
      models[m] = {{"in_sample_forward_pct", b.in_forward},
                   {"in_sample_backward_pct", b.in_backward},
                   {"left_out_forward_pct", b.out_forward},
                   {"left_out_backward_pct", b.out_backward},
                   {"measured_backward_ratio", b.measured_backward_ratio},
                   {"other_gpus_backward_ratio", others}};
    }
    j["per_model"] = {{"gpu", id}, {"rule", std::string(to_string(o.calibration.fallback))}, {"models", models}};
  }

  // Each target read two ways: over the pooled rows, and on every GPU alone.
  double worst_out = 0, worst_in = 0, pooled_out = 0;
  if (auto used = cv.gpu_left_out.find(o.calibration.fallback); used != cv.gpu_left_out.end()) {
    for (const auto& [g, e] : used->second) worst_out = std::max(worst_out, e.iteration);
    pooled_out = cv.gpu_left_out_overall.at(o.calibration.fallback).iteration;
  }
  for (const auto& [g, e] : cv.in_sample) worst_in = std::max(worst_in, e.iteration);
  j["targets"] = {{"gpu_left_out_iteration_median_ape_pct", 10.0},
                  {"calibrated_iteration_median_ape_pct", 5.0},
                  {"peak_memory_median_ape_pct", 10.0},
                  {"oom_agreement_pct", 95.0}};
  nlohmann::json met = {{"gpu_left_out_iteration_pooled", pooled_out <= 10.0},
                        {"gpu_left_out_iteration_every_gpu", worst_out <= 10.0},
                        {"calibrated_iteration_pooled", cv.in_sample_overall.iteration <= 5.0},
                        {"calibrated_iteration_every_gpu", worst_in <= 5.0}};

  if (options.memory) {
    ValidationOptions vo;
    vo.keep_points = false;
    const ValidationReport r = validate(db, std::make_shared<const Calibration>(cv.full), vo);
    nlohmann::json mem;
    auto it = r.overall.find(ValidationPhase::PeakMemory);
    const ErrorStats pm = it == r.overall.end() ? ErrorStats{} : it->second;
    mem["peak_memory"] = {{"n", pm.n},
                          {"median_ape_pct", pm.median_ape_pct},
                          {"mean_ape_pct", pm.mean_ape_pct},
                          {"p90_ape_pct", pm.p90_ape_pct}};
    mem["oom_agreement_pct"] = r.oom_agreement_pct;
    mem["oom_exact_pct"] = r.oom_exact_pct;
    mem["oom_within_2pct_pct"] = r.oom_within_2pct_pct;
    j["memory"] = mem;
    met["peak_memory"] = pm.median_ape_pct <= 10.0;
    // "OOM decisions agree for 95% of (GPU, model) pairs": read per batch size,
    // and per pair as the exact boundary (the strict reading).
    met["oom_agreement_batch_sizes"] = r.oom_agreement_pct >= 95.0;
    met["oom_exact_boundary_pairs"] = r.oom_exact_pct >= 95.0;
  }
  if (have_csv) {
    j["step_times"] = step_time_crossval(std::filesystem::weakly_canonical(csv), samples, o.calibration);
    met["step_times_gpu_left_out_median"] = j["step_times"]["gpu_left_out_median_ape_pct"].get<double>() <= 20.0;
  } else {
    j["step_times"] = {{"skipped", fmt::format("{} not found (pass --step-times CSV)", csv.string())}};
  }
  const std::filesystem::path measured =
      options.measured_steps.empty()
          ? zoo::data_dir() / ".." / "shared" / "reference" / "measured" / "h200-2026-12-04" / "steps_as_step_times.csv"
          : std::filesystem::path(options.measured_steps);
  if (std::filesystem::is_regular_file(measured)) {
    // The family and host fitted on top of the profiles' calibration, as
    // `gpemu calibrate --fit-step-times` does.
    StepTimeFitOptions fo;
    fo.source = measured.filename().string();
    const StepTimeFit fit = fit_step_times(cv.full, read_step_times(measured), fo);
    nlohmann::json m;
    m["file"] = std::filesystem::weakly_canonical(measured).string();
    m["family"] = fit.family;
    m["host"] = fit.host;
    m["rows"] = fit.rows.size();
    m["in_sample_median_ape_pct"] = fit.in_sample_median_pct;
    m["row_left_out_median_ape_pct"] = fit.leave_one_out_median_pct;
    m["family_left_out_median_ape_pct"] = fit.family_left_out_median_pct;
    std::map<std::string, std::vector<double>> by_family;
    for (const StepTimeFit::Row& r : fit.rows)
      by_family[r.family].push_back(std::abs(r.family_left_out_ms / r.measured_ms - 1) * 100);
    for (const auto& [fam, ape] : by_family)
      m["model_family_left_out"][fam] = {{"rows", ape.size()}, {"median_ape_pct", median_of(ape)}};
    j["measured_steps"] = m;
    met["measured_steps_model_family_left_out_median"] = fit.family_left_out_median_pct <= 15.0;
  } else if (!options.measured_steps.empty()) {
    throw InputError(
        fmt::format("--measured-steps {}: not a file; expected gpemu's measured steps (the H200 rows, "
                    "../shared/reference/measured/h200-2026-12-04/steps_as_step_times.csv)",
                    measured.string()));
  } else {
    j["measured_steps"] = {{"skipped", fmt::format("{} not found (pass --measured-steps CSV)", measured.string())}};
  }
  j["met"] = met;
  j["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return j;
}

void print_crossval_bench(const nlohmann::json& r, std::ostream& os) {
  using bench::fixed;
  auto row = [](const std::string& name, const nlohmann::json& e) {
    return std::vector<std::string>{name, fixed(e["forward"].get<double>(), 1), fixed(e["backward"].get<double>(), 1),
                                    fixed(e["iteration"].get<double>(), 1)};
  };
  os << "Cross-validation of the analytical cost model on " << r["profiles"].get<std::string>() << " ("
     << r["rows"].get<std::size_t>() << " measured forward/backward rows)\n"
     << "median absolute percentage error, %\n\n";
  {
    bench::Table t({"in-sample (calibrated GPUs)", "forward", "backward", "iteration"});
    for (const auto& [g, e] : r["in_sample"]["per_gpu"].items()) t.add_row(row(g, e));
    t.add_row(row("all", r["in_sample"]["overall"]));
    t.print(os);
    os << '\n';
  }
  for (FallbackRule fr : kFallbackRules) {
    const std::string rule(to_string(fr));
    if (!r["gpu_left_out"].contains(rule)) continue;
    const bool used = r["gpu_left_out"]["rule_used"] == rule;
    bench::Table t(
        {fmt::format("GPU left out, factors: {}{}", rule, used ? " (used)" : ""), "forward", "backward", "iteration"});
    for (const auto& [g, e] : r["gpu_left_out"][rule]["per_gpu"].items()) t.add_row(row(g, e));
    t.add_row(row("all (pooled rows)", r["gpu_left_out"][rule]["overall"]));
    t.print(os);
    os << '\n';
  }
  {
    bench::Table t({"models left out (fold: first model)", "forward", "backward", "iteration"});
    int k = 0;
    for (const auto& f : r["models_left_out"]["folds"])
      t.add_row(
          row(fmt::format("fold {} ({} models from {})", ++k, f["models"].size(), f["models"][0].get<std::string>()),
              f["errors"]));
    t.add_row(row("all (pooled rows)", r["models_left_out"]["overall"]));
    t.print(os);
    os << '\n';
  }
  if (r.contains("per_model")) {
    const auto& p = r["per_model"];
    os << "per model on " << p["gpu"].get<std::string>()
       << ": signed median error, % (+: predicted slower), in-sample and with its family left out (rule "
       << p["rule"].get<std::string>() << "); measured backward / forward time\n";
    bench::Table t({"model", "in fwd", "in bwd", "out fwd", "out bwd", "bwd/fwd here", "bwd/fwd elsewhere"});
    for (const auto& [m, e] : p["models"].items()) {
      std::vector<double> others;
      for (const auto& [g, v] : e["other_gpus_backward_ratio"].items()) others.push_back(v.get<double>());
      std::sort(others.begin(), others.end());
      std::string span = others.empty() ? "-" : fmt::format("{:.2f}-{:.2f}", others.front(), others.back());
      auto pct = [](const nlohmann::json& v) { return fmt::format("{:+.1f}", v.get<double>()); };
      t.add_row({m, pct(e["in_sample_forward_pct"]), pct(e["in_sample_backward_pct"]), pct(e["left_out_forward_pct"]),
                 pct(e["left_out_backward_pct"]), fixed(e["measured_backward_ratio"].get<double>(), 2), span});
    }
    t.print(os);
    os << '\n';
  }
  if (r.contains("memory")) {
    const auto& m = r["memory"];
    os << fmt::format("peak allocated memory (model zoo replay): median APE {:.1f}%, p90 {:.1f}% over {} rows\n",
                      m["peak_memory"]["median_ape_pct"].get<double>(), m["peak_memory"]["p90_ape_pct"].get<double>(),
                      m["peak_memory"]["n"].get<int>());
    os << fmt::format(
        "OOM decisions agreeing: {:.1f}% of batch sizes; exact boundary for {:.1f}% of pairs, within 2% for "
        "{:.1f}%\n\n",
        m["oom_agreement_pct"].get<double>(), m["oom_exact_pct"].get<double>(), m["oom_within_2pct_pct"].get<double>());
  }
  if (r.contains("step_times") && r["step_times"].contains("skipped")) {
    os << "published step times: skipped, " << r["step_times"]["skipped"].get<std::string>() << "\n\n";
  } else if (r.contains("step_times")) {
    const auto& s = r["step_times"];
    os << "published step times (" << s["file"].get<std::string>() << ", " << s["rows"].get<int>()
       << " rows), median APE %\n";
    bench::Table t({"GPU (family left out)", "rows", "left out", "in-sample", "within stated error", "how"});
    for (const auto& [g, e] : s["gpu_left_out"].items())
      t.add_row({g, std::to_string(e["rows"].get<int>()), fixed(e["median_ape_pct"].get<double>(), 1),
                 fixed(e["median_ape_in_sample_pct"].get<double>(), 1),
                 fmt::format("{} of {}", e["within"].get<int>(), e["rows"].get<int>()),
                 e["left_out"].get<std::string>()});
    t.add_row({"all (pooled rows)", std::to_string(s["rows"].get<int>()),
               fixed(s["gpu_left_out_median_ape_pct"].get<double>(), 1), "", "", ""});
    t.print(os);
    bench::Table u({"source left out", "rows", "median APE", "within error stated from the other sources"});
    for (const auto& [src, e] : s["source_left_out"].items())
      u.add_row({src, std::to_string(e["rows"].get<int>()), fixed(e["median_ape_pct"].get<double>(), 1),
                 fmt::format("{} of {}", e["within"].get<int>(), e["rows"].get<int>())});
    os << '\n';
    u.print(os);
    os << "(no factor is fitted on the step-time rows: a source left out changes only the stated error)\n\n";
  }
  if (r.contains("measured_steps") && r["measured_steps"].contains("skipped")) {
    os << "measured steps: skipped, " << r["measured_steps"]["skipped"].get<std::string>() << "\n\n";
  } else if (r.contains("measured_steps")) {
    const auto& m = r["measured_steps"];
    os << fmt::format(
        "measured steps ({}, {} rows): {} and host {} fitted on them; median APE in sample {:.1f} %, each row left "
        "out {:.1f} %, each model family's rows left out {:.1f} %\n",
        m["file"].get<std::string>(), m["rows"].get<int>(), m["family"].get<std::string>(),
        m["host"].get<std::string>(), m["in_sample_median_ape_pct"].get<double>(),
        m["row_left_out_median_ape_pct"].get<double>(), m["family_left_out_median_ape_pct"].get<double>());
    bench::Table t({"model family left out", "rows", "median APE"});
    for (const auto& [fam, e] : m["model_family_left_out"].items())
      t.add_row({fam, std::to_string(e["rows"].get<int>()), fixed(e["median_ape_pct"].get<double>(), 1)});
    t.print(os);
    os << '\n';
  }
  os << "targets: iteration <= 10% on GPUs left out, <= 5% on calibrated GPUs, memory within 10%, OOM >= 95%, "
        "step times with the GPU's family left out <= 20%, measured steps with their model family left out <= 15%\n";
  for (const auto& [k, v] : r["met"].items()) os << fmt::format("  {:<34} {}\n", k, v.get<bool>() ? "met" : "NOT met");
  os << fmt::format("({:.0f} s)\n", r["seconds"].get<double>());
}

}  // namespace gpemu
