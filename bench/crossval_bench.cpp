#include "crossval_bench.h"

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "bench_util.h"
#include "gpemu/calibration.h"
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

}  // namespace

nlohmann::json run_crossval_bench(const CrossvalBenchOptions& options) {
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
  j["met"] = met;
  j["seconds"] = cv.seconds;
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
  os << "targets: iteration <= 10% on GPUs left out, <= 5% on calibrated GPUs, memory within 10%, OOM >= 95%\n";
  for (const auto& [k, v] : r["met"].items()) os << fmt::format("  {:<34} {}\n", k, v.get<bool>() ? "met" : "NOT met");
  os << fmt::format("({:.0f} s)\n", r["seconds"].get<double>());
}

}  // namespace gpemu
