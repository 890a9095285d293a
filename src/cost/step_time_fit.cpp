// Fitting a GPU family and the host that issued its steps on measured step
// times (cost/step_times.h): the rows of a GPU whose family has no per-phase
// profiles (Hopper: the H200 rows of shared/reference/measured/) decide that
// family's factors instead of the mean of the other families, and the host
// profile their source names (docs/host.md).
#include <algorithm>
#include <cmath>
#include <ostream>
#include <set>

#include <fmt/format.h>

#include "common/stats.h"
#include "cost/fit_math.h"
#include "cost/step_times.h"
#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {

using namespace cost_detail;

namespace {

// The GPU-side factors a step-time fit frees: the memory-bound kernels'
// efficiency; one scale of the FP32-form convolutions' two rates (FLOPs and
// bytes) relative to the fallback rule's (the rows running FP32-form
// convolutions: TF32 off, and depthwise ones under TF32); the tensor-core
// convolution efficiency of half precision and, apart from it, of TF32; and
// the per-kernel GPU overhead. matmul efficiency stays pinned
// (docs/analytical-model.md "Matmuls"), and so does the backward factor
// (freed, it moved the H100's published rows to +18 %: docs/decisions.md).
// And the host profile's four launch times.
constexpr int kGpuFactors[] = {3};  // memory (+ FP32-form conv scale, tensor-core conv, TF32 conv, kernel overhead)
constexpr int kFreeGpu = 5, kFreeHost = 4, kFree = kFreeGpu + kFreeHost;
constexpr double kTensorCoreConvStart = 0.5, kKernelOverheadStart = 2.0;

// The measured programs run foreach optimizers: their update is foreach
// calls, and a per-parameter kernel's cost (optimizer_us) is not seen.
double HostProfile::*const kHostFields[kFreeHost] = {&HostProfile::forward_us, &HostProfile::backward_us,
                                                     &HostProfile::foreach_us, &HostProfile::view_us};

struct FitRow {
  const StepTimeRow* row = nullptr;
  OpProgram program{"", {}, {}};
  GpuPeaks peaks;
  ModelCorrection correction;
  std::string family;  // the zoo model's family
};

struct Params {
  FamilyFactors gpu;
  HostProfile host;
};

std::vector<double> to_x(const Params& p) {
  std::vector<double> x;
  for (int i : kGpuFactors) x.push_back(std::log(factor_at(p.gpu, i)));
  x.push_back(0.0);  // the FP32-form convolutions' rates, relative to the start's (fallback) factors
  const double tc = p.gpu.tensor_core_conv_efficiency > 0 ? p.gpu.tensor_core_conv_efficiency : kTensorCoreConvStart;
  x.push_back(std::log(tc));
  x.push_back(std::log(p.gpu.tf32_conv_efficiency > 0 ? p.gpu.tf32_conv_efficiency : tc));
  x.push_back(std::log(p.gpu.kernel_overhead_us > 0 ? p.gpu.kernel_overhead_us : kKernelOverheadStart));
  for (auto f : kHostFields) x.push_back(std::log(p.host.*f));
  return x;
}

Params from_x(const std::vector<double>& x, Params p) {
  for (int k = 0; k < kFreeGpu - 4; ++k) factor_at(p.gpu, kGpuFactors[k]) = std::exp(x[k]);
  p.gpu.conv_efficiency *= std::exp(x[kFreeGpu - 4]);
  p.gpu.conv_bytes_efficiency *= std::exp(x[kFreeGpu - 4]);
  p.gpu.tensor_core_conv_efficiency = std::exp(x[kFreeGpu - 3]);
  p.gpu.tf32_conv_efficiency = std::exp(x[kFreeGpu - 2]);
  p.gpu.kernel_overhead_us = std::exp(x[kFreeGpu - 1]);
  for (int k = 0; k < kFreeHost; ++k) p.host.*kHostFields[k] = std::exp(x[kFreeGpu + k]);
  return p;
}

double predict_ms(FitRow& r, const Params& p) {
  r.program.set_issue(r.program.sync(), p.host);
  return predict_step(r.program, r.row->batch_size, r.peaks, p.gpu, r.correction).step * 1e3;
}

Params fit(std::vector<FitRow*> rows, const Params& start, const StepTimeFitOptions& o) {
  const std::vector<double> x0 = to_x(start);
  std::vector<double> lo(kFree), hi(kFree);
  for (int i = 0; i < kFree; ++i) {
    lo[i] = x0[i] - std::log(20.0);
    hi[i] = x0[i] + std::log(20.0);
  }
  // Efficiencies are fractions of the datasheet peaks.
  hi[0] = std::min(hi[0], 0.0);
  hi[kFreeGpu - 3] = std::min(hi[kFreeGpu - 3], 0.0);
  hi[kFreeGpu - 2] = std::min(hi[kFreeGpu - 2], 0.0);
  ResidualFn fn = [&](const std::vector<double>& x, std::vector<double>& r) {
    r.clear();
    const Params p = from_x(x, start);
    for (FitRow* row : rows)
      r.push_back(robust_residual(std::log(predict_ms(*row, p) / row->row->published_iteration_ms), o.robust_scale));
    for (int i = 0; i < kFree; ++i) r.push_back(o.prior * (x[i] - x0[i]));
  };
  return from_x(levenberg_marquardt(fn, x0, lo, hi, o.max_iterations), start);
}

}  // namespace

StepTimeFit fit_step_times(const Calibration& base, const std::vector<StepTimeRow>& rows,
                           const StepTimeFitOptions& options) {
  // The rows that can decide a family: a host named by their source, a GPU
  // of a family without profiles, a program gpemu runs.
  std::vector<FitRow> fit_rows;
  std::set<std::string> gpus, families, hosts;
  for (const StepTimeRow& row : rows) {
    RowProgram prog = row_program(row);
    if (prog.host.empty() || prog.fit == RowFit::Unsupported) continue;
    const GpuSpec& gpu = find_gpu(prog.gpu_id);
    const bool profiled = std::find(base.calibrated_families.begin(), base.calibrated_families.end(),
                                    gpu.architecture) != base.calibrated_families.end();
    if (profiled && !options.refit_calibrated) continue;
    FitRow r;
    r.row = &row;
    r.program = OpProgram::compile(zoo::load_model(prog.zoo_model), prog.options);
    r.peaks = gpu_peaks(gpu, prog.options);
    r.correction = base.correction(prog.zoo_model);
    r.family = zoo::load_model(prog.zoo_model).family();
    gpus.insert(gpu.id);
    families.insert(gpu.architecture);
    hosts.insert(prog.host);
    fit_rows.push_back(std::move(r));
  }
  if (fit_rows.empty())
    throw InputError(
        "no step-time row can be fitted: fitting needs rows of a GPU family without profiles whose source names the "
        "host that measured them (rows of `gpemu reference measurement ...`, shared/tools/real-gpu/measure.py)");
  if (families.size() != 1 || hosts.size() != 1)
    throw InputError(
        fmt::format("the fitted rows span {} GPU families and {} hosts; fit one family and its host at a "
                    "time (rows of one measurement)",
                    families.size(), hosts.size()));
  std::set<std::string> models;
  for (const FitRow& r : fit_rows) models.insert(r.program.model());
  if (fit_rows.size() < static_cast<std::size_t>(options.min_rows) || models.size() < 2)
    throw InputError(
        fmt::format("{} step-time rows of {} models: a family's factors and its host need at least {} "
                    "rows of at least 2 models, so no factor is fitted to one row",
                    fit_rows.size(), models.size(), options.min_rows));

  StepTimeFit out;
  out.family = *families.begin();
  out.host = *hosts.begin();
  Params start{base.families.at(out.family), base.host(out.host).value_or(HostProfile{})};
  start.host.name = out.host;
  std::vector<FitRow*> all;
  for (FitRow& r : fit_rows) all.push_back(&r);
  const Params best = fit(all, start, options);

  // In-sample, and each row predicted by a fit without it.
  for (std::size_t i = 0; i < fit_rows.size(); ++i) {
    FitRow& r = fit_rows[i];
    StepTimeFit::Row fr;
    fr.line = r.row->line;
    fr.model = r.row->model;
    fr.precision = r.row->precision;
    fr.family = r.family;
    fr.measured_ms = r.row->published_iteration_ms;
    fr.in_sample_ms = predict_ms(r, best);
    std::vector<FitRow*> others;
    for (FitRow& q : fit_rows)
      if (&q != &r) others.push_back(&q);
    fr.left_out_ms = predict_ms(r, fit(others, start, options));
    out.rows.push_back(fr);
  }
  // Each model family's rows predicted by a fit on the other families' rows.
  std::set<std::string> model_families;
  for (const FitRow& r : fit_rows) model_families.insert(r.family);
  for (const std::string& fam : model_families) {
    std::vector<FitRow*> others;
    for (FitRow& q : fit_rows)
      if (q.family != fam) others.push_back(&q);
    const Params p = others.size() >= 2 ? fit(others, start, options) : start;
    for (std::size_t i = 0; i < fit_rows.size(); ++i)
      if (fit_rows[i].family == fam) out.rows[i].family_left_out_ms = predict_ms(fit_rows[i], p);
  }
  std::vector<double> in, loo, lfo;
  for (const StepTimeFit::Row& r : out.rows) {
    in.push_back(std::abs(r.in_sample_ms / r.measured_ms - 1) * 100);
    loo.push_back(std::abs(r.left_out_ms / r.measured_ms - 1) * 100);
    lfo.push_back(std::abs(r.family_left_out_ms / r.measured_ms - 1) * 100);
  }
  out.in_sample_median_pct = common::median(in);
  out.leave_one_out_median_pct = common::median(loo);
  out.family_left_out_median_pct = common::median(lfo);

  std::string gpu_list, model_list;
  for (const std::string& g : gpus) gpu_list += (gpu_list.empty() ? "" : ", ") + g;
  for (const std::string& m : models) model_list += (model_list.empty() ? "" : ", ") + m;
  out.calibration = base;
  Calibration& c = out.calibration;
  c.families[out.family] = best.gpu;
  if (!c.is_calibrated(out.family)) c.step_time_families.push_back(out.family);
  c.calibrated_gpus[out.family].assign(gpus.begin(), gpus.end());
  c.origin[out.family] = fmt::format(
      "calibrated on {} step times ({} rows of {}: {}; memory, FP32-form conv scale, tensor-core conv (half, TF32) and "
      "kernel-overhead factors fitted, matmul and backward pinned; leave-one-row-out median {:.1f} %)",
      gpu_list, fit_rows.size(), options.source.empty() ? std::string("measured steps") : options.source, model_list,
      out.leave_one_out_median_pct);
  HostProfile h = best.host;
  h.name = out.host;
  if (h.description.empty() || h.source == "built-in")
    h.description = fmt::format("the host that measured the {} rows, PyTorch {} eager", gpu_list, h.torch);
  h.source = fmt::format(
      "fitted on {} step times ({} rows of {}, with the {} family's factors; leave-one-row-out median {:.1f} %); "
      "optimizer_us not fitted (the rows ran foreach optimizers)",
      gpu_list, fit_rows.size(), options.source.empty() ? std::string("measured steps") : options.source, out.family,
      out.leave_one_out_median_pct);
  c.hosts[out.host] = h;
  PhaseErrors e;
  e.forward = e.backward = e.iteration = out.leave_one_out_median_pct;
  c.in_sample[out.family] = e;
  c.source += fmt::format("; {} family and host {} fitted on {} step-time rows of {}", out.family, out.host,
                          fit_rows.size(), options.source.empty() ? std::string("measured steps") : options.source);
  // Families without measurements are derived again with the new anchor.
  for (const std::string& fam : catalog_families())
    if (!c.is_calibrated(fam)) c.families.erase(fam);
  c.finish();
  return out;
}

}  // namespace gpemu

namespace gpemu {

void print_step_time_fit(const StepTimeFit& fit, std::ostream& out) {
  const FamilyFactors& f = fit.calibration.families.at(fit.family);
  const HostProfile& h = fit.calibration.hosts.at(fit.host);
  out << fmt::format(
      "\n{} fitted on {} step-time rows: memory eff {:.3f}, backward factor {:.3f}, tensor-core conv eff {:.3f} "
      "(TF32 {:.3f}), kernel overhead {:.2f} us (matmul eff {:.2f} pinned; FP32 conv eff {:.3f} and conv bytes eff "
      "{:.3f}: the "
      "fallback rule's scaled)\n",
      fit.family, fit.rows.size(), f.memory_efficiency, f.backward_factor, f.tensor_core_conv_efficiency,
      f.tf32_conv_efficiency, f.kernel_overhead_us, f.matmul_efficiency, f.conv_efficiency, f.conv_bytes_efficiency);
  out << fmt::format(
      "host {}: forward {:.1f} us, backward {:.1f} us, foreach call {:.1f} us, view {:.1f} us per op (per-parameter "
      "optimizer kernel {:.1f} us: not fitted)\n",
      fit.host, h.forward_us, h.backward_us, h.foreach_us, h.view_us, h.optimizer_us);
  out << fmt::format("{:>5} {:<16} {:<6} {:>9} {:>10} {:>9} {:>13}\n", "line", "model", "prec", "measured", "in sample",
                     "row out", "family out");
  auto pct = [](double p, double m) { return fmt::format("{:+.0f}%", (p / m - 1) * 100); };
  for (const StepTimeFit::Row& r : fit.rows)
    out << fmt::format("{:>5} {:<16} {:<6} {:>9.1f} {:>10} {:>9} {:>13}\n", r.line, r.model, r.precision, r.measured_ms,
                       pct(r.in_sample_ms, r.measured_ms), pct(r.left_out_ms, r.measured_ms),
                       pct(r.family_left_out_ms, r.measured_ms));
  out << fmt::format(
      "median APE: in sample {:.1f} %, each row left out {:.1f} %, each model family's rows left out {:.1f} %\n",
      fit.in_sample_median_pct, fit.leave_one_out_median_pct, fit.family_left_out_median_pct);
}

}  // namespace gpemu
