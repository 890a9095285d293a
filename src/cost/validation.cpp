// Validation of the calibrated models against measured profiles
// (include/gpemu/validation.h, docs/validation.md).
#include "gpemu/calibration.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "common/stats.h"
#include "cost/op_validation.h"
#include "cost/validation_json.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {

std::string_view to_string(ValidationPhase p) {
  switch (p) {
    case ValidationPhase::Forward: return "forward";
    case ValidationPhase::Backward: return "backward";
    case ValidationPhase::Iteration: return "iteration";
    case ValidationPhase::Transfer: return "transfer";
    case ValidationPhase::PeakMemory: return "peak_memory";
  }
  return "?";
}

double ValidationPoint::ape_pct() const { return std::abs(predicted - measured) / measured * 100.0; }

namespace {

// ---- OOM margin fit ----------------------------------------------------------

// The least capacity (to 1 MiB) at which the replay at `shape` fits: between
// its peak allocated and its peak reserved without a limit (it fits there:
// the limit is never reached).
std::uint64_t least_capacity(const zoo::ModelGraph& graph, zoo::Shape shape, const zoo::ReplayOptions& ro) {
  constexpr std::uint64_t MiB = 1ull << 20;
  const zoo::MemoryReplay free_run = zoo::replay_memory(graph, shape, CachingAllocator::kUnlimited, ro);
  std::uint64_t lo = free_run.peak_allocated_bytes / MiB;             // nothing less can fit
  std::uint64_t hi = (free_run.peak_reserved_bytes + MiB - 1) / MiB;  // the limit is never reached
  if (zoo::replay_memory(graph, shape, lo * MiB, ro).fits) return lo * MiB;
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (zoo::replay_memory(graph, shape, mid * MiB, ro).fits ? hi : lo) = mid;
  }
  return hi * MiB;
}

bool exact_at(const OomCheck& o, double margin) {
  const double capacity = static_cast<double>(o.raw_capacity_bytes) / (1 + margin);
  if (static_cast<double>(o.need_last_bytes) > capacity) return false;
  return !o.measured_oom_batch || capacity < static_cast<double>(o.need_next_bytes);
}

// Margins 0..20% in steps of 0.05%; the widest run of margins with the most
// exact pairs, its middle.
struct BestMargin {
  double margin = 0, lo = 0, hi = 0;
  int exact = 0;
};
BestMargin best_margin(const std::vector<const OomCheck*>& checks) {
  constexpr int kSteps = 400;
  constexpr double kStep = 0.0005;
  std::vector<int> count(kSteps + 1, 0);
  for (int i = 0; i <= kSteps; ++i)
    for (const OomCheck* o : checks) count[i] += exact_at(*o, i * kStep);
  const int most = *std::max_element(count.begin(), count.end());
  BestMargin b;
  b.exact = most;
  int best_len = -1;
  for (int i = 0; i <= kSteps;) {
    if (count[i] != most) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 <= kSteps && count[j + 1] == most) ++j;
    if (j - i > best_len) {
      best_len = j - i;
      b.lo = i * kStep;
      b.hi = j * kStep;
      b.margin = (b.lo + b.hi) / 2;
    }
    i = j + 1;
  }
  return b;
}

// What an OomCheck's replays need besides the check itself.
struct OomJob {
  const zoo::ModelGraph* graph = nullptr;
  const GpuSpec* gpu = nullptr;
  int grid = 0;  // batch sizes 1..grid are compared
};

void check_oom(OomCheck& oc, const OomJob& job, const ValidationOptions& options, const zoo::ReplayOptions& ro) {
  const std::optional<int>& oom = oc.measured_oom_batch;
  const std::uint64_t capacity = zoo::oom_capacity(*job.gpu, options.oom_margin);
  oc.predicted_max_batch = zoo::max_batch(capacity, *job.graph, zoo::Shape{1, options.model.seq_len}, ro, job.grid);
  for (int b = 1; b <= job.grid; ++b) {
    const bool measured_fits = !oom || b < *oom;
    const bool predicted_fits = b <= oc.predicted_max_batch;
    ++oc.batches_checked;
    oc.batches_agreeing += measured_fits == predicted_fits;
  }
  oc.exact = oom ? oc.predicted_max_batch == *oom - 1 : oc.predicted_max_batch >= job.grid;
  const double largest = oom ? *oom - 1 : job.grid;  // measured largest batch that fits
  const double off = static_cast<double>(oc.predicted_max_batch) - largest;
  oc.within_2_batches = oom ? std::abs(off) <= 2 : off >= -2;
  oc.within_2pct = oom ? std::abs(off) <= 0.02 * largest + 1e-9 : off >= -0.02 * largest - 1e-9;
  if (options.oom_fit && largest >= 1) {
    oc.raw_capacity_bytes = zoo::oom_capacity(*job.gpu, 0);
    oc.need_last_bytes =
        least_capacity(*job.graph, zoo::Shape{static_cast<std::int64_t>(largest), options.model.seq_len}, ro);
    if (oom) oc.need_next_bytes = least_capacity(*job.graph, zoo::Shape{*oom, options.model.seq_len}, ro);
  }
}

// Calls f(0..n-1) on up to hardware_concurrency threads (at most 8); the
// first exception is rethrown after all threads stop.
void run_parallel(std::size_t n, const std::function<void(std::size_t)>& f) {
  const std::size_t threads = std::min<std::size_t>({n, std::max(1u, std::thread::hardware_concurrency()), 8});
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < n;) {
        try {
          f(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
          next = n;
        }
      }
    });
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

OomMarginFit fit_oom_margin(const std::vector<OomCheck>& oom, double used) {
  OomMarginFit fit;
  std::vector<const OomCheck*> all;
  std::map<std::string, std::vector<const OomCheck*>> by_gpu;
  for (const OomCheck& o : oom)
    if (o.raw_capacity_bytes > 0 && o.need_last_bytes > 0) {
      all.push_back(&o);
      by_gpu[o.gpu].push_back(&o);
    }
  if (all.empty()) return fit;
  fit.computed = true;
  fit.pairs = static_cast<int>(all.size());
  const BestMargin b = best_margin(all);
  fit.best_margin = b.margin;
  fit.best_lo = b.lo;
  fit.best_hi = b.hi;
  for (const OomCheck* o : all) {
    fit.exact_at_best += exact_at(*o, b.margin);
    fit.exact_at_used += exact_at(*o, used);
  }
  fit.used_margin = used;
  if (by_gpu.size() < 2) return fit;
  for (const auto& [gpu, held] : by_gpu) {
    std::vector<const OomCheck*> rest;
    for (const OomCheck* o : all)
      if (o->gpu != gpu) rest.push_back(o);
    OomMarginFit::Fold f;
    f.gpu = gpu;
    f.margin = best_margin(rest).margin;
    f.pairs = static_cast<int>(held.size());
    for (const OomCheck* o : held) f.exact += exact_at(*o, f.margin);
    fit.exact_held_out += f.exact;
    fit.held_out.push_back(f);
  }
  return fit;
}

}  // namespace

ErrorStats error_stats(const std::vector<double>& ape, const std::vector<double>& signed_pct) {
  ErrorStats s;
  s.n = static_cast<int>(ape.size());
  if (ape.empty()) return s;
  std::vector<double> v = ape;
  // Sorted first so the mean sums in the order it always has (bit for bit).
  std::sort(v.begin(), v.end());
  s.mean_ape_pct = common::mean(v);
  s.median_ape_pct = common::median(v);
  s.p90_ape_pct = common::percentile(v, 90);
  s.max_ape_pct = v.back();
  if (!signed_pct.empty()) s.median_bias_pct = common::median(signed_pct);
  return s;
}

ValidationReport validate(const ProfileDatabase& profiles, std::shared_ptr<const Calibration> calibration,
                          const ValidationOptions& options) {
  if (!calibration) throw Error("validate: no calibration");
  ValidationReport rep;
  rep.calibration_source = calibration->source;
  std::map<std::string, OpProgram> programs;
  std::vector<ValidationPoint> points;
  std::map<std::pair<std::string, int>, double> peak_cache;  // (model, batch) -> MiB

  zoo::ReplayOptions ro;
  ro.precision = options.model.precision;
  ro.optimizer = options.model.optimizer;
  ro.keep_grads = options.model.legacy_zero_grad;
  ro.legacy_inplace_hardtanh = options.legacy_inplace_hardtanh;
  zoo::ReplayOptions oom_ro = zoo::oom_replay_options(ro);
  oom_ro.warm_start = options.oom_warm_start;
  std::vector<OomJob> oom_jobs;  // parallel to rep.oom

  for (const Profile& p : profiles.profiles()) {
    const zoo::ModelGraph* graph = zoo::find_model(p.model);
    if (!graph) {
      rep.skipped.push_back(fmt::format("{}/{}: not in the model zoo", p.gpu, p.model));
      continue;
    }
    if (p.precision != Precision::FP32) {
      rep.skipped.push_back(fmt::format("{}/{}: precision {} (only fp32 profiles are validated)", p.gpu, p.model,
                                        to_string(p.precision)));
      continue;
    }
    const GpuSpec& gpu = find_gpu(p.gpu);
    auto pit = programs.find(p.model);
    if (pit == programs.end()) pit = programs.emplace(p.model, OpProgram::compile(*graph, options.model)).first;
    const OpProgram& prog = pit->second;
    const GpuPeaks peaks = gpu_peaks(gpu, options.model);
    const FamilyFactors& f = calibration->factors(gpu);
    const ModelCorrection corr = calibration->correction(p.model);
    for (OpClassPoint& pt : op_class_points(p, prog, peaks, f, corr)) rep.op_classes.push_back(std::move(pt));

    auto predict = [&](const Series& s, bool backward) {
      std::vector<double> b, out(s.size());
      for (const ProfilePoint& pt : s) b.push_back(pt.batch_size);
      predict_phase_seconds(prog, backward, b, peaks, f, corr, out);
      return out;
    };
    const std::vector<double> fwd = predict(p.forward_s, false), bwd = predict(p.backward_s, true);
    std::map<int, std::pair<double, double>> fwd_at, bwd_at;  // batch -> (measured, predicted)
    for (std::size_t i = 0; i < fwd.size(); ++i) {
      if (!(p.forward_s[i].value > 0)) continue;
      points.push_back(
          {p.gpu, p.model, ValidationPhase::Forward, p.forward_s[i].batch_size, p.forward_s[i].value, fwd[i]});
      fwd_at[p.forward_s[i].batch_size] = {p.forward_s[i].value, fwd[i]};
    }
    for (std::size_t i = 0; i < bwd.size(); ++i) {
      if (!(p.backward_s[i].value > 0)) continue;
      points.push_back(
          {p.gpu, p.model, ValidationPhase::Backward, p.backward_s[i].batch_size, p.backward_s[i].value, bwd[i]});
      bwd_at[p.backward_s[i].batch_size] = {p.backward_s[i].value, bwd[i]};
    }
    for (const auto& [b, fm] : fwd_at) {
      auto it = bwd_at.find(b);
      if (it == bwd_at.end()) continue;
      points.push_back(
          {p.gpu, p.model, ValidationPhase::Iteration, b, fm.first + it->second.first, fm.second + it->second.second});
    }

    // Transfer: the PCIe model for the host memory the rows were copied from.
    if (!p.transfer_s.empty()) {
      const PcieModel pcie = PcieModel::for_link(gpu.pcie_gen, gpu.pcie_lanes);
      const std::uint64_t per_sample =
          p.input_bytes_per_sample > 0 ? p.input_bytes_per_sample : graph->input_bytes_per_sample();
      for (const ProfilePoint& pt : p.transfer_s) {
        if (!(pt.value > 0)) continue;
        const double bytes = static_cast<double>(per_sample) * pt.batch_size;
        const double s =
            to_seconds(pcie.latency(p.transfer_host_memory)) + bytes / (pcie.gbs(p.transfer_host_memory) * 1e9);
        points.push_back({p.gpu, p.model, ValidationPhase::Transfer, pt.batch_size, pt.value, s});
      }
    }

    if (!options.memory) continue;
    for (const ProfilePoint& pt : p.peak_allocated_mib) {
      if (!(pt.value > 0)) continue;
      // Without a capacity limit the replay does not depend on the GPU.
      auto [it, fresh] = peak_cache.try_emplace({p.model, pt.batch_size}, 0.0);
      if (fresh) {
        const zoo::MemoryReplay r = zoo::replay_memory(*graph, zoo::Shape{pt.batch_size, options.model.seq_len},
                                                       CachingAllocator::kUnlimited, ro);
        it->second = static_cast<double>(r.peak_allocated_bytes) / 1048576.0;
      }
      points.push_back({p.gpu, p.model, ValidationPhase::PeakMemory, pt.batch_size, pt.value, it->second});
    }
    // OOM decision: only pairs with compute measurements (their tables end
    // where the card ran out of memory, or at the profiling grid).
    if (p.forward_s.empty() && p.backward_s.empty()) continue;
    OomCheck oc;
    oc.gpu = p.gpu;
    oc.model = p.model;
    oc.measured_oom_batch = p.oom_batch_size;
    for (const Series* s : {&p.forward_s, &p.backward_s})
      if (!s->empty()) oc.measured_last_batch = std::max(oc.measured_last_batch, s->back().batch_size);
    const int grid = std::max({options.oom_grid, oc.measured_last_batch, p.oom_batch_size.value_or(0)});
    oom_jobs.push_back({graph, &gpu, grid});
    rep.oom.push_back(oc);
  }

  // OOM decisions: independent replays per pair, run on several threads.
  run_parallel(rep.oom.size(), [&](std::size_t i) { check_oom(rep.oom[i], oom_jobs[i], options, oom_ro); });

  // Statistics.
  std::map<std::pair<std::string, ValidationPhase>, std::pair<std::vector<double>, std::vector<double>>> by_gpu,
      by_model;
  std::map<ValidationPhase, std::pair<std::vector<double>, std::vector<double>>> all;
  for (const ValidationPoint& pt : points) {
    const double ape = pt.ape_pct(), sgn = (pt.predicted / pt.measured - 1) * 100;
    for (auto* m : {&by_gpu[{pt.gpu, pt.phase}], &by_model[{pt.model, pt.phase}], &all[pt.phase]}) {
      m->first.push_back(ape);
      m->second.push_back(sgn);
    }
  }
  for (const auto& [k, v] : by_gpu) rep.per_gpu[k.first][k.second] = error_stats(v.first, v.second);
  for (const auto& [k, v] : by_model) rep.per_model[k.first][k.second] = error_stats(v.first, v.second);
  for (const auto& [k, v] : all) rep.overall[k] = error_stats(v.first, v.second);
  for (ValidationPhase ph : kValidationPhases) {
    std::vector<ValidationPoint> w;
    for (const ValidationPoint& pt : points)
      if (pt.phase == ph) w.push_back(pt);
    std::sort(w.begin(), w.end(),
              [](const ValidationPoint& a, const ValidationPoint& b) { return a.ape_pct() > b.ape_pct(); });
    if (w.size() > static_cast<std::size_t>(options.worst_cases)) w.resize(options.worst_cases);
    if (!w.empty()) rep.worst[ph] = std::move(w);
  }
  long checked = 0, agreeing = 0, exact = 0;
  for (const OomCheck& o : rep.oom) {
    checked += o.batches_checked;
    agreeing += o.batches_agreeing;
    exact += o.exact;
  }
  rep.oom_agreement_pct = checked ? 100.0 * static_cast<double>(agreeing) / static_cast<double>(checked) : 0;
  rep.oom_exact_pct = rep.oom.empty() ? 0 : 100.0 * static_cast<double>(exact) / static_cast<double>(rep.oom.size());
  long within2 = 0, within2pct = 0;
  std::vector<double> errors;
  for (const OomCheck& o : rep.oom) {
    within2 += o.within_2_batches;
    within2pct += o.within_2pct;
    if (o.measured_oom_batch && *o.measured_oom_batch > 1)
      errors.push_back((static_cast<double>(o.predicted_max_batch) / (*o.measured_oom_batch - 1) - 1) * 100);
  }
  const double pairs = static_cast<double>(rep.oom.size());
  rep.oom_within_2_batches_pct = rep.oom.empty() ? 0 : 100.0 * static_cast<double>(within2) / pairs;
  rep.oom_within_2pct_pct = rep.oom.empty() ? 0 : 100.0 * static_cast<double>(within2pct) / pairs;
  rep.oom_median_error_pct = common::median(errors);
  if (options.oom_fit) rep.oom_fit = fit_oom_margin(rep.oom, options.oom_margin);
  if (options.keep_points) rep.points = std::move(points);
  return rep;
}

}  // namespace gpemu
