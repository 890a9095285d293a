// The analytical time model: the time of one training iteration of a zoo model
// (zoo.h) on any catalogued GPU, predicted per operator from its FLOPs and
// compulsory bytes and the GPU's datasheet peaks, with efficiency factors per
// GPU architecture family calibrated on measured profiles (calibration.h).
// docs/analytical-model.md has the model, the factors and their sources.
//
// Per operator i of a phase (GPEmu's split: forward = the model's forward;
// backward = loss + zero_grad + autograd backward + optimizer step):
//
//   conv        g_i = FLOPs / (peak(conv precision) x conv_efficiency)
//                   + bytes / (bandwidth x conv_bytes_efficiency)
//   matmul      g_i = max(FLOPs / (peak(matmul precision) x matmul_efficiency),
//                         bytes / (bandwidth x memory_efficiency))
//   other       g_i = max(FLOPs / vector peak, bytes / (bandwidth x memory_efficiency))
//   view        g_i = 0 (no kernel)
//   autograd backward kernels other than matmuls: g_i x backward_factor
//   (cuBLAS runs a matmul's gradient GEMMs at the forward GEMM's rate)
//
// and the host issues op i after launch time h_i (per section: forward,
// autograd backward, optimizer/zero_grad, view). The GPU runs op i when both
// the host has issued it and op i-1 has finished, so
//
//   phase time = max over k of (H_k + sum_{j>=k} g_j),   H_k = h_0 + ... + h_k
//
// (a launch-bound phase costs the host's time, a GPU-bound one the GPU's).
// A zoo model with a calibrated ModelCorrection has its GPU and host times of
// each phase scaled by it (learned across GPUs: cuDNN algorithm choices such as
// Winograd, which no FLOP count shows).
//
// Precision rules (PyTorch defaults, docs/analytical-model.md):
//  - FP32 convolutions run as TF32 on GPUs with TF32 (Ampere and later):
//    torch.backends.cudnn.allow_tf32 defaults to True (since 1.7);
//  - FP32 matmuls do NOT: torch.backends.cuda.matmul.allow_tf32 defaults to
//    False since PyTorch 1.12 (it was True in 1.7-1.11);
//  - FP16 / BF16 ops (AMP) use the tensor-core rate, or the FP32 rate on cards
//    without one;
//  - non-matrix FP32 work uses the vector FP32 rate: the catalog's FP32 figure,
//    halved for CDNA3 (MI300X's 163.4 TFLOP/s is the packed/matrix rate).
//
// Thread safety: everything here is immutable after construction.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/cost/cost_model.h"
#include "gpemu/cost/program_variant.h"
#include "gpemu/host.h"
#include "gpemu/zoo.h"

namespace gpemu {

// What is traced and how PyTorch runs it.
struct AnalyticalOptions {
  zoo::Precision precision = zoo::Precision::FP32;
  zoo::Optimizer optimizer = zoo::Optimizer::SGD;
  // torch.backends.cudnn.allow_tf32 (default True).
  bool tf32_conv = true;
  // torch.backends.cuda.matmul.allow_tf32 (default False since PyTorch 1.12).
  bool tf32_matmul = false;
  // optimizer.zero_grad() with set_to_none=False (PyTorch < 2.0's default; how
  // GPEmu measured): one fill kernel per gradient in zero_grad and one
  // accumulate-add kernel per gradient in backward, which the zoo trace
  // (set_to_none=True) does not have.
  bool legacy_zero_grad = true;
  // Sequence length for sequence models; 0: the model's default.
  std::int64_t seq_len = 0;
  // The host that issues the step (host.h): nullopt keeps the launch factors
  // of the GPU family's calibration (the hosts its profiles were measured in).
  std::optional<HostProfile> host;
  StepSync sync = StepSync::Phases;
  // How the program runs (program_variant.h). precision, tf32_conv and
  // tf32_matmul above are derived from it by to_analytical_options(); the
  // rest selects the program rewrites of OpProgram::compile (micro-steps,
  // fused optimizer).
  ProgramVariant variant;
};

// The variant in the analytical model's options: precision and TF32 switches
// from the variant, the variant itself for the program rewrites. Starts from
// `base` (optimizer, zero_grad and sequence length are not the variant's).
AnalyticalOptions to_analytical_options(const ProgramVariant& v, AnalyticalOptions base = {});

// The fraction of a matmul peak (tensor-core peak at the op's precision, or
// FP32) that large cuBLAS GEMMs sustain: NVIDIA's "Matrix Multiplication
// Background User's Guide" shows large GEMMs at roughly 70-90 % of the peak
// once tile and wave quantization are small; 0.8 is the rounded middle. Not
// fitted (docs/analytical-model.md, "Matmuls").
inline constexpr double kMatmulEfficiency = 0.8;

// The fraction of the matmul peak a fused attention kernel sustains (its
// FLOPs counted as FlashAttention counts them): FlashAttention-2 (Dao, 2023)
// reports 50-73 % of the A100's theoretical maximum forward and backward;
// 0.6 is the rounded middle. Not fitted: no measured program in the
// calibration data uses fused attention (docs/analytical-model.md, "Matmuls").
inline constexpr double kAttentionEfficiency = 0.6;

// Efficiency factors of one GPU architecture family. Efficiencies are
// fractions of the catalog's peaks (conv can exceed 1: Winograd and FFT
// convolutions do fewer multiplies than the direct count).
struct FamilyFactors {
  // Defaults: the geometric mean of the four calibrated families of
  // data/calibration.json, rounded (docs/analytical-model.md); used only when
  // that file is absent.
  double conv_efficiency = 2.7;                  // of peak FLOP/s at the conv's precision (FLOP term)
  double conv_bytes_efficiency = 0.19;           // of peak bandwidth, for conv's added bytes term
  double matmul_efficiency = kMatmulEfficiency;  // of peak FLOP/s at the matmul's precision (pinned, not fitted)
  double memory_efficiency = 0.6;                // of peak bandwidth, memory-bound ops
  double backward_factor = 1.35;                 // multiplies autograd backward kernels' GPU time
  double launch_forward_us = 49;                 // host time per forward (and loss) kernel
  double launch_backward_us = 4;                 // per autograd backward kernel
  double launch_optimizer_us = 28;               // per optimizer.step / zero_grad kernel
  double launch_view_us = 3;                     // per view op (no kernel)
  // Tensor-core convolutions (TF32, FP16, BF16) as a roofline of the FLOPs at
  // this fraction of the tensor-core peak and the bytes at memory_efficiency,
  // NCHW operands transposed in and out (docs/analytical-model.md). 0: the
  // forms the GPEmu-profile families were fitted in (TF32 as the FP32 sum,
  // half precision at matmul_efficiency). Not one of the indexed factors:
  // fitted only on step times (cost/step_times.h), kept by families derived
  // from one that has it.
  double tensor_core_conv_efficiency = 0;
  // The same for TF32 convolutions (FP32 activations, cuDNN's TF32 on), when
  // fitted apart from half precision's: cuDNN's TF32 kernels sustain a
  // smaller share of their peak than its FP16/BF16 ones (docs/host.md). 0:
  // tensor_core_conv_efficiency serves both.
  double tf32_conv_efficiency = 0;
  // GPU time every kernel takes beyond its roofline (microseconds): the
  // launch latency and tail of a kernel, which thousands of small kernels of
  // an eager step add up. 0 for the GPEmu-profile families (absorbed in their
  // fitted factors); fitted on step times like the factor above.
  double kernel_overhead_us = 0;
  // Host time per call of a foreach optimizer (with_host sets it from a host
  // profile); 0: launch_optimizer_us, as the calibrated families have it.
  double launch_foreach_us = 0;
  bool operator==(const FamilyFactors&) const = default;
};

// The number of FamilyFactors fields and their names, in declaration order
// (the calibration fits them in log space).
inline constexpr int kFamilyFactorCount = 9;
const std::vector<std::string>& family_factor_names();
double& factor_at(FamilyFactors& f, int i);
double factor_at(const FamilyFactors& f, int i);

// Per-model multipliers of each phase's GPU and host time, learned across the
// GPUs a model was measured on. 1 = none.
struct ModelCorrection {
  double forward_gpu = 1, forward_host = 1, backward_gpu = 1, backward_host = 1;
  bool operator==(const ModelCorrection&) const = default;
};

// The time model of one (model, options), precomputed from its zoo graph:
// per op its section and its FLOPs and bytes as affine functions of the batch
// size (the zoo's polynomials are affine in B at a fixed sequence length).
class OpProgram {
 public:
  enum class Kind : std::uint8_t { Conv, Matmul, Memory, View };
  enum class Section : std::uint8_t { Forward, Loss, ZeroGrad, Backward, Optimizer };
  enum class Math : std::uint8_t { F32, F16, BF16 };
  struct Op {
    Kind kind = Kind::Memory;
    Section section = Section::Forward;
    Math math = Math::F32;
    double flops0 = 0, flops1 = 0;  // flops = flops0 + flops1 x batch
    double bytes0 = 0, bytes1 = 0;  // bytes read + written
    // Share of iterations the op runs in: 1 / micro_steps for the optimizer
    // update under gradient accumulation. Multiplies its GPU and host time.
    double weight = 1;
    // A convolution with no Winograd/FFT algorithm (three spatial
    // dimensions): it does every multiply of the direct count, so its FLOP
    // term runs at most at the GEMM efficiency (direct_conv_efficiency()).
    bool direct_conv = false;
    // A fused scaled-dot-product attention kernel (a Matmul): its FLOP term
    // runs at kAttentionEfficiency.
    bool attention = false;
    // The host waits for the GPU after issuing this op (a value read back:
    // GradScaler's found_inf.item() after the unscale kernel).
    bool sync_after = false;
    // One call of a foreach optimizer (or a GradScaler kernel beside them):
    // issued at the host's foreach cost, not its per-kernel one.
    bool foreach_call = false;
  };

  // Builds the program of `model`. Ops of the zoo's forward range up to the
  // loss are GPEmu's forward; the loss (from the first _log_softmax,
  // nll_loss*, binary_cross_entropy*, mse_loss, l1_loss op), zero_grad,
  // backward and the optimizer step are its backward. Program rewrites of
  // options.variant: a fused (multi-tensor) optimizer runs the update's
  // per-parameter kernels as one kernel with their summed FLOPs and bytes;
  // micro_steps > 1 weights zero_grad and the update by 1 / micro_steps.
  // Throws InputError when the graph's costs are not affine in the batch
  // size, or for a variant unsupported_part() names.
  static OpProgram compile(const zoo::ModelGraph& model, const AnalyticalOptions& options = {});
  // From explicit ops (tests, synthetic graphs).
  OpProgram(std::string model, std::vector<Op> forward, std::vector<Op> backward);

  const std::string& model() const { return model_; }
  const std::vector<Op>& forward() const { return forward_; }
  const std::vector<Op>& backward() const { return backward_; }
  // How the program is issued (AnalyticalOptions::sync, ::host at compile).
  StepSync sync() const { return sync_; }
  const std::optional<HostProfile>& host() const { return host_; }
  void set_issue(StepSync sync, std::optional<HostProfile> host) {
    sync_ = sync;
    host_ = std::move(host);
  }

 private:
  std::string model_;
  std::vector<Op> forward_, backward_;
  StepSync sync_ = StepSync::Phases;
  std::optional<HostProfile> host_;
};

// The factors with the launch times of `host` (host.h) instead of the
// family's calibrated ones (the hosts its profiles were measured in).
FamilyFactors with_host(FamilyFactors f, const HostProfile& host);

// Peaks the model uses for one GPU (FLOP/s and bytes/s).
struct GpuPeaks {
  double conv_f32 = 0, matmul_f32 = 0, f16 = 0, bf16 = 0, vector_f32 = 0, bandwidth = 0;
};
GpuPeaks gpu_peaks(const GpuSpec& gpu, const AnalyticalOptions& options = {});

// The fraction of the peak a convolution's FLOP term runs at: the family's
// conv_efficiency (fitted on 2-D CNNs, above 1 where Winograd does fewer
// multiplies than the direct count), capped at the GEMM efficiency for a
// direct_conv op (3-D: implicit GEMM only; docs/analytical-model.md).
double conv_flop_efficiency(const OpProgram::Op& op, const FamilyFactors& f);

// GPU time of one op at a batch size (seconds), before backward_factor and
// corrections.
double op_gpu_seconds(const OpProgram::Op& op, double batch, const GpuPeaks& peaks, const FamilyFactors& f);
// The same with backward_factor applied as the pipeline applies it (autograd
// backward kernels other than matmuls): the GPU time one op is charged.
double op_kernel_seconds(const OpProgram::Op& op, double batch, const GpuPeaks& peaks, const FamilyFactors& f);
// Host time to issue one op (seconds): the family's launch cost of its
// section, or launch_view_us for a view; times op.weight.
double op_launch_seconds(const OpProgram::Op& op, const FamilyFactors& f);

struct PhaseSeconds {
  double forward = 0, backward = 0;
};
// One step's host and GPU side (seconds): what predict prints as host- or
// GPU-bound. host: the host's issue time (launches, views, sync costs);
// gpu: the kernels' time; step: the pipelined step (>= both).
struct StepBreakdown {
  double step = 0;
  PhaseSeconds host, gpu;  // per phase (forward; loss + backward + optimizer)
  PhaseSeconds phase;      // the step split over the phases as predict_seconds gives it
  int syncs = 0;           // host waits for the GPU per step
};
// The step of `program` at `batch` with its breakdown. Under
// StepSync::Pipelined the step is the steady state of consecutive steps
// issued back to back (the host ahead of the GPU up to the launch queue's
// depth, waiting at each sync_after op); under Phases it is forward +
// backward, each from an idle GPU.
StepBreakdown predict_step(const OpProgram& program, double batch, const GpuPeaks& peaks, const FamilyFactors& f,
                           const ModelCorrection& correction = {});
// The pipelined forward and backward times (seconds) of `program` at
// `batch` (see the top of this file).
PhaseSeconds predict_seconds(const OpProgram& program, double batch, const GpuPeaks& peaks, const FamilyFactors& f,
                             const ModelCorrection& correction = {});
// One phase only (forward: false, backward: true).
double predict_phase_seconds(const OpProgram& program, bool backward, double batch, const GpuPeaks& peaks,
                             const FamilyFactors& f, const ModelCorrection& correction = {});
// The same at several batch sizes in one pass over the ops (the host's launch
// times do not depend on the batch): out[i] for batches[i].
void predict_phase_seconds(const OpProgram& program, bool backward, std::span<const double> batches,
                           const GpuPeaks& peaks, const FamilyFactors& f, const ModelCorrection& correction,
                           std::span<double> out);

class Calibration;  // calibration.h

// A CostModel for zoo models from the analytical model: times predicted per
// operator, memory from the zoo's allocator replay (zoo_memory.h), transfer
// left to the caller's PCIe model (no transfer figures), provenance
// Estimated, and a note naming the factors' family and origin.
class AnalyticalCostModel : public CostModel {
 public:
  // The calibration read from data_dir()/data/calibration.json, or the
  // built-in defaults when that file is absent.
  explicit AnalyticalCostModel(AnalyticalOptions options = {});
  AnalyticalCostModel(std::shared_ptr<const Calibration> calibration, AnalyticalOptions options = {});
  // Throws InputError for batch_size < 1 or a model not in the zoo.
  StepCost step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const override;
  std::vector<std::string> models() const override;  // the zoo's
  std::string describe() const override;
  bool knows(std::string_view model) const;  // in the zoo
  const Calibration& calibration() const { return *calibration_; }
  const AnalyticalOptions& options() const { return options_; }
  // The compiled program of a zoo model (cached).
  const OpProgram& program(std::string_view model) const;

 private:
  std::shared_ptr<const Calibration> calibration_;
  AnalyticalOptions options_;
  struct Cache;
  std::shared_ptr<Cache> cache_;
};

// What make_cost_model() builds: measured profiles first (the pairs they
// cover, as ProfileCostModel replays them), the analytical model for every
// other pair of a zoo model, the built-in estimate for models not in the zoo.
class LayeredCostModel : public CostModel {
 public:
  // `profiles` may be null (no measurements).
  LayeredCostModel(std::unique_ptr<ProfileCostModel> profiles, std::unique_ptr<AnalyticalCostModel> analytical,
                   EstimateOptions estimate = {});
  StepCost step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const override;
  std::vector<std::string> models() const override;
  std::string describe() const override;
  const AnalyticalCostModel& analytical() const { return *analytical_; }

 private:
  std::unique_ptr<ProfileCostModel> profiles_;
  std::unique_ptr<AnalyticalCostModel> analytical_;
  EstimateCostModel estimates_;
};

// Whether measured profiles describe runs with these options: GPEmu's (and
// gpemu's) profiles are FP32 runs with SGD and zero_grad() keeping the grads.
bool measured_profiles_apply(const AnalyticalOptions& options);

// make_cost_model() with analytical options (precision, optimizer, zero_grad
// behaviour) for the zoo models' predicted times. The profiles are used only
// where measured_profiles_apply(options); otherwise the analytical model
// answers for every zoo model.
std::unique_ptr<CostModel> make_layered_cost_model(const std::optional<std::filesystem::path>& profiles_dir,
                                                   const AnalyticalOptions& options);

}  // namespace gpemu
