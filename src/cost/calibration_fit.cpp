// Fitting the analytical model's factors to measured times
// (include/gpemu/calibration.h): Levenberg-Marquardt in log space on the
// squared log error, per architecture family, alternating with per-model
// corrections learned across GPUs.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/stats.h"
#include "cost/fit_math.h"
#include "gpemu/calibration.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {

namespace cost_detail {

// Minimises |r(x)|^2 by Levenberg-Marquardt with a forward-difference
// Jacobian; x is clamped to [lo, hi].
std::vector<double> levenberg_marquardt(const ResidualFn& fn, std::vector<double> x, const std::vector<double>& lo,
                                        const std::vector<double>& hi, int max_iterations) {
  const std::size_t p = x.size();
  auto clamp = [&](std::vector<double>& v) {
    for (std::size_t i = 0; i < p; ++i) v[i] = std::clamp(v[i], lo[i], hi[i]);
  };
  clamp(x);
  std::vector<double> r, rt;
  fn(x, r);
  auto sq = [](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e * e;
    return s;
  };
  double cost = sq(r);
  double lambda = 1e-2;
  const std::size_t m = r.size();
  std::vector<double> J(m * p);
  for (int it = 0; it < max_iterations; ++it) {
    constexpr double h = 1e-5;
    for (std::size_t k = 0; k < p; ++k) {
      std::vector<double> xs = x;
      const double step = xs[k] + h <= hi[k] ? h : -h;
      xs[k] += step;
      fn(xs, rt);
      for (std::size_t i = 0; i < m; ++i) J[i * p + k] = (rt[i] - r[i]) / step;
    }
    std::vector<double> A(p * p, 0.0), g(p, 0.0);
    for (std::size_t i = 0; i < m; ++i) {
      const double* row = &J[i * p];
      for (std::size_t a = 0; a < p; ++a) {
        g[a] += row[a] * r[i];
        for (std::size_t b = 0; b <= a; ++b) A[a * p + b] += row[a] * row[b];
      }
    }
    for (std::size_t a = 0; a < p; ++a)
      for (std::size_t b = 0; b < a; ++b) A[b * p + a] = A[a * p + b];
    bool improved = false;
    double gain = 0;
    while (lambda < 1e10) {
      // Solve (A + lambda diag(A)) d = -g by Gaussian elimination with pivoting.
      std::vector<double> M = A, d(p);
      for (std::size_t a = 0; a < p; ++a) M[a * p + a] += lambda * (A[a * p + a] + 1e-12);
      std::vector<double> rhs(p);
      for (std::size_t a = 0; a < p; ++a) rhs[a] = -g[a];
      bool singular = false;
      for (std::size_t c = 0; c < p; ++c) {
        std::size_t piv = c;
        for (std::size_t q = c + 1; q < p; ++q)
          if (std::abs(M[q * p + c]) > std::abs(M[piv * p + c])) piv = q;
        if (std::abs(M[piv * p + c]) < 1e-300) {
          singular = true;
          break;
        }
        if (piv != c) {
          for (std::size_t q = 0; q < p; ++q) std::swap(M[c * p + q], M[piv * p + q]);
          std::swap(rhs[c], rhs[piv]);
        }
        for (std::size_t q = c + 1; q < p; ++q) {
          const double f = M[q * p + c] / M[c * p + c];
          for (std::size_t k = c; k < p; ++k) M[q * p + k] -= f * M[c * p + k];
          rhs[q] -= f * rhs[c];
        }
      }
      if (singular) {
        lambda *= 10;
        continue;
      }
      for (std::size_t c = p; c-- > 0;) {
        double s = rhs[c];
        for (std::size_t k = c + 1; k < p; ++k) s -= M[c * p + k] * d[k];
        d[c] = s / M[c * p + c];
      }
      std::vector<double> xn(p);
      for (std::size_t a = 0; a < p; ++a) xn[a] = x[a] + d[a];
      clamp(xn);
      fn(xn, rt);
      const double cn = sq(rt);
      if (std::isfinite(cn) && cn < cost) {
        gain = cost - cn;
        x = xn;
        r = rt;
        cost = cn;
        lambda = std::max(lambda / 3, 1e-9);
        improved = true;
        break;
      }
      lambda *= 4;
    }
    if (!improved || gain < 1e-10 * std::max(cost, 1e-300)) break;
  }
  return x;
}

// The pseudo-Huber loss as a residual: squared it is 2c^2 (sqrt(1 + (e/c)^2) - 1),
// ~e^2 for |e| << c and ~2c|e| beyond, so that a few rows far off (a kernel
// choice no other model shares) do not pull the factors of every other row.
// c <= 0: plain least squares.
double robust_residual(double e, double c) {
  if (c <= 0) return e;
  const double rho = 2 * c * c * (std::sqrt(1 + (e / c) * (e / c)) - 1);
  return std::copysign(std::sqrt(rho), e);
}

}  // namespace cost_detail

using namespace cost_detail;

namespace {

// Samples of one (GPU, model, phase).
struct Group {
  const OpProgram* program = nullptr;
  GpuPeaks peaks;
  std::string gpu, family, model;
  bool backward = false;
  std::vector<double> batch, seconds;
};

bool thinned_batch(int b) { return b == 1 || b == 2 || b == 3 || b == 4 || b == 6 || b == 8 || b == 12 || b % 16 == 0; }

FamilyFactors from_log(const std::vector<double>& x) {
  FamilyFactors f;
  for (int i = 0; i < kFamilyFactorCount; ++i) factor_at(f, i) = std::exp(x[i]);
  return f;
}

std::vector<double> to_log(const FamilyFactors& f) {
  std::vector<double> x(kFamilyFactorCount);
  for (int i = 0; i < kFamilyFactorCount; ++i) x[i] = std::log(factor_at(f, i));
  return x;
}

// Residuals of log(predicted / measured) of some groups.
void group_residuals(const std::vector<const Group*>& groups,
                     const std::function<const FamilyFactors&(const Group&)>& f,
                     const std::function<ModelCorrection(const Group&)>& corr, double robust_scale,
                     std::vector<double>& r) {
  std::vector<double> pred;
  for (const Group* g : groups) {
    pred.resize(g->batch.size());
    predict_phase_seconds(*g->program, g->backward, g->batch, g->peaks, f(*g), corr(*g), pred);
    for (std::size_t i = 0; i < pred.size(); ++i)
      r.push_back(robust_residual(std::log(std::max(pred[i], 1e-12) / g->seconds[i]), robust_scale));
  }
}

}  // namespace

std::vector<TimeSample> measured_time_samples(const ProfileDatabase& profiles) {
  std::vector<TimeSample> out;
  for (const Profile& p : profiles.profiles()) {
    if (!zoo::has_model(p.model)) continue;
    for (const ProfilePoint& pt : p.forward_s) out.push_back({p.gpu, p.model, false, pt.batch_size, pt.value});
    for (const ProfilePoint& pt : p.backward_s) out.push_back({p.gpu, p.model, true, pt.batch_size, pt.value});
  }
  return out;
}

Calibration calibrate(const std::vector<TimeSample>& samples, const CalibrationOptions& options) {
  // Programs per model, groups per (gpu, model, phase).
  std::map<std::string, OpProgram> programs;
  std::map<std::tuple<std::string, std::string, bool>, Group> by_key;
  std::map<std::tuple<std::string, std::string, bool>, std::vector<std::pair<int, double>>> rows;
  for (const TimeSample& s : samples) {
    if (!(s.seconds > 0) || s.batch_size < 1)
      throw InputError(fmt::format("calibration sample {}/{} batch {}: time {} s is not positive", s.gpu, s.model,
                                   s.batch_size, s.seconds));
    rows[{s.gpu, canonical_model_name(s.model), s.backward}].push_back({s.batch_size, s.seconds});
  }
  int n_rows = 0;
  std::map<std::string, std::set<std::string>> family_gpus;
  for (auto& [key, rs] : rows) {
    const auto& [gpu_id, model, backward] = key;
    const GpuSpec& gpu = find_gpu(gpu_id);
    auto pit = programs.find(model);
    if (pit == programs.end())
      pit = programs.emplace(model, OpProgram::compile(zoo::load_model(model), options.model)).first;
    Group g;
    g.program = &pit->second;
    g.peaks = gpu_peaks(gpu, options.model);
    g.gpu = gpu.id;
    g.family = gpu.architecture;
    g.model = model;
    g.backward = backward;
    std::sort(rs.begin(), rs.end());
    int kept = 0;
    for (const auto& [b, t] : rs) kept += options.all_rows || thinned_batch(b);
    for (const auto& [b, t] : rs)
      if (options.all_rows || kept < 3 || thinned_batch(b)) {
        g.batch.push_back(b);
        g.seconds.push_back(t);
      }
    n_rows += static_cast<int>(g.batch.size());
    family_gpus[g.family].insert(g.gpu);
    by_key.emplace(key, std::move(g));
  }

  std::map<std::string, FamilyFactors> fam;
  for (const auto& [name, f] : options.fixed) fam[name] = f;
  std::vector<std::string> fitted;
  for (const auto& [name, gpus] : family_gpus) {
    if (options.fixed.count(name)) continue;
    fitted.push_back(name);
    auto st = options.start.find(name);
    fam[name] = st != options.start.end() ? st->second : FamilyFactors{};
  }
  std::map<std::string, ModelCorrection> corr;

  auto factors_of = [&](const Group& g) -> const FamilyFactors& {
    auto it = fam.find(g.family);
    static const FamilyFactors defaults{};
    return it == fam.end() ? defaults : it->second;
  };
  auto corr_of = [&](const Group& g) {
    auto it = corr.find(g.model);
    return it == corr.end() ? ModelCorrection{} : it->second;
  };

  const std::vector<double> prior_center = to_log(FamilyFactors{});
  const double robust = options.robust_scale;
  const int rounds = options.model_corrections ? std::max(1, options.rounds) : 1;
  for (int round = 0; round < rounds; ++round) {
    for (const std::string& name : fitted) {
      std::vector<const Group*> groups;
      for (const auto& [k, g] : by_key)
        if (g.family == name) groups.push_back(&g);
      std::vector<double> lo(kFamilyFactorCount), hi(kFamilyFactorCount);
      for (int i = 0; i < kFamilyFactorCount; ++i) {
        lo[i] = prior_center[i] - std::log(1e3);
        hi[i] = prior_center[i] + std::log(1e3);
      }
      for (const auto& [factor, value] : options.pinned) {
        const auto& names = family_factor_names();
        const auto it = std::find(names.begin(), names.end(), factor);
        if (it == names.end() || !(value > 0))
          throw InputError(fmt::format("calibration: cannot pin '{}' to {}; pinnable factors: {}", factor, value,
                                       fmt::join(names, ", ")));
        const int i = static_cast<int>(it - names.begin());
        lo[i] = hi[i] = std::log(value);
        factor_at(fam[name], i) = value;
      }
      ResidualFn fn = [&](const std::vector<double>& x, std::vector<double>& r) {
        r.clear();
        const FamilyFactors f = from_log(x);
        group_residuals(
            groups, [&](const Group&) -> const FamilyFactors& { return f; }, corr_of, robust, r);
        for (int i = 0; i < kFamilyFactorCount; ++i) r.push_back(options.factor_prior * (x[i] - prior_center[i]));
      };
      fam[name] = from_log(levenberg_marquardt(fn, to_log(fam[name]), lo, hi, options.max_iterations));
    }
    if (!options.model_corrections) break;
    std::set<std::string> models;
    for (const auto& [k, g] : by_key) models.insert(g.model);
    for (const std::string& m : models) {
      // Four multipliers over both phases of the model on every GPU.
      std::vector<const Group*> groups;
      for (const auto& [k, g] : by_key)
        if (g.model == m) groups.push_back(&g);
      if (groups.empty()) continue;
      const ModelCorrection base = corr.count(m) ? corr[m] : ModelCorrection{};
      auto to_corr = [](const std::vector<double>& x) {
        return ModelCorrection{std::exp(x[0]), std::exp(x[1]), std::exp(x[2]), std::exp(x[3])};
      };
      const std::vector<double> x0 = {std::log(base.forward_gpu), std::log(base.forward_host),
                                      std::log(base.backward_gpu), std::log(base.backward_host)};
      const std::vector<double> lo(4, std::log(0.1)), hi(4, std::log(10.0));
      ResidualFn fn = [&](const std::vector<double>& x, std::vector<double>& r) {
        r.clear();
        const ModelCorrection c = to_corr(x);
        group_residuals(
            groups, factors_of, [&](const Group&) { return c; }, robust, r);
        for (double v : x) r.push_back(options.correction_prior * v);
      };
      corr[m] = to_corr(levenberg_marquardt(fn, x0, lo, hi, options.max_iterations));
    }
  }

  Calibration c;
  c.families = fam;
  c.fallback = options.fallback;
  for (const auto& [name, gpus] : family_gpus) {
    std::string list;
    for (const std::string& g : gpus) list += (list.empty() ? "" : ", ") + g;
    if (options.fixed.count(name)) {
      c.origin[name] = "fixed";
      continue;
    }
    c.calibrated_families.push_back(name);
    c.calibrated_gpus[name].assign(gpus.begin(), gpus.end());
    c.origin[name] = fmt::format("calibrated on {}", list);
  }
  for (const auto& [name, f] : options.fixed)
    if (!c.origin.count(name)) c.origin[name] = "fixed";
  if (options.model_corrections) c.models = corr;
  c.rows = n_rows;
  c.source = options.source;
  c.finish();
  return c;
}

Calibration calibrate(const ProfileDatabase& profiles, const CalibrationOptions& options) {
  std::vector<TimeSample> s = measured_time_samples(profiles);
  if (s.empty())
    throw InputError(
        "no measured forward/backward rows of zoo models in the profiles; expected GPEmu or gpemu "
        "profiles of models in zoo/");
  return calibrate(s, options);
}

FitQuality fit_quality(const Calibration& calibration, const std::vector<TimeSample>& samples,
                       const AnalyticalOptions& options) {
  std::map<std::string, OpProgram> programs;
  std::vector<double> ape;
  double sq = 0;
  for (const TimeSample& s : samples) {
    const std::string m = canonical_model_name(s.model);
    auto pit = programs.find(m);
    if (pit == programs.end()) pit = programs.emplace(m, OpProgram::compile(zoo::load_model(m), options)).first;
    const GpuSpec& gpu = find_gpu(s.gpu);
    const double p = predict_phase_seconds(pit->second, s.backward, s.batch_size, gpu_peaks(gpu, options),
                                           calibration.factors(gpu), calibration.correction(m));
    ape.push_back(std::abs(p / s.seconds - 1) * 100);
    const double l = std::log(p / s.seconds);
    sq += l * l;
  }
  FitQuality q;
  q.n = static_cast<int>(ape.size());
  if (q.n == 0) return q;
  q.median_ape_pct = common::median(ape);
  q.rms_log_error = std::sqrt(sq / q.n);
  return q;
}

}  // namespace gpemu
