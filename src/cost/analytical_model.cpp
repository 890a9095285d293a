// The analytical time model (include/gpemu/analytical_model.h,
// docs/analytical-model.md): per-operator roofline terms from the model zoo,
// pipelined against the host's launch time.
#include "gpemu/cost_model.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "cost/text_fields.h"
#include "gpemu/calibration.h"
#include "gpemu/error.h"

namespace gpemu {

namespace {

bool is_loss_kind(std::string_view k) {
  return k == "_log_softmax" || k.starts_with("nll_loss") || k.starts_with("binary_cross_entropy") || k == "mse_loss" ||
         k == "l1_loss" || k == "smooth_l1_loss" || k == "cross_entropy_loss";
}

OpProgram::Kind kind_of(zoo::OpClass c) {
  switch (c) {
    case zoo::OpClass::Conv:
    case zoo::OpClass::Conv3d: return OpProgram::Kind::Conv;
    case zoo::OpClass::Matmul: return OpProgram::Kind::Matmul;
    case zoo::OpClass::View: return OpProgram::Kind::View;
    default: return OpProgram::Kind::Memory;
  }
}

OpProgram::Math math_of(std::string_view dtype) {
  if (dtype == "f16") return OpProgram::Math::F16;
  if (dtype == "bf16") return OpProgram::Math::BF16;
  return OpProgram::Math::F32;
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)}); }

}  // namespace

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

// ---- the program --------------------------------------------------------------

OpProgram::OpProgram(std::string model, std::vector<Op> forward, std::vector<Op> backward)
    : model_(std::move(model)), forward_(std::move(forward)), backward_(std::move(backward)) {}

namespace {

// Multi-tensor apply: the per-parameter update kernels become one launch
// reading and writing the same bytes.
void fuse_optimizer(std::vector<OpProgram::Op>& ops) {
  OpProgram::Op fused;
  fused.kind = OpProgram::Kind::Memory;
  fused.section = OpProgram::Section::Optimizer;
  bool any = false;
  std::vector<OpProgram::Op> kept;
  for (const OpProgram::Op& op : ops) {
    if (op.section != OpProgram::Section::Optimizer) {
      kept.push_back(op);
      continue;
    }
    if (op.kind == OpProgram::Kind::View) continue;
    any = true;
    fused.flops0 += op.flops0;
    fused.flops1 += op.flops1;
    fused.bytes0 += op.bytes0;
    fused.bytes1 += op.bytes1;
  }
  if (any) kept.push_back(fused);
  ops = std::move(kept);
}

}  // namespace

OpProgram OpProgram::compile(const zoo::ModelGraph& model, const AnalyticalOptions& options) {
  const ProgramVariant& variant = options.variant;
  if (auto missing = unsupported_part(variant))
    throw InputError(fmt::format("{} for {}: {}", describe(variant), model.name(), *missing));
  // A variant whose program is a graph of its own is refused on another graph,
  // not run as that graph (variant_model() picks the right one).
  auto refuse_unless = [&](bool asked, bool graph_is_it, std::string_view what, std::string_view suffix) {
    if (asked && !graph_is_it)
      throw InputError(fmt::format("{} for {}: {} is the zoo's {}{} graph, not {} (variant_model() picks it)",
                                   describe(variant), model.name(), what, model.name(), suffix, model.name()));
  };
  refuse_unless(variant.fused_chains(), is_fused_graph(model.name()), "fused softmax/LayerNorm/GELU chains", "_fused");
  refuse_unless(variant.attention == AttentionKernel::Fused, is_sdpa_graph(model.name()), "fused attention", "_sdpa");
  const std::int64_t seq = options.seq_len;
  const auto at = [&](std::int64_t b) { return model.ops(zoo::Shape{b, seq}, options.precision, options.optimizer); };
  const std::vector<zoo::OpCost> o1 = at(1), o2 = at(2), o4 = at(4);
  if (o1.size() != o2.size() || o1.size() != o4.size())
    throw InputError(fmt::format("{}: the op list depends on the batch size; expected one graph for every batch size",
                                 model.file().string()));
  std::vector<Op> fwd, bwd;
  std::vector<Op> autograd;
  bool in_loss = false;
  for (std::size_t i = 0; i < o1.size(); ++i) {
    const zoo::OpCost &a = o1[i], &b = o2[i], &d = o4[i];
    Op op;
    op.kind = kind_of(a.op_class);
    op.math = math_of(a.dtype);
    op.direct_conv = a.op_class == zoo::OpClass::Conv3d;
    op.attention = a.kind == "scaled_dot_product_attention" || a.kind == "scaled_dot_product_attention_backward";
    op.flops1 = b.flops - a.flops;
    op.flops0 = a.flops - op.flops1;
    const double by1 = a.bytes_read + a.bytes_written, by2 = b.bytes_read + b.bytes_written,
                 by4 = d.bytes_read + d.bytes_written;
    op.bytes1 = by2 - by1;
    op.bytes0 = by1 - op.bytes1;
    if (!close(op.flops0 + 4 * op.flops1, d.flops) || !close(op.bytes0 + 4 * op.bytes1, by4))
      throw InputError(
          fmt::format("{}: op {} ({}) is not affine in the batch size; the analytical model expects "
                      "the zoo's polynomials to be of degree <= 1 in B",
                      model.file().string(), i, a.kind));
    op.flops0 = std::max(0.0, op.flops0);
    op.bytes0 = std::max(0.0, op.bytes0);
    // Half-precision convolutions on tensor cores need NHWC: on NCHW
    // activations cuDNN transposes the operands in and the result out
    // (nchwToNhwc / nhwcToNchw kernels), reading and writing them once more
    // each; channels-last activations need no transposes.
    std::optional<Op> transpose;
    if (op.kind == Kind::Conv && op.math != Math::F32 && variant.memory_format == MemoryFormat::NCHW) {
      transpose = Op{};
      transpose->kind = Kind::Memory;
      transpose->bytes0 = 2 * op.bytes0;
      transpose->bytes1 = 2 * op.bytes1;
    }
    switch (a.phase) {
      case zoo::Phase::Forward:
        if (!in_loss && is_loss_kind(a.kind)) in_loss = true;
        op.section = in_loss ? Section::Loss : Section::Forward;
        (in_loss ? bwd : fwd).push_back(op);
        if (transpose) {
          transpose->section = op.section;
          (in_loss ? bwd : fwd).push_back(*transpose);
        }
        break;
      case zoo::Phase::Backward:
        op.section = Section::Backward;
        autograd.push_back(op);
        if (transpose) {
          transpose->section = Section::Backward;
          autograd.push_back(*transpose);
        }
        break;
      case zoo::Phase::Optimizer:
        op.section = Section::Optimizer;
        if (options.legacy_zero_grad) {
          // zero_grad and accumulation kernels come before the step.
          if (!autograd.empty()) {
            const auto grads = model.param_grads(zoo::Shape{1, seq}, options.precision);
            for (const zoo::ParamGrad& g : grads) {
              Op z;
              z.kind = Kind::Memory;
              z.section = Section::ZeroGrad;
              z.bytes0 = static_cast<double>(g.grad_bytes);  // fill: write only
              bwd.push_back(z);
            }
            bwd.insert(bwd.end(), autograd.begin(), autograd.end());
            for (const zoo::ParamGrad& g : grads) {
              Op acc;
              acc.kind = Kind::Memory;
              acc.section = Section::Backward;
              acc.flops0 = static_cast<double>(g.grad_bytes) / 4;
              acc.bytes0 = 3.0 * static_cast<double>(g.grad_bytes);  // grad += new: read 2, write 1
              bwd.push_back(acc);
            }
            autograd.clear();
          }
        } else if (!autograd.empty()) {
          bwd.insert(bwd.end(), autograd.begin(), autograd.end());
          autograd.clear();
        }
        bwd.push_back(op);
        break;
    }
  }
  if (!autograd.empty()) bwd.insert(bwd.end(), autograd.begin(), autograd.end());
  if (variant.fused_optimizer) fuse_optimizer(bwd);
  if (variant.micro_steps > 1)
    for (Op& op : bwd)
      if (op.section == Section::Optimizer || op.section == Section::ZeroGrad) op.weight = 1.0 / variant.micro_steps;
  return OpProgram(model.name(), std::move(fwd), std::move(bwd));
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

double op_gpu_seconds(const OpProgram::Op& op, double batch, const GpuPeaks& peaks, const FamilyFactors& f) {
  using Kind = OpProgram::Kind;
  if (op.kind == Kind::View) return 0;
  const double flops = op.flops0 + op.flops1 * batch;
  const double bytes = op.bytes0 + op.bytes1 * batch;
  auto matrix_peak = [&](double f32) {
    switch (op.math) {
      case OpProgram::Math::F16: return peaks.f16;
      case OpProgram::Math::BF16: return peaks.bf16;
      case OpProgram::Math::F32: break;
    }
    return f32;
  };
  switch (op.kind) {
    case Kind::Conv:
      if (op.math != OpProgram::Math::F32)
        return op.weight * std::max(flops / (matrix_peak(peaks.conv_f32) * f.matmul_efficiency),
                                    bytes / (peaks.bandwidth * f.memory_efficiency));
      return op.weight * (flops / (matrix_peak(peaks.conv_f32) * conv_flop_efficiency(op, f)) +
                          bytes / (peaks.bandwidth * f.conv_bytes_efficiency));
    case Kind::Matmul:
      return op.weight * std::max(flops / (matrix_peak(peaks.matmul_f32) *
                                           (op.attention ? kAttentionEfficiency : f.matmul_efficiency)),
                                  bytes / (peaks.bandwidth * f.memory_efficiency));
    case Kind::Memory:
      return op.weight * std::max(flops / peaks.vector_f32, bytes / (peaks.bandwidth * f.memory_efficiency));
    case Kind::View: break;
  }
  return 0;
}

namespace {

double launch_seconds(const OpProgram::Op& op, const FamilyFactors& f) {
  if (op.kind == OpProgram::Kind::View) return f.launch_view_us * 1e-6;
  switch (op.section) {
    case OpProgram::Section::Forward:
    case OpProgram::Section::Loss: return f.launch_forward_us * 1e-6;
    case OpProgram::Section::Backward: return f.launch_backward_us * 1e-6;
    case OpProgram::Section::ZeroGrad:
    case OpProgram::Section::Optimizer: return f.launch_optimizer_us * 1e-6;
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
  const double inv_bw_mem = 1.0 / (peaks.bandwidth * f.memory_efficiency);
  const double inv_bw_conv = 1.0 / (peaks.bandwidth * f.conv_bytes_efficiency);
  const double inv_vec = 1.0 / peaks.vector_f32;
  for (const OpProgram::Op& op : ops) {
    host += launch_seconds(op, f) * host_scale * op.weight;
    if (op.kind == OpProgram::Kind::View) {
      for (std::size_t r = 0; r < n; ++r) out[r] = std::max(out[r], host);
      continue;
    }
    double scale = gpu_scale * op.weight;
    if (takes_backward_factor(op)) scale *= f.backward_factor;
    double matrix = peaks.conv_f32;
    if (op.kind == OpProgram::Kind::Matmul) matrix = peaks.matmul_f32;
    if (op.math == OpProgram::Math::F16) matrix = peaks.f16;
    if (op.math == OpProgram::Math::BF16) matrix = peaks.bf16;
    // FP32 and TF32 convolutions: the calibrated sum of a FLOP and a bytes
    // term; everything else (half-precision convolutions included, see
    // op_gpu_seconds): the roofline, the larger of the two.
    const bool summed = op.kind == OpProgram::Kind::Conv && op.math == OpProgram::Math::F32;
    double a = 0, c = scale * inv_bw_mem;
    if (summed) {
      a = scale / (matrix * conv_flop_efficiency(op, f));
      c = scale * inv_bw_conv;
    } else if (op.kind == OpProgram::Kind::Memory) {
      a = scale * inv_vec;
    } else {
      a = scale / (matrix * f.matmul_efficiency);
    }
    for (std::size_t r = 0; r < n; ++r) {
      const double b = batches[r];
      const double flop_s = (op.flops0 + op.flops1 * b) * a, byte_s = (op.bytes0 + op.bytes1 * b) * c;
      out[r] = std::max(out[r], host) + (summed ? flop_s + byte_s : std::max(flop_s, byte_s));
    }
  }
  for (std::size_t r = 0; r < n; ++r) out[r] = std::max(out[r], host);
}

}  // namespace

double op_kernel_seconds(const OpProgram::Op& op, double batch, const GpuPeaks& peaks, const FamilyFactors& f) {
  return op_gpu_seconds(op, batch, peaks, f) * (takes_backward_factor(op) ? f.backward_factor : 1.0);
}

double op_launch_seconds(const OpProgram::Op& op, const FamilyFactors& f) { return launch_seconds(op, f) * op.weight; }

void predict_phase_seconds(const OpProgram& program, bool backward, std::span<const double> batches,
                           const GpuPeaks& peaks, const FamilyFactors& f, const ModelCorrection& c,
                           std::span<double> out) {
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
         options.legacy_zero_grad && !options.tf32_matmul && options.tf32_conv && options.variant == ProgramVariant{};
}

std::unique_ptr<CostModel> make_layered_cost_model(const std::optional<std::filesystem::path>& profiles_dir,
                                                   const AnalyticalOptions& options) {
  std::unique_ptr<ProfileCostModel> profiles;
  if (profiles_dir && measured_profiles_apply(options))
    profiles = std::make_unique<ProfileCostModel>(ProfileDatabase::load(*profiles_dir), profiles_dir->string());
  return std::make_unique<LayeredCostModel>(std::move(profiles), std::make_unique<AnalyticalCostModel>(options));
}

}  // namespace gpemu
