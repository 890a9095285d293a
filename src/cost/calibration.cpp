// The Calibration record: lookups, fallbacks for families without
// measurements, expected errors (its JSON file, data/calibration.json, is
// calibration_file.cpp's).
#include "gpemu/calibration.h"
#include "common/message_text.h"
#include "cost/host_profile_json.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {

namespace {

const FamilyFactors& builtin_factors() {
  static const FamilyFactors f{};
  return f;
}

PhaseErrors worse(const PhaseErrors& a, const PhaseErrors& b) {
  return {std::max(a.forward, b.forward), std::max(a.backward, b.backward), std::max(a.iteration, b.iteration)};
}

}  // namespace

// ---- program evidence ------------------------------------------------------------

double covering_quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<double>(values.size());
  const auto k = static_cast<std::size_t>(std::max(1.0, std::ceil(q * n - 1e-9)));
  return values[std::min(k, values.size()) - 1];
}

std::string evidence_precision(const AnalyticalOptions& o, const GpuSpec& gpu, std::string_view model_family) {
  // Fused attention is a program of its own (no S x S tensors, its own
  // kernel's efficiency): "<precision>+sdpa".
  if (o.variant.attention == AttentionKernel::Fused) {
    AnalyticalOptions eager = o;
    eager.variant.attention = AttentionKernel::Eager;
    return evidence_precision(eager, gpu, model_family) + "+sdpa";
  }
  // Pure half is another program than autocast (no casts, FP16 softmax and
  // LayerNorm, master weights): evidence of its own.
  if (o.precision == zoo::Precision::HALF_FP16) return "half";
  if (o.precision == zoo::Precision::HALF_BF16) return "half_bf16";
  if (o.precision == zoo::Precision::AMP_BF16) return "bf16";
  if (o.precision == zoo::Precision::AMP_FP16) return "amp";
  const bool convolutional = model_family == "cnn" || model_family == "unet";
  const bool tf32 = o.tf32_matmul || (convolutional && o.tf32_conv);
  return tf32 && gpu.peak_tflops(Precision::TF32) ? "tf32" : "fp32";
}

std::string evidence_kind(std::string_view model_family, std::string_view precision) {
  return fmt::format("{} x {}", model_family, precision);
}

const std::pair<const std::string, ProgramEvidence>* Calibration::widest_program_kind() const {
  const std::pair<const std::string, ProgramEvidence>* widest = nullptr;
  for (const auto& kv : program_errors)
    if (kv.second.rows >= kMinEvidenceRows && (!widest || kv.second.p80_pct > widest->second.p80_pct)) widest = &kv;
  return widest;
}

// ---- families --------------------------------------------------------------------

std::vector<std::string> catalog_families() {
  std::vector<std::string> out;
  for (const GpuSpec& g : gpu_catalog())
    if (std::find(out.begin(), out.end(), g.architecture) == out.end()) out.push_back(g.architecture);
  return out;
}

const std::vector<std::string>& family_fallback_order(std::string_view family) {
  // Closest first: same memory technology and tensor-core generation, then
  // the neighbouring generations.
  static const std::map<std::string, std::vector<std::string>, std::less<>> order = {
      {"Kepler", {"Maxwell", "Pascal", "Volta", "Turing", "Ampere"}},
      {"Maxwell", {"Pascal", "Kepler", "Volta", "Turing", "Ampere"}},
      {"Pascal", {"Volta", "Maxwell", "Turing", "Ampere", "Kepler"}},
      {"Volta", {"Turing", "Ampere", "Pascal", "Maxwell"}},
      {"Turing", {"Volta", "Ampere", "Ada", "Pascal"}},
      {"Ampere", {"Ada", "Hopper", "Volta", "Turing", "Blackwell"}},
      {"Ada", {"Ampere", "Hopper", "Turing", "Blackwell", "Volta"}},
      {"Hopper", {"Ampere", "Blackwell", "Ada", "Volta"}},
      {"Blackwell", {"Hopper", "Ampere", "Ada", "Volta"}},
      {"CDNA3", {"Hopper", "Ampere", "Blackwell", "Volta"}},
  };
  static const std::vector<std::string> none;
  auto it = order.find(family);
  return it == order.end() ? none : it->second;
}

std::string_view to_string(FallbackRule r) {
  switch (r) {
    case FallbackRule::Nearest: return "nearest";
    case FallbackRule::Trend: return "trend";
    case FallbackRule::GeometricMean: break;
  }
  return "geometric_mean";
}

std::optional<FallbackRule> parse_fallback_rule(std::string_view name) {
  for (FallbackRule r : kFallbackRules)
    if (to_string(r) == name) return r;
  return std::nullopt;
}

// ---- lookups -----------------------------------------------------------------------

const FamilyFactors& Calibration::factors(const GpuSpec& gpu) const {
  if (auto g = gpu_factors.find(gpu.id); g != gpu_factors.end()) return g->second;
  auto it = families.find(gpu.architecture);
  return it == families.end() ? builtin_factors() : it->second;
}

ModelCorrection Calibration::correction(std::string_view model) const {
  auto it = models.find(canonical_model_name(model));
  return it == models.end() ? ModelCorrection{} : it->second;
}

bool Calibration::has_correction(std::string_view model) const { return models.count(canonical_model_name(model)) > 0; }

bool Calibration::is_calibrated(std::string_view family) const {
  return std::find(calibrated_families.begin(), calibrated_families.end(), family) != calibrated_families.end() ||
         std::find(step_time_families.begin(), step_time_families.end(), family) != step_time_families.end();
}

std::string Calibration::origin_of(std::string_view family) const {
  auto it = origin.find(std::string(family));
  return it == origin.end() ? std::string("built-in defaults") : it->second;
}

std::string Calibration::origin_of(const GpuSpec& gpu) const {
  auto it = gpu_origin.find(gpu.id);
  return it == gpu_origin.end() ? origin_of(gpu.architecture) : it->second;
}

void Calibration::finish() {
  for (const std::string& fam : catalog_families()) {
    if (families.count(fam)) continue;
    if (calibrated_families.empty()) {
      families[fam] = builtin_factors();
      origin[fam] = "built-in defaults (no family calibrated)";
      continue;
    }
    if (fallback == FallbackRule::Nearest) {
      bool done = false;
      for (const std::string& other : family_fallback_order(fam)) {
        if (!is_calibrated(other)) continue;
        families[fam] = families.at(other);
        origin[fam] = fmt::format("{}'s factors (no {} measurements)", other, fam);
        done = true;
        break;
      }
      if (done) continue;
    }
    // Geometric mean of every calibrated family's factors.
    FamilyFactors g;
    for (int i = 0; i < kFamilyFactorCount; ++i) {
      double s = 0;
      for (const std::string& c : calibrated_families) s += std::log(factor_at(families.at(c), i));
      factor_at(g, i) = std::exp(s / static_cast<double>(calibrated_families.size()));
    }
    families[fam] = g;
    std::string list;
    for (const std::string& c : calibrated_families) list += (list.empty() ? "" : ", ") + c;
    origin[fam] = fmt::format("geometric mean of the calibrated families' factors ({}; no {} measurements)", list, fam);
  }
  gpu_factors.clear();
  gpu_origin.clear();
  if (fallback == FallbackRule::Trend) fill_trend_factors();
  fill_sibling_factors();
}

// A family fitted on one GPU's step times (step_time_families): its other
// GPUs get its factors with the memory-bound kernels' rate kept, not their
// fraction of the DRAM bandwidth. The GH100 die runs eager PyTorch's
// elementwise and normalisation kernels at about the same GB/s with the
// H200's HBM3e (4.8 TB/s) as with the H100's HBM3 (3.35 TB/s): the fitted
// H200 fraction, 0.44, is 2.1 TB/s, and the geometric mean of the profiled
// families, 0.63 of the H100's bandwidth, is 2.1 TB/s too (docs/host.md). A
// card with less bandwidth than that rate is capped at kMaxMemoryEfficiency.
void Calibration::fill_sibling_factors() {
  constexpr double kMaxMemoryEfficiency = 0.9;
  for (const std::string& fam : step_time_families) {
    auto it = calibrated_gpus.find(fam);
    if (it == calibrated_gpus.end() || it->second.empty()) continue;
    const GpuSpec* anchor = try_find_gpu(it->second.front());
    if (!anchor || anchor->memory_bandwidth_gbs <= 0) continue;
    const FamilyFactors& base = families.at(fam);
    const double rate = base.memory_efficiency * anchor->memory_bandwidth_gbs;
    for (const GpuSpec& g : gpu_catalog()) {
      if (g.architecture != fam || g.memory_bandwidth_gbs <= 0) continue;
      if (std::find(it->second.begin(), it->second.end(), g.id) != it->second.end()) continue;
      FamilyFactors f = base;
      f.memory_efficiency = std::min(kMaxMemoryEfficiency, rate / g.memory_bandwidth_gbs);
      gpu_factors[g.id] = f;
      gpu_origin[g.id] = fmt::format(
          "{}'s factors ({} family fitted on its step times), memory-bound kernels at its "
          "{:.0f} GB/s: memory efficiency {:.3f} of {:.0f} GB/s",
          anchor->id, fam, rate, f.memory_efficiency, g.memory_bandwidth_gbs);
    }
  }
}

// The trend rule. Anchors: the calibrated GPUs, by FP32 peak. A GPU of an
// uncalibrated family between two anchors gets, per GPU-side factor, the
// log-log interpolation in FP32 peak of the anchors' values; the convolution
// bytes term is interpolated as an effective rate (factor x bandwidth, GB/s),
// since it follows the chip's on-chip throughput rather than its DRAM (P100's
// HBM2 did not speed it up). Host-side factors (launch_*) describe the host
// the GPU was measured in, not the GPU: they keep the family's fallback (the
// geometric mean). Outside the anchors' span nothing is extrapolated.
void Calibration::fill_trend_factors() {
  struct Anchor {
    const GpuSpec* gpu;
    const FamilyFactors* f;
  };
  std::vector<Anchor> anchors;
  for (const std::string& fam : calibrated_families) {
    auto it = calibrated_gpus.find(fam);
    if (it == calibrated_gpus.end()) continue;
    for (const std::string& id : it->second)
      if (const GpuSpec* g = try_find_gpu(id); g && g->fp32_tflops > 0) anchors.push_back({g, &families.at(fam)});
  }
  std::sort(anchors.begin(), anchors.end(),
            [](const Anchor& a, const Anchor& b) { return a.gpu->fp32_tflops < b.gpu->fp32_tflops; });
  auto scale = [](const GpuSpec& g, int i) {
    return family_factor_names()[i] == "conv_bytes_efficiency" ? g.memory_bandwidth_gbs : 1.0;
  };
  auto host_side = [](int i) { return family_factor_names()[i].starts_with("launch_"); };
  for (const GpuSpec& g : gpu_catalog()) {
    if (is_calibrated(g.architecture) || g.fp32_tflops <= 0 || g.memory_bandwidth_gbs <= 0) continue;
    const double x = std::log(g.fp32_tflops);
    const Anchor* lo = nullptr;
    const Anchor* hi = nullptr;
    for (const Anchor& a : anchors) {
      if (a.gpu->fp32_tflops <= g.fp32_tflops) lo = &a;
      if (a.gpu->fp32_tflops >= g.fp32_tflops && !hi) hi = &a;
    }
    if (!lo || !hi) continue;
    const double x0 = std::log(lo->gpu->fp32_tflops), x1 = std::log(hi->gpu->fp32_tflops);
    const double t = x1 > x0 ? (x - x0) / (x1 - x0) : 0.0;
    FamilyFactors f = families.at(g.architecture);
    for (int i = 0; i < kFamilyFactorCount; ++i) {
      if (host_side(i)) continue;
      const double v0 = std::log(factor_at(*lo->f, i) * scale(*lo->gpu, i));
      const double v1 = std::log(factor_at(*hi->f, i) * scale(*hi->gpu, i));
      factor_at(f, i) = std::exp(v0 + t * (v1 - v0)) / scale(g, i);
    }
    gpu_factors[g.id] = f;
    gpu_origin[g.id] =
        lo == hi ? fmt::format("trend: {}'s rates (same FP32 peak; no {} measurements)", lo->gpu->id, g.architecture)
                 : fmt::format("trend: interpolated in FP32 peak between {} and {} (no {} measurements)", lo->gpu->id,
                               hi->gpu->id, g.architecture);
  }
}

bool Calibration::measured_die(const GpuSpec& gpu) const {
  auto it = calibrated_gpus.find(gpu.architecture);
  if (it == calibrated_gpus.end()) return calibrated_gpus.empty();  // a file without the list: by family
  for (const std::string& id : it->second) {
    if (id == gpu.id) return true;
    const GpuSpec* g = try_find_gpu(id);
    if (g && !g->chip.empty() && g->chip == gpu.chip) return true;
  }
  return false;
}

std::string Calibration::calibrated_chips(const std::string& family) const {
  std::vector<std::string> chips;
  if (auto it = calibrated_gpus.find(family); it != calibrated_gpus.end())
    for (const std::string& id : it->second) {
      const GpuSpec* g = try_find_gpu(id);
      const std::string c = g && !g->chip.empty() ? g->chip : id;
      if (std::find(chips.begin(), chips.end(), c) == chips.end()) chips.push_back(c);
    }
  std::string out;
  for (const std::string& c : chips) out += (out.empty() ? "" : ", ") + c;
  return out;
}

std::optional<ExpectedError> Calibration::expected_error(const GpuSpec& gpu, std::string_view model,
                                                         std::string_view model_family,
                                                         std::string_view precision) const {
  const std::string& fam = gpu.architecture;
  // In-sample only for a die the profiles measured: A10 (GA102) takes
  // Ampere's factors from A100 (GA100) profiles, but nothing measured it.
  const std::string measured_chips = calibrated_chips(fam);
  const bool calibrated = is_calibrated(fam) && measured_die(gpu);
  const bool corrected = has_correction(model);
  std::optional<PhaseErrors> e;
  std::vector<std::string> basis;
  if (calibrated && corrected) {
    if (auto it = in_sample.find(fam); it != in_sample.end()) {
      e = it->second;
      basis.push_back(fmt::format("in-sample: {} calibrated, {} measured", fam, canonical_model_name(model)));
    }
  }
  if (!corrected) {
    auto it = models_left_out.find(std::string(model_family));
    std::string used(model_family);
    if (it == models_left_out.end() && !models_left_out.empty()) {
      it = models_left_out.find("cnn");
      if (it == models_left_out.end()) it = models_left_out.begin();
      used = it->first;
    }
    if (it != models_left_out.end()) {
      e = e ? worse(*e, it->second) : it->second;
      basis.push_back(used == model_family
                          ? fmt::format("models left out ({} family)", used)
                          : fmt::format("models left out ({} family; no {} model was measured)", used, model_family));
    }
  }
  if (!calibrated) {
    std::optional<PhaseErrors> g = gpu_left_out_overall;
    if (auto it = gpu_left_out.find(fam); it != gpu_left_out.end()) g = it->second;
    if (g) {
      e = e ? worse(*e, *g) : *g;
      basis.push_back(is_calibrated(fam)
                          ? fmt::format("GPUs left out ({} is {}; {} was calibrated on {} only)", gpu.id,
                                        gpu.chip.empty() ? "an unknown die" : gpu.chip, fam, measured_chips)
                          : fmt::format("GPUs left out ({} not calibrated)", fam));
    }
  }
  if (!precision.empty() && !program_errors.empty()) {
    // Published step times of programs of this kind: the error that covers
    // kEvidenceQuantile of them, or the widest kind's when this kind has
    // too few rows to say.
    const std::string kind = evidence_kind(model_family, precision);
    const auto it = program_errors.find(kind);
    const auto* use = it != program_errors.end() && it->second.rows >= kMinEvidenceRows ? &*it : widest_program_kind();
    if (use) {
      const double p = use->second.p80_pct;
      e = e ? worse(*e, PhaseErrors{p, p, p}) : PhaseErrors{p, p, p};
      basis.push_back(use->first == kind
                          ? fmt::format("published step times of {} programs: {:.0f}% covers 80% of {} rows", kind, p,
                                        use->second.rows)
                          : fmt::format("{} programs {} in the published step times: the widest kind's error ({}, "
                                        "{:.0f}%)",
                                        kind, it == program_errors.end() ? "are not" : "are too few", use->first, p));
    }
  }
  if (!e) return std::nullopt;
  std::string b;
  for (const std::string& s : basis) b += (b.empty() ? "" : "; ") + s;
  return ExpectedError{*e, b};
}

Calibration default_calibration() {
  Calibration c;
  c.source = "built-in default factors (data/calibration.json absent)";
  c.finish();
  return c;
}

std::filesystem::path default_calibration_path() { return zoo::data_dir() / "data" / "calibration.json"; }

std::shared_ptr<const Calibration> load_default_calibration() {
  static std::mutex mutex;
  static std::map<std::filesystem::path, std::shared_ptr<const Calibration>> cache;
  const std::filesystem::path p = default_calibration_path();
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(p); it != cache.end()) return it->second;
  std::shared_ptr<const Calibration> c = std::filesystem::exists(p)
                                             ? std::make_shared<const Calibration>(Calibration::load(p))
                                             : std::make_shared<const Calibration>(default_calibration());
  cache[p] = c;
  return c;
}

namespace {

// The H200 host's costs as fitted at the time of writing (docs/host.md), for
// a calibration file that lacks the fitted profile.
HostProfile builtin_default_host() {
  HostProfile h;
  h.name = std::string(kDefaultHost);
  h.description = "16-core host of an NVIDIA H200, PyTorch 2.11 eager (built-in values; the calibration file has none)";
  h.source = "built-in";
  h.torch = "2.11";
  h.forward_us = 20;
  h.backward_us = 8;
  h.optimizer_us = 30;
  h.foreach_us = 30;
  h.view_us = 2;
  h.sync_us = 20;
  return h;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

std::optional<HostProfile> Calibration::host(std::string_view name) const {
  const std::string n = lower(std::string(name));
  if (n == "default" || n == "modern" || n == kDefaultHost) {
    if (auto it = hosts.find(std::string(kDefaultHost)); it != hosts.end()) return it->second;
    return builtin_default_host();
  }
  if (auto it = hosts.find(n); it != hosts.end()) return it->second;
  constexpr std::string_view prefix = "gpemu-2022-";
  if (n.starts_with(prefix)) {
    for (const std::string& fam : calibrated_families) {
      if (lower(fam) != n.substr(prefix.size())) continue;
      const FamilyFactors& f = families.at(fam);
      HostProfile h;
      h.name = n;
      h.description = fmt::format("the host of GPEmu's {} profiles (2022, PyTorch 1.x)", fam);
      h.source = fmt::format("launch factors of the {} family, {}", fam, origin_of(fam));
      h.torch = "1.x";
      h.forward_us = f.launch_forward_us;
      h.backward_us = f.launch_backward_us;
      h.optimizer_us = h.foreach_us = f.launch_optimizer_us;
      h.view_us = f.launch_view_us;
      return h;
    }
  }
  return std::nullopt;
}

std::vector<std::string> Calibration::host_names() const {
  std::vector<std::string> names = {"default"};
  if (!hosts.count(std::string(kDefaultHost))) names.emplace_back(kDefaultHost);
  for (const auto& [n, h] : hosts) names.push_back(n);
  for (const std::string& fam : calibrated_families) names.push_back("gpemu-2022-" + lower(fam));
  return names;
}

HostProfile find_host(std::string_view name_or_file, std::string_view what) {
  const std::shared_ptr<const Calibration> c = load_default_calibration();
  if (auto h = c->host(name_or_file)) return *h;
  const std::filesystem::path p{std::string(name_or_file)};
  std::error_code ec;
  if (name_or_file.empty() || !std::filesystem::is_regular_file(p, ec)) {
    std::string names;
    for (const std::string& n : c->host_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError(
        fmt::format("{} '{}': neither a host profile's name nor a host profile file; accepted: {}, or "
                    "a file written by `gpemu bench host --out FILE`",
                    what, printable_excerpt(name_or_file, 200), names));
  }
  return read_host_profile(p);
}

std::optional<ExpectedError> expected_error(const GpuSpec& gpu, std::string_view model, std::string_view precision) {
  const zoo::ModelGraph* g = zoo::find_model(model);
  return load_default_calibration()->expected_error(gpu, model, g ? g->family() : std::string("cnn"), precision);
}

}  // namespace gpemu
