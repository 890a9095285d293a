// The analytical time model (include/gpemu/analytical_model.h,
// docs/analytical-model.md): per-operator roofline terms from the model zoo,
// pipelined against the host's launch time.
#include "gpemu/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "cost/text_fields.h"
#include "gpemu/calibration.h"
#include "gpemu/error.h"

namespace gpemu {

// ---- factors ------------------------------------------------------------------

const std::vector<std::string>& family_factor_names() {
  static const std::vector<std::string> names = {"conv_efficiency",    "conv_bytes_efficiency", "matmul_efficiency",
                                                 "memory_efficiency",  "backward_factor",       "launch_forward_us",
                                                 "launch_backward_us", "launch_optimizer_us",   "launch_view_us"};
  return names;
}

double& factor_at(FamilyFactors& f, int i) {
  switch (i) {
    case 0: return f.conv_efficiency;
    case 1: return f.conv_bytes_efficiency;
    case 2: return f.matmul_efficiency;
    case 3: return f.memory_efficiency;
    case 4: return f.backward_factor;
    case 5: return f.launch_forward_us;
    case 6: return f.launch_backward_us;
    case 7: return f.launch_optimizer_us;
    case 8: return f.launch_view_us;
  }
  throw Error(fmt::format("factor index {} out of range", i));
}

double factor_at(const FamilyFactors& f, int i) { return factor_at(const_cast<FamilyFactors&>(f), i); }

FamilyFactors with_host(FamilyFactors f, const HostProfile& host) {
  f.launch_forward_us = host.forward_us;
  f.launch_backward_us = host.backward_us;
  f.launch_optimizer_us = host.optimizer_us;
  f.launch_foreach_us = host.foreach_us;
  f.launch_view_us = host.view_us;
  return f;
}

// ---- the math -----------------------------------------------------------------

double conv_flop_efficiency(const OpProgram::Op& op, const FamilyFactors& f) {
  return op.direct_conv ? std::min(f.conv_efficiency, f.matmul_efficiency) : f.conv_efficiency;
}

GpuPeaks gpu_peaks(const GpuSpec& gpu, const AnalyticalOptions& options) {
  if (gpu.fp32_tflops <= 0 || gpu.memory_bandwidth_gbs <= 0)
    throw InputError(
        fmt::format("GPU {} has no FP32 peak or memory bandwidth in the catalog; the analytical model "
                    "needs both",
                    gpu.id));
  GpuPeaks p;
  const double fp32 = gpu.fp32_tflops * 1e12;
  // PyTorch on ROCm does not use XF32/TF32 by default: MI300X's FP32 matrix
  // rate is the catalog's FP32 figure; its vector FP32 rate is half of it
  // (the figure counts packed FP32).
  const bool cdna = gpu.architecture.starts_with("CDNA");
  const bool tf32 = gpu.tf32_tflops > 0 && !cdna;
  p.conv_f32 = options.tf32_conv && tf32 ? gpu.tf32_tflops * 1e12 : fp32;
  p.matmul_f32 = options.tf32_matmul && tf32 ? gpu.tf32_tflops * 1e12 : fp32;
  p.f16 = gpu.fp16_tflops > 0 ? gpu.fp16_tflops * 1e12 : fp32;
  p.bf16 = gpu.bf16_tflops > 0 ? gpu.bf16_tflops * 1e12 : fp32;  // no native BF16: emulated at best
  p.vector_f32 = cdna ? fp32 / 2 : fp32;
  p.bandwidth = gpu.memory_bandwidth_gbs * 1e9;
  return p;
}

namespace {

// One op's GPU time as seconds = combine(FLOPs x per_flop, bytes x per_byte):
// the sum for FP32-form convolutions, the larger of the two (a roofline)
// otherwise; before backward_factor and corrections, with op.weight.
// FLOPs per byte below which an FP32 convolution is depthwise-like (a 3x3
// depthwise convolution does 18 FLOPs per output element for 8 bytes read
// and written: 2.25; the thinnest grouped convolutions of the zoo, ResNeXt's
// 4 channels per group, do 9 per byte).
constexpr double kDepthwiseIntensity = 4;

struct OpCoefficients {
  double per_flop = 0, per_byte = 0;
  double overhead = 0;  // seconds per kernel (FamilyFactors::kernel_overhead_us)
  bool summed = false;
};

OpCoefficients op_coefficients(const OpProgram::Op& op, const GpuPeaks& peaks, const FamilyFactors& f) {
  using Kind = OpProgram::Kind;
  OpCoefficients k;
  if (op.kind == Kind::View) return k;
  double matrix = op.kind == Kind::Matmul ? peaks.matmul_f32 : peaks.conv_f32;
  if (op.math == OpProgram::Math::F16) matrix = peaks.f16;
  if (op.math == OpProgram::Math::BF16) matrix = peaks.bf16;
  // An FP32 convolution runs on tensor cores when cuDNN's TF32 is on and
  // the card has TF32 (its conv peak is then above the vector FP32 rate).
  const bool tf32 = op.math == OpProgram::Math::F32 && peaks.conv_f32 > peaks.vector_f32;
  // A depthwise convolution (one channel per group: a few FLOPs per byte)
  // is no GEMM and takes no tensor cores in TF32: cuDNN runs its FP32
  // kernels, the form the FP32 factors describe.
  // Per sample for a zoo op (its slope in the batch size); a live op of
  // `gpemu torch` has its FLOPs and bytes at batch 0 only.
  const double intensity = op.bytes1 > 0 ? op.flops1 / op.bytes1 : op.bytes0 > 0 ? op.flops0 / op.bytes0 : 0;
  const bool depthwise_f32 = op.math == OpProgram::Math::F32 && intensity < kDepthwiseIntensity;
  const bool tensor_core_form =
      f.tensor_core_conv_efficiency > 0 && (op.math != OpProgram::Math::F32 || (tf32 && !depthwise_f32));
  const double w = op.weight;
  k.per_byte = w / (peaks.bandwidth * f.memory_efficiency);
  k.overhead = w * f.kernel_overhead_us * 1e-6;
  switch (op.kind) {
    case Kind::Conv:
      if (tensor_core_form) {
        const bool tf32_form = op.math == OpProgram::Math::F32 && f.tf32_conv_efficiency > 0;
        k.per_flop = w / (matrix * (tf32_form ? f.tf32_conv_efficiency : f.tensor_core_conv_efficiency));
      } else if (op.math != OpProgram::Math::F32) {
        k.per_flop = w / (matrix * f.matmul_efficiency);
      } else {
        k.summed = true;
        k.per_flop = w / (matrix * conv_flop_efficiency(op, f));
        k.per_byte = w / (peaks.bandwidth * f.conv_bytes_efficiency);
      }
      break;
    case Kind::Matmul:
      // A fused attention kernel on FP32 inputs (PyTorch's memory-efficient
      // kernel: FlashAttention takes half precision only) multiplies in FP32
      // on the SIMT cores, not in TF32.
      if (op.attention && op.math == OpProgram::Math::F32) matrix = peaks.vector_f32;
      k.per_flop = w / (matrix * (op.attention ? kAttentionEfficiency : f.matmul_efficiency));
      break;
    case Kind::Memory: k.per_flop = w / peaks.vector_f32; break;
    case Kind::View: break;
  }
  return k;
}

double combine(const OpCoefficients& k, double flops, double bytes) {
  const double a = flops * k.per_flop, b = bytes * k.per_byte;
  return (k.summed ? a + b : std::max(a, b)) + k.overhead;
}

}  // namespace

double op_gpu_seconds(const OpProgram::Op& op, double batch, const GpuPeaks& peaks, const FamilyFactors& f) {
  return combine(op_coefficients(op, peaks, f), op.flops0 + op.flops1 * batch, op.bytes0 + op.bytes1 * batch);
}

namespace {

double launch_seconds(const OpProgram::Op& op, const FamilyFactors& f) {
  if (op.kind == OpProgram::Kind::View) return f.launch_view_us * 1e-6;
  switch (op.section) {
    case OpProgram::Section::Forward:
    case OpProgram::Section::Loss: return f.launch_forward_us * 1e-6;
    case OpProgram::Section::Backward: return f.launch_backward_us * 1e-6;
    case OpProgram::Section::ZeroGrad:
    case OpProgram::Section::Optimizer:
      return (op.foreach_call && f.launch_foreach_us > 0 ? f.launch_foreach_us : f.launch_optimizer_us) * 1e-6;
  }
  return 0;
}

bool takes_backward_factor(const OpProgram::Op& op) {
  return op.section == OpProgram::Section::Backward && op.kind != OpProgram::Kind::Matmul;
}

void pipeline_many(const std::vector<OpProgram::Op>& ops, std::span<const double> batches, const GpuPeaks& peaks,
                   const FamilyFactors& f, double gpu_scale, double host_scale, std::span<double> out) {
  const std::size_t n = batches.size();
  if (out.size() != n) throw Error("predict_phase_seconds: batches and out differ in size");
  std::fill(out.begin(), out.end(), 0.0);
  double host = 0;
  for (const OpProgram::Op& op : ops) {
    host += launch_seconds(op, f) * host_scale * op.weight;
    if (op.kind == OpProgram::Kind::View) {
      for (std::size_t r = 0; r < n; ++r) out[r] = std::max(out[r], host);
      continue;
    }
    OpCoefficients k = op_coefficients(op, peaks, f);
    const double scale = gpu_scale * (takes_backward_factor(op) ? f.backward_factor : 1.0);
    k.per_flop *= scale;
    k.per_byte *= scale;
    k.overhead *= gpu_scale;
    for (std::size_t r = 0; r < n; ++r) {
      const double b = batches[r];
      out[r] = std::max(out[r], host) + combine(k, op.flops0 + op.flops1 * b, op.bytes0 + op.bytes1 * b);
    }
  }
  for (std::size_t r = 0; r < n; ++r) out[r] = std::max(out[r], host);
}

}  // namespace

double op_kernel_seconds(const OpProgram::Op& op, double batch, const GpuPeaks& peaks, const FamilyFactors& f) {
  return op_gpu_seconds(op, batch, peaks, f) * (takes_backward_factor(op) ? f.backward_factor : 1.0);
}

double op_launch_seconds(const OpProgram::Op& op, const FamilyFactors& f) { return launch_seconds(op, f) * op.weight; }

namespace {

const FamilyFactors& issued_factors(const OpProgram& program, const FamilyFactors& f, FamilyFactors& storage) {
  if (!program.host()) return f;
  storage = with_host(f, *program.host());
  return storage;
}

// One phase's host issue time and GPU kernel time, unpipelined.
void phase_sums(const std::vector<OpProgram::Op>& ops, double batch, const GpuPeaks& peaks, const FamilyFactors& f,
                double gpu_scale, double host_scale, double& host, double& gpu) {
  host = gpu = 0;
  for (const OpProgram::Op& op : ops) {
    host += launch_seconds(op, f) * host_scale * op.weight;
    gpu += op_kernel_seconds(op, batch, peaks, f) * gpu_scale;
  }
}

// Consecutive steps issued back to back: the host issues each op after its
// launch time, blocks while CUDA's launch queue is full, and waits for the
// GPU (plus the read-back's cost) after a sync_after op; the GPU runs each
// kernel once issued and once the previous one ended. The steady state is
// the third step's end minus the second's.
double pipelined_step(const OpProgram& program, double batch, const GpuPeaks& peaks, const FamilyFactors& f,
                      const ModelCorrection& c, const HostProfile& host_profile, int& syncs) {
  const std::size_t depth = static_cast<std::size_t>(std::max(1, host_profile.launch_queue_depth));
  std::vector<double> ring(depth, 0.0);  // end times of the last `depth` kernels
  std::size_t issued = 0;
  double host = 0, gpu = 0, ends[3] = {0, 0, 0};
  syncs = 0;
  for (int step = 0; step < 3; ++step) {
    for (int phase = 0; phase < 2; ++phase) {
      const bool bwd = phase == 1;
      const double hs = bwd ? c.backward_host : c.forward_host, gs = bwd ? c.backward_gpu : c.forward_gpu;
      for (const OpProgram::Op& op : bwd ? program.backward() : program.forward()) {
        host += launch_seconds(op, f) * hs * op.weight;
        if (op.kind == OpProgram::Kind::View) continue;
        if (issued >= depth) host = std::max(host, ring[issued % depth]);  // the oldest queued kernel must end
        gpu = std::max(gpu, host) + op_kernel_seconds(op, batch, peaks, f) * gs;
        ring[issued % depth] = gpu;
        ++issued;
        if (op.sync_after) {
          host = std::max(host, gpu) + host_profile.sync_us * 1e-6;
          if (step == 0) ++syncs;
        }
      }
    }
    ends[step] = std::max(gpu, host);
  }
  return ends[2] - ends[1];
}

}  // namespace

StepBreakdown predict_step(const OpProgram& program, double batch, const GpuPeaks& peaks, const FamilyFactors& f0,
                           const ModelCorrection& c) {
  FamilyFactors storage;
  const FamilyFactors& f = issued_factors(program, f0, storage);
  StepBreakdown b;
  phase_sums(program.forward(), batch, peaks, f, c.forward_gpu, c.forward_host, b.host.forward, b.gpu.forward);
  phase_sums(program.backward(), batch, peaks, f, c.backward_gpu, c.backward_host, b.host.backward, b.gpu.backward);
  if (program.sync() == StepSync::Phases) {
    double fwd = 0, bwd = 0;
    pipeline_many(program.forward(), std::span<const double>(&batch, 1), peaks, f, c.forward_gpu, c.forward_host,
                  std::span<double>(&fwd, 1));
    pipeline_many(program.backward(), std::span<const double>(&batch, 1), peaks, f, c.backward_gpu, c.backward_host,
                  std::span<double>(&bwd, 1));
    b.phase = {fwd, bwd};
    b.step = fwd + bwd;
    b.syncs = 2;
    return b;
  }
  const HostProfile host = program.host().value_or(HostProfile{});
  b.step = pipelined_step(program, batch, peaks, f, c, host, b.syncs);
  // The step over the phases in proportion to what bounds each.
  const double wf = std::max(b.host.forward, b.gpu.forward), wb = std::max(b.host.backward, b.gpu.backward);
  const double share = wf + wb > 0 ? wf / (wf + wb) : 0.5;
  b.phase = {b.step * share, b.step * (1 - share)};
  return b;
}

void predict_phase_seconds(const OpProgram& program, bool backward, std::span<const double> batches,
                           const GpuPeaks& peaks, const FamilyFactors& f0, const ModelCorrection& c,
                           std::span<double> out) {
  if (program.sync() == StepSync::Pipelined) {
    if (out.size() != batches.size()) throw Error("predict_phase_seconds: batches and out differ in size");
    for (std::size_t i = 0; i < batches.size(); ++i) {
      const StepBreakdown b = predict_step(program, batches[i], peaks, f0, c);
      out[i] = backward ? b.phase.backward : b.phase.forward;
    }
    return;
  }
  FamilyFactors storage;
  const FamilyFactors& f = issued_factors(program, f0, storage);
  if (backward)
    pipeline_many(program.backward(), batches, peaks, f, c.backward_gpu, c.backward_host, out);
  else
    pipeline_many(program.forward(), batches, peaks, f, c.forward_gpu, c.forward_host, out);
}

double predict_phase_seconds(const OpProgram& program, bool backward, double batch, const GpuPeaks& peaks,
                             const FamilyFactors& f, const ModelCorrection& c) {
  double out = 0;
  predict_phase_seconds(program, backward, std::span<const double>(&batch, 1), peaks, f, c, std::span<double>(&out, 1));
  return out;
}

PhaseSeconds predict_seconds(const OpProgram& program, double batch, const GpuPeaks& peaks, const FamilyFactors& f,
                             const ModelCorrection& c) {
  if (program.sync() == StepSync::Pipelined) return predict_step(program, batch, peaks, f, c).phase;
  return {predict_phase_seconds(program, false, batch, peaks, f, c),
          predict_phase_seconds(program, true, batch, peaks, f, c)};
}

// ---- the cost model ---------------------------------------------------------------

struct AnalyticalCostModel::Cache {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<OpProgram>> programs;
};

AnalyticalCostModel::AnalyticalCostModel(AnalyticalOptions options)
    : AnalyticalCostModel(load_default_calibration(), options) {}

AnalyticalCostModel::AnalyticalCostModel(std::shared_ptr<const Calibration> calibration, AnalyticalOptions options)
    : calibration_(std::move(calibration)), options_(options), cache_(std::make_shared<Cache>()) {
  if (!calibration_) throw Error("AnalyticalCostModel needs a calibration");
}

bool AnalyticalCostModel::knows(std::string_view model) const { return zoo::has_model(model); }

const OpProgram& AnalyticalCostModel::program(std::string_view model) const {
  const std::string name = zoo::canonical_name(model);
  std::lock_guard<std::mutex> lock(cache_->mutex);
  auto it = cache_->programs.find(name);
  if (it != cache_->programs.end()) return *it->second;
  const zoo::ModelGraph& g = zoo::load_model(name);
  auto p = std::make_unique<OpProgram>(OpProgram::compile(g, options_));
  return *cache_->programs.emplace(name, std::move(p)).first->second;
}

StepCost AnalyticalCostModel::step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const {
  if (batch_size < 1) throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", batch_size));
  const OpProgram& prog = program(model);  // InputError listing the zoo for an unknown model
  const FamilyFactors& f = calibration_->factors(gpu);
  const bool corrected = calibration_->has_correction(model);
  const PhaseSeconds s =
      predict_seconds(prog, batch_size, gpu_peaks(gpu, options_), f, calibration_->correction(model));
  StepCost c;
  c.forward = from_seconds(s.forward);
  c.backward = from_seconds(s.backward);
  c.forward_provenance = c.backward_provenance = c.memory_provenance = Provenance::Estimated;
  zoo::ReplayOptions ro;
  ro.precision = options_.precision;
  ro.optimizer = options_.optimizer;
  ro.keep_grads = options_.legacy_zero_grad;
  c.note = fmt::format("analytical model ({} per-operator graph; {} factors {}{})", prog.model(), gpu.architecture,
                       calibration_->origin_of(gpu), corrected ? "; model correction learned on measured GPUs" : "");
  const std::string family = zoo::load_model(model).family();
  if (auto e = calibration_->expected_error(gpu, model, family, evidence_precision(options_, gpu, family)))
    c.note += fmt::format("; expected error ~{:.0f}% forward, ~{:.0f}% backward ({})", e->pct.forward, e->pct.backward,
                          e->basis);
  zoo::apply_zoo_memory(c, model, batch_size, ro, options_.seq_len);
  return c;
}

std::vector<std::string> AnalyticalCostModel::models() const { return zoo::zoo_models(); }

std::string AnalyticalCostModel::describe() const {
  return fmt::format("analytical per-operator model for the {} zoo models ({})", zoo::zoo_models().size(),
                     calibration_->source.empty() ? std::string("built-in default factors") : calibration_->source);
}

// ---- layered -------------------------------------------------------------------------

LayeredCostModel::LayeredCostModel(std::unique_ptr<ProfileCostModel> profiles,
                                   std::unique_ptr<AnalyticalCostModel> analytical, EstimateOptions estimate)
    : profiles_(std::move(profiles)), analytical_(std::move(analytical)), estimates_(estimate) {}

StepCost LayeredCostModel::step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const {
  if (profiles_ && profiles_->profiles().find(gpu.id, model)) return profiles_->step_cost(gpu, model, batch_size);
  if (analytical_ && analytical_->knows(model)) {
    StepCost c = analytical_->step_cost(gpu, model, batch_size);
    if (profiles_)
      c.note = fmt::format("estimate: no measured profile for {}/{}; {}", gpu.id, canonical_model_name(model), c.note);
    return c;
  }
  if (profiles_) return profiles_->step_cost(gpu, model, batch_size);  // its estimate, or its errors
  return estimates_.step_cost(gpu, model, batch_size);
}

std::vector<std::string> LayeredCostModel::models() const {
  std::vector<std::string> names = profiles_ ? profiles_->models() : estimates_.models();
  if (analytical_)
    for (std::string& m : analytical_->models()) names.push_back(std::move(m));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string LayeredCostModel::describe() const {
  const std::string rest = analytical_ ? analytical_->describe() + "; built-in estimates for other models"
                                       : std::string("built-in estimates");
  if (profiles_) return profiles_->describe() + "; for pairs without a profile: " + rest;
  return rest;
}

bool measured_profiles_apply(const AnalyticalOptions& options) {
  return options.precision == zoo::Precision::FP32 && options.optimizer == zoo::Optimizer::SGD &&
         options.legacy_zero_grad && !options.tf32_matmul && options.tf32_conv && options.variant == ProgramVariant{} &&
         !options.host && options.sync == StepSync::Phases;
}

std::unique_ptr<CostModel> make_layered_cost_model(const std::optional<std::filesystem::path>& profiles_dir,
                                                   const AnalyticalOptions& options) {
  std::unique_ptr<ProfileCostModel> profiles;
  if (profiles_dir && measured_profiles_apply(options))
    profiles = std::make_unique<ProfileCostModel>(ProfileDatabase::load(*profiles_dir), profiles_dir->string());
  else if (profiles_dir) {
    // Set aside for this program, but what the user named is still read and
    // checked: a folder that is not one, or a broken or hostile table, is an
    // input error whatever the program (QA re-test: it ran silently).
    if (ProfileDatabase::detect_layouts(*profiles_dir).empty())
      throw InputError(fmt::format("{}: holds no profiles; expected GPEmu's layout or gpemu's own (docs/profiles.md)",
                                   profiles_dir->string()));
    (void)ProfileDatabase::load(*profiles_dir);
  }
  return std::make_unique<LayeredCostModel>(std::move(profiles), std::make_unique<AnalyticalCostModel>(options));
}

}  // namespace gpemu
