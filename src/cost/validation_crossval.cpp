// Cross-validation of the calibration: leave one GPU out, leave models out
// (include/gpemu/validation.h, docs/validation.md).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/stats.h"
#include "gpemu/calibration.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {

namespace {

struct ApeLists {
  std::vector<double> forward, backward, iteration;
  void append(const ApeLists& o) {
    forward.insert(forward.end(), o.forward.begin(), o.forward.end());
    backward.insert(backward.end(), o.backward.begin(), o.backward.end());
    iteration.insert(iteration.end(), o.iteration.begin(), o.iteration.end());
  }
  PhaseErrors medians() const { return {common::median(forward), common::median(backward), common::median(iteration)}; }
};

// Per model of time_apes' samples: signed median errors of forward and
// backward (%), and the measured backward / forward ratio.
struct SignedErrors {
  double forward = 0, backward = 0, measured_ratio = 0;
};

ApeLists time_apes(const Calibration& cal, const std::vector<TimeSample>& samples, const AnalyticalOptions& options,
                   std::map<std::string, SignedErrors>* per_model = nullptr) {
  // (gpu, model) -> batch -> (measured, predicted) per phase
  std::map<std::pair<std::string, std::string>, std::vector<const TimeSample*>> groups;
  for (const TimeSample& s : samples) groups[{s.gpu, canonical_model_name(s.model)}].push_back(&s);
  std::map<std::string, OpProgram> programs;
  ApeLists out;
  for (const auto& [key, rows] : groups) {
    const auto& [gpu_id, model] = key;
    auto pit = programs.find(model);
    if (pit == programs.end()) pit = programs.emplace(model, OpProgram::compile(zoo::load_model(model), options)).first;
    const GpuSpec& gpu = find_gpu(gpu_id);
    const GpuPeaks peaks = gpu_peaks(gpu, options);
    const FamilyFactors& f = cal.factors(gpu);
    const ModelCorrection c = cal.correction(model);
    std::map<int, std::pair<double, double>> at[2];
    for (int phase = 0; phase < 2; ++phase) {
      std::vector<double> b, meas;
      for (const TimeSample* s : rows)
        if (s->backward == (phase == 1)) {
          b.push_back(s->batch_size);
          meas.push_back(s->seconds);
        }
      std::vector<double> pred(b.size());
      predict_phase_seconds(pit->second, phase == 1, b, peaks, f, c, pred);
      for (std::size_t i = 0; i < b.size(); ++i) {
        (phase ? out.backward : out.forward).push_back(std::abs(pred[i] / meas[i] - 1) * 100);
        at[phase][static_cast<int>(b[i])] = {meas[i], pred[i]};
      }
    }
    std::vector<double> signed_f, signed_b, ratio;
    for (const auto& [b, fm] : at[0]) {
      auto it = at[1].find(b);
      if (it == at[1].end()) continue;
      out.iteration.push_back(std::abs((fm.second + it->second.second) / (fm.first + it->second.first) - 1) * 100);
      signed_f.push_back((fm.second / fm.first - 1) * 100);
      signed_b.push_back((it->second.second / it->second.first - 1) * 100);
      ratio.push_back(it->second.first / fm.first);
    }
    if (per_model && !ratio.empty())
      (*per_model)[model] = {common::median(signed_f), common::median(signed_b), common::median(ratio)};
  }
  return out;
}

}  // namespace

PhaseErrors time_errors(const Calibration& calibration, const std::vector<TimeSample>& samples,
                        const AnalyticalOptions& options) {
  return time_apes(calibration, samples, options).medians();
}

CrossValidation cross_validate(const std::vector<TimeSample>& samples, const CrossValidationOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const AnalyticalOptions& mo = options.calibration.model;
  CrossValidation cv;
  std::set<std::string> gpus, models;
  for (const TimeSample& s : samples) {
    gpus.insert(s.gpu);
    models.insert(canonical_model_name(s.model));
  }
  auto subset = [&](auto pred) {
    std::vector<TimeSample> out;
    for (const TimeSample& s : samples)
      if (pred(s)) out.push_back(s);
    return out;
  };

  // In-sample.
  {
    const Calibration full = calibrate(samples, options.calibration);
    ApeLists all;
    for (const std::string& g : gpus) {
      std::map<std::string, SignedErrors> per_model;
      const ApeLists a = time_apes(full, subset([&](const TimeSample& s) { return s.gpu == g; }), mo, &per_model);
      for (const auto& [m, e] : per_model) {
        ModelBias& b = cv.per_model[g][m];
        b.in_forward = e.forward;
        b.in_backward = e.backward;
        b.measured_backward_ratio = e.measured_ratio;
      }
      cv.in_sample[g] = a.medians();
      all.append(a);
    }
    cv.in_sample_overall = all.medians();
    cv.full = full;
  }

  // Leave one GPU out.
  if (options.gpu_out && gpus.size() > 1) {
    std::map<FallbackRule, ApeLists> pooled;
    for (const std::string& held : gpus) {
      const std::string fam = find_gpu(held).architecture;
      const std::vector<TimeSample> train =
          subset([&](const TimeSample& s) { return s.gpu != held && find_gpu(s.gpu).architecture != fam; });
      const std::vector<TimeSample> test = subset([&](const TimeSample& s) { return s.gpu == held; });
      if (train.empty()) continue;
      Calibration c = calibrate(train, options.calibration);
      for (FallbackRule rule : kFallbackRules) {
        Calibration d = c;
        d.fallback = rule;
        d.families.erase(fam);
        for (auto it = d.families.begin(); it != d.families.end();)
          it = d.is_calibrated(it->first) ? std::next(it) : d.families.erase(it);
        d.finish();
        std::map<std::string, SignedErrors> per_model;
        const ApeLists a = time_apes(d, test, mo, &per_model);
        if (rule == options.calibration.fallback)
          for (const auto& [m, e] : per_model) {
            cv.per_model[held][m].out_forward = e.forward;
            cv.per_model[held][m].out_backward = e.backward;
          }
        cv.gpu_left_out[rule][held] = a.medians();
        pooled[rule].append(a);
      }
    }
    for (const auto& [rule, a] : pooled) cv.gpu_left_out_overall[rule] = a.medians();
  }

  // Leave models out.
  if (options.models_out && options.model_folds > 1 && models.size() >= static_cast<std::size_t>(options.model_folds)) {
    const std::vector<std::string> names(models.begin(), models.end());
    ApeLists all;
    std::map<std::string, ApeLists> by_family;
    for (int k = 0; k < options.model_folds; ++k) {
      ModelFold fold;
      std::set<std::string> held;
      for (std::size_t i = 0; i < names.size(); ++i)
        if (static_cast<int>(i % options.model_folds) == k) held.insert(names[i]);
      fold.models.assign(held.begin(), held.end());
      const Calibration c =
          calibrate(subset([&](const TimeSample& s) { return !held.count(canonical_model_name(s.model)); }),
                    options.calibration);
      const std::vector<TimeSample> test =
          subset([&](const TimeSample& s) { return held.count(canonical_model_name(s.model)) > 0; });
      ApeLists fa;
      for (const std::string& g : gpus) {
        const ApeLists a = time_apes(c, subset([&](const TimeSample& s) {
                                       return s.gpu == g && held.count(canonical_model_name(s.model)) > 0;
                                     }),
                                     mo);
        if (a.forward.empty() && a.backward.empty()) continue;
        fold.per_gpu[g] = a.medians();
        fa.append(a);
      }
      for (const std::string& m : held) {
        const zoo::ModelGraph* graph = zoo::find_model(m);
        by_family[graph ? graph->family() : "cnn"].append(
            time_apes(c, subset([&](const TimeSample& s) { return canonical_model_name(s.model) == m; }), mo));
      }
      fold.errors = fa.medians();
      all.append(fa);
      (void)test;
      cv.model_folds.push_back(std::move(fold));
    }
    cv.models_left_out_overall = all.medians();
    for (const auto& [fam, a] : by_family) cv.models_left_out_family[fam] = a.medians();
  }
  cv.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return cv;
}

void apply_expected_errors(Calibration& calibration, const CrossValidation& cv) {
  calibration.in_sample.clear();
  calibration.gpu_left_out.clear();
  calibration.models_left_out = cv.models_left_out_family;
  // Per family: the worst of its GPUs.
  auto worst_into = [](std::map<std::string, PhaseErrors>& into, const std::string& fam, const PhaseErrors& e) {
    auto it = into.find(fam);
    if (it == into.end()) {
      into[fam] = e;
      return;
    }
    it->second = {std::max(it->second.forward, e.forward), std::max(it->second.backward, e.backward),
                  std::max(it->second.iteration, e.iteration)};
  };
  for (const auto& [gpu, e] : cv.in_sample) worst_into(calibration.in_sample, find_gpu(gpu).architecture, e);
  if (auto lo = cv.gpu_left_out.find(calibration.fallback); lo != cv.gpu_left_out.end()) {
    for (const auto& [gpu, e] : lo->second) worst_into(calibration.gpu_left_out, find_gpu(gpu).architecture, e);
    if (!lo->second.empty()) calibration.gpu_left_out_overall = cv.gpu_left_out_overall.at(calibration.fallback);
  }
}

}  // namespace gpemu
