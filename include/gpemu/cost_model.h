// What GPU work costs: measured profiles, the cost model that replays or predicts them,
// program variants, the analytical model and the zoo's memory plan.
//
// Sections: profile, cost model, program variant, analytical model, zoo memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/device.h"
#include "gpemu/host.h"
#include "gpemu/time.h"
#include "gpemu/zoo.h"

// ==== profile ====
//
// Measured profiles: how long one training iteration of a model took on a real
// GPU (forward, backward, the host-to-device copy of a batch) and how much GPU
// memory it allocated, as functions of the batch size. A ProfileDatabase holds
// the profiles of many (GPU, model) pairs, read from either of two layouts:
//
//   - GPEmu's `profiled_data` tree (the VLDB 2025 artifact): one CSV per GPU,
//     model and quantity, with extrapolated rows appended past the batch sizes
//     that ran out of memory (see extrapolated_tail_start below);
//   - gpemu's own format, one JSON file per (GPU, model) (docs/profiles.md),
//     which gpemu also writes.
//
// A series is replayed exactly at a measured batch size, interpolated linearly
// between measured sizes and extrapolated linearly beyond them; every value
// says which of these it is (Provenance).
//
// Thread safety: all functions are reentrant; a ProfileDatabase is not
// modified by its const members, so a loaded one may be shared between threads.

namespace gpemu {

// Where a cost figure came from, from most to least trustworthy.
enum class Provenance {
  Measured,      // replayed from a profile row at exactly this batch size
  Interpolated,  // linear between the two nearest measured batch sizes
  Extrapolated,  // outside the measured batch sizes, linear from the nearest ones
  Estimated,     // nothing measured: a model of the GPU and the network
};
// "measured", "interpolated", "extrapolated", "estimated".
std::string_view to_string(Provenance p);

// One measured value of a quantity at one batch size.
struct ProfilePoint {
  int batch_size = 0;
  double value = 0;
  bool operator==(const ProfilePoint&) const = default;
};

// A quantity as a function of batch size: points with strictly increasing
// batch sizes (the readers sort and reject duplicates).
using Series = std::vector<ProfilePoint>;

struct SeriesValue {
  double value = 0;
  Provenance provenance = Provenance::Measured;
};

// How many of the points nearest to the edge the extrapolating line is fitted
// to (least squares through the edge point, so the line meets the data there).
inline constexpr std::size_t kExtrapolationWindow = 8;

// The value of `series` at `batch_size`: the measured value where there is
// one, linear interpolation between the neighbours inside the measured range,
// and outside it the line through the edge point whose slope fits the
// kExtrapolationWindow points nearest that edge (clamped at 0; with a single
// point, proportional to the batch size). Throws InputError when batch_size < 1
// or the series is empty.
SeriesValue lookup(std::span<const ProfilePoint> series, int batch_size);

// Relative tolerance within which consecutive slopes count as equal when
// looking for an extrapolated tail. Consecutive slopes of real measurements
// differ by >= 1e-5 relative (or, rarely, coincide exactly through timer
// quantisation); those of GPEmu's extrapolated rows by <= 1e-13 (float64
// rounding).
inline constexpr double kTailTolerance = 1e-9;

// GPEmu appended, for batch sizes that ran out of memory on the real card, rows
// lying exactly on a straight line. Returns the index of the first such row:
// the start of the longest suffix of at least 3 rows (sorted by batch size)
// whose consecutive slopes agree within rel_tolerance, or rows.size() when
// there is none. A table that is one straight line from its first row is
// taken as measured (a tail needs a real measurement before it). The row
// before the tail is the last measured one; the first tail row's batch size is
// the smallest that did not fit on the card.
std::size_t extrapolated_tail_start(std::span<const ProfilePoint> rows, double rel_tolerance = kTailTolerance);

// Lower-case, '-' read as '_': "ResNet-50" and "resnet_50" name one model.
std::string canonical_model_name(std::string_view name);

// One aten op as `gpemu profile` measured it with torch.profiler: the calls
// of one batch size that share (phase, op, shapes, dtype), aggregated
// (docs/profiles.md, "Per-op GPU times").
struct MeasuredOp {
  int batch_size = 0;
  std::string phase;     // "forward", "loss", "backward" or "optimizer" (zero_grad included)
  std::string op;        // the outermost aten op, e.g. "aten::conv2d"
  std::string op_class;  // the model zoo's class of the aten ops inside it ("conv", ...)
  std::string shapes;    // its input shapes, as compact JSON ("[[1,3,224,224],[64,3,7,7],[]]")
  std::string dtype;     // its first tensor's dtype ("float", "half"); empty when not recorded
  double calls_per_step = 0;
  double seconds_per_call = 0;       // Profile::op_timer's time of the op and the ops inside it
  std::vector<std::string> kernels;  // CUDA kernels' names (a GPU only; at most 8)
};

// Everything measured for one model on one GPU. Series may be empty when the
// source had no such table; all series hold real measurements only
// (extrapolated tails removed).
struct Profile {
  std::string gpu;    // canonical catalog id, e.g. "V100-PCIE-32GB"
  std::string model;  // canonical model name, e.g. "resnet50"
  Precision precision = Precision::FP32;
  // Host memory the transfer_s rows were copied from. GPEmu measured pageable.
  HostMemoryKind transfer_host_memory = HostMemoryKind::Pageable;
  // Bytes of one input sample as copied to the GPU; 0 when unknown.
  std::uint64_t input_bytes_per_sample = 0;

  Series forward_s;   // seconds per iteration: forward pass
  Series backward_s;  // seconds per iteration: loss + zero_grad + backward + optimizer step
  Series transfer_s;  // seconds: host-to-device copy of one batch of inputs
  // MiB (2^20 bytes) of torch.cuda.memory_allocated / memory_reserved.
  Series peak_allocated_mib;  // peak during an iteration, everything included
  Series peak_reserved_mib;   // peak reserved by the caching allocator
  Series persistent_mib;      // live across iterations: weights, grads, optimizer state (not the batch)
  Series forward_cv;          // coefficient of variation of per-iteration forward time
  Series backward_cv;

  std::optional<int> oom_batch_size;       // smallest batch size measured not to fit
  std::optional<double> model_transfer_s;  // copying the model to the GPU, once
  std::string source;                      // where it was read from, for messages
  // Free text kept with gpemu's own format ("comment"): what measured it
  // (gpemu profile: GPU, driver, torch, CUDA, cuDNN, host CPU).
  std::string comment;
  // Per-op times (gpemu's own format only): "cuda" (kernel time on the GPU)
  // or "cpu" (CPU time: a test of the profiler, not a GPU's); empty without ops.
  std::string op_timer;
  std::vector<MeasuredOp> ops;
};

enum class ProfileLayout {
  GPEmuArtifact,  // time/compute/{forward,backward}/<GPU>/<model>/..., memory/<GPU>/<model>/...
  Native,         // <gpu-id>/<model>.json, format "gpemu-profile/1"
};
std::string_view to_string(ProfileLayout layout);

// Reads GPEmu's profiled_data tree under `dir` (any of time/compute,
// time/transfer and memory may be missing). GPU directory names resolve through
// find_gpu. Batch sizes may be written as floats ("64.0") but must be whole.
// Extrapolated tails of the compute tables are removed and give oom_batch_size;
// memory rows at or past that batch size are dropped too (they cannot have been
// measured). GPEmu's `persistent` column includes the input batch already on
// the GPU; it is subtracted here (3x224x224 FP32 images, so
// input_bytes_per_sample = 602112). Memory is read as MiB. Throws InputError
// naming the file and line for a malformed file, and the path for an
// unresolvable GPU directory. With `skipped` (GPEmu's complete profiled_data
// has fitted rows with impossible values and folders missing a file), a
// malformed row is left out ("<file>:<line>: ...; row skipped") and a model
// folder whose table cannot be read at all is left out ("...; folder <path>
// skipped"), each appended to `skipped` once, and the rest is read; an
// unresolvable GPU directory or a pair in two folders still throws.
std::vector<Profile> read_gpemu_artifact(const std::filesystem::path& dir, std::vector<std::string>* skipped = nullptr);

// The identifier in the "format" field of gpemu's own profile files.
inline constexpr std::string_view kNativeProfileFormat = "gpemu-profile/1";

// Reads one gpemu-profile/1 file. Throws InputError naming the file, the line
// and what is accepted when the file is malformed.
Profile read_native_profile(const std::filesystem::path& file);
// The same for text already in memory; `source` names it in messages.
Profile parse_native_profile(std::string_view text, const std::string& source);
// Reads every <gpu-id>/<model>.json under `dir` (the folder names must agree
// with the files' "gpu" and "model" fields).
std::vector<Profile> read_native_profiles(const std::filesystem::path& dir);
// The gpemu-profile/1 text of a profile: one row per batch size, one row per
// line, numbers written so that they read back bit for bit.
std::string native_profile_json(const Profile& profile);
// Writes dir/<gpu>/<model>.json (creating folders) and returns its path.
std::filesystem::path write_native_profile(const Profile& profile, const std::filesystem::path& dir);

// The measured profiles available to a run, keyed by (GPU id, model).
class ProfileDatabase {
 public:
  ProfileDatabase() = default;

  // Which layouts `dir` holds (both may be present). Throws InputError when
  // `dir` is not a folder.
  static std::vector<ProfileLayout> detect_layouts(const std::filesystem::path& dir);
  // Loads every profile under `dir`, whichever layouts it holds. Throws
  // InputError when it holds neither, or when a (GPU, model) pair appears twice.
  // GPEmu's layout is read leniently: its malformed rows and unreadable
  // folders are skipped and listed in warnings() (read_gpemu_artifact).
  static ProfileDatabase load(const std::filesystem::path& dir);

  // Adds a profile; InputError when its (GPU, model) pair is already present
  // (the message names both sources).
  void add(Profile profile);

  // nullptr when there is no profile for the pair. `gpu_id` is a canonical
  // catalog id; `model` is compared by canonical_model_name.
  const Profile* find(std::string_view gpu_id, std::string_view model) const;

  const std::vector<Profile>& profiles() const { return profiles_; }
  const std::vector<ProfileLayout>& layouts() const { return layouts_; }
  // Canonical names of all models with a profile on some GPU, sorted.
  std::vector<std::string> models() const;
  // Canonical ids of all GPUs with a profile, sorted.
  std::vector<std::string> gpus() const;
  bool empty() const { return profiles_.empty(); }
  // What load() skipped, one line each, naming the file and line or folder.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<Profile> profiles_;
  std::vector<std::string> warnings_;
  std::map<std::pair<std::string, std::string>, std::size_t> index_;  // (gpu, model) -> profiles_
  std::vector<ProfileLayout> layouts_;
};

}  // namespace gpemu

// ==== cost model ====
//
// Cost models: how long one training iteration of a model takes on an emulated
// GPU and how much GPU memory it allocates, at a given batch size.
//
// make_cost_model() is the entry point. With a profile directory it replays
// measured profiles (profile.h) for the (GPU, model) pairs they cover and
// falls back to built-in estimates for everything else; without one it runs
// on the estimates alone, so gpemu works with no measurements at all. Every
// figure carries its Provenance and the StepCost a note saying where the
// numbers came from.
//
// The built-in estimate is deliberately simple (docs/cost-model.md): per phase,
//   time = max(launch_floor, FLOPs / (peak FP32 FLOP/s x efficiency)) + overhead
// with backward = 2 x forward FLOPs, calibrated on ResNet-50 / V100, and
// memory = 12 B per parameter (weights, gradients, SGD momentum) + the input
// batch + per-model activation figures fitted to GPEmu's V100 memory tables.
//
// Variation turns a mean into per-iteration samples: seeded, normal with a
// coefficient of variation (default 1%, clipped at +-4 sigma) and a slower
// first iteration (default 1.5x).
//
// Thread safety: CostModel implementations and Variation are immutable after
// construction; their const members may be called from any thread.

namespace gpemu {

// Expected absolute percentage error of a prediction, per phase (%): the
// median of a validation, or the bound that covers 80 % of a kind of
// program's published step times (calibration.h, Calibration::expected_error).
struct PhaseErrors {
  double forward = 0, backward = 0, iteration = 0;
  bool operator==(const PhaseErrors&) const = default;
};

struct ExpectedError {
  PhaseErrors pct;
  // Which validation the figures come from, e.g. "in-sample (Volta calibrated
  // on V100-PCIE-32GB, resnet50 measured)" or "leave-one-GPU-out".
  std::string basis;
};

// The cost of one training iteration at one batch size on one GPU.
struct StepCost {
  // Mean per iteration. backward = loss + zero_grad + backward + optimizer
  // step, as GPEmu measured.
  Duration forward = 0, backward = 0;
  // Host-to-device copy of one batch, when a profile measured it, by the kind
  // of host memory it was copied from (GPEmu measured pageable memory).
  std::optional<Duration> transfer_pageable;
  std::optional<Duration> transfer_pinned;
  std::optional<Duration> model_transfer;            // copying the model to the GPU, once
  std::uint64_t input_bytes_per_sample = 0;          // e.g. 3*224*224*4 for FP32 images
  std::uint64_t persistent_bytes = 0;                // live across iterations: weights, grads, optimizer state
  std::uint64_t peak_bytes = 0;                      // peak allocated during an iteration, all included
  std::optional<std::uint64_t> peak_reserved_bytes;  // when a profile measured it
  // Measured per-iteration coefficient of variation, when a profile has it;
  // a Variation should use it instead of its default.
  std::optional<double> forward_cv, backward_cv;
  Provenance forward_provenance = Provenance::Estimated;
  Provenance backward_provenance = Provenance::Estimated;
  Provenance memory_provenance = Provenance::Estimated;
  std::optional<int> oom_evidence_batch;  // smallest batch measured not to fit on this GPU
  std::string note;                       // human-readable: where the numbers came from
};

class CostModel {
 public:
  virtual ~CostModel();
  // Throws InputError when batch_size < 1 or the model is unknown (the
  // message lists the known models).
  virtual StepCost step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const = 0;
  // Canonical names of the models this cost model knows, sorted.
  virtual std::vector<std::string> models() const = 0;
  // One line for people: what the figures come from.
  virtual std::string describe() const = 0;
};

// Measured profiles under `profiles_dir` (either layout, see profile.h) take
// precedence for the (GPU, model) pairs and quantities they cover; built-in
// estimates fill in the rest. nullopt: estimates only. Throws InputError when
// the directory is missing or malformed.
std::unique_ptr<CostModel> make_cost_model(const std::optional<std::filesystem::path>& profiles_dir);

// ---- built-in estimates ---------------------------------------------------

// What the built-in estimate knows about a model (ImageNet classifier, 3x224x224).
struct ModelFacts {
  std::string_view name;
  // Forward multiply-accumulates per sample, in billions: torchvision's
  // "GFLOPS" column, which counts one multiply-add as one operation. The
  // estimate uses 2 FLOPs per MAC.
  double forward_gmacs = 0;
  std::uint64_t parameters = 0;  // torchvision num_params
  // Peak allocated memory = 12 B x parameters + batch x input + transient_mib
  // + batch x activation_mib_per_sample; the last two fitted to GPEmu's V100
  // memory tables (tests/cost/default_estimate_test.cpp reproduces the fit).
  double transient_mib = 0;
  double activation_mib_per_sample = 0;
};

// The built-in table, sorted by name.
std::span<const ModelFacts> builtin_models();
// nullptr when the model is not in the table (compared by canonical_model_name).
const ModelFacts* find_builtin_model(std::string_view name);
// A small CNN to run when the user names no model.
inline constexpr std::string_view kDefaultModel = "resnet18";
// Bytes of one 3x224x224 FP32 image.
inline constexpr std::uint64_t kImageNetInputBytes = 3ull * 224 * 224 * 4;

struct EstimateOptions {
  // Fraction of peak FP32 FLOP/s reached in the batch-proportional part.
  double efficiency = 0.60;
  // Below this the GPU waits on the host issuing kernels (small batches).
  Duration forward_launch_floor = 11 * kMillisecond;
  Duration backward_launch_floor = 0;
  // Added regardless of batch size; for backward mostly the optimizer step's
  // per-parameter-tensor kernels.
  Duration forward_overhead = 0;
  Duration backward_overhead = 14 * kMillisecond;
};

// Roofline-style estimate from the built-in table, all provenances Estimated.
// Throws InputError for batch_size < 1, for an unknown model (listing the
// known ones) and for a GPU without an FP32 peak in the catalog.
StepCost estimate_step_cost(const GpuSpec& gpu, std::string_view model, int batch_size,
                            const EstimateOptions& options = {});

// ---- the concrete cost models --------------------------------------------

// Built-in estimates only.
class EstimateCostModel : public CostModel {
 public:
  explicit EstimateCostModel(EstimateOptions options = {});
  StepCost step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const override;
  std::vector<std::string> models() const override;
  std::string describe() const override;

 private:
  EstimateOptions options_;
};

// Measured profiles first, built-in estimates for what they do not cover: a
// (GPU, model) pair without a profile, or a quantity its profile lacks.
class ProfileCostModel : public CostModel {
 public:
  // `origin` names where the profiles came from, for describe().
  ProfileCostModel(ProfileDatabase profiles, std::string origin, EstimateOptions options = {});
  StepCost step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const override;
  std::vector<std::string> models() const override;
  std::string describe() const override;
  const ProfileDatabase& profiles() const { return profiles_; }

 private:
  ProfileDatabase profiles_;
  std::string origin_;
  EstimateCostModel estimates_;
  EstimateOptions options_;
};

// ---- per-iteration variation ---------------------------------------------

struct VariationOptions {
  // Coefficient of variation (stdev / mean) of per-iteration times. 0 gives
  // the mean exactly.
  double cv = 0.01;
  // Draws are clipped to mean x (1 +- clip_sigma x cv).
  double clip_sigma = 4.0;
  // Iteration 0 takes warmup_factor x its draw (CUDA context and kernel
  // loading, cuDNN algorithm selection, allocator growth). 1 disables it.
  double warmup_factor = 1.5;
  std::uint64_t seed = 0;
};

// Samples per-iteration durations around a mean. A sample is a pure function
// of (seed, stream, iteration): the same inputs give the same nanoseconds on
// every platform (splitmix64 and Box-Muller, no <random> distributions; see
// docs/cost-model.md for the one caveat, libm's log and cos).
// Give forward and backward different streams so their noise is independent.
class Variation {
 public:
  // Throws InputError for cv < 0, clip_sigma <= 0, warmup_factor <= 0 or
  // non-finite values.
  explicit Variation(VariationOptions options = {}, std::uint64_t stream = 0);
  // Throws InputError for mean < 0 or iteration < 0.
  Duration sample(Duration mean, std::int64_t iteration) const;
  // The clipped standard normal draw behind sample() for this iteration.
  double standard_normal(std::int64_t iteration) const;
  const VariationOptions& options() const { return options_; }

 private:
  VariationOptions options_;
  std::uint64_t stream_;
};

}  // namespace gpemu

// ==== program variant ====
//
// How a training program runs on the GPU, named as PyTorch users name it:
// matmul precision (torch.set_float32_matmul_precision), whether cuDNN may use
// TF32, the AMP flavour (autocast, or the whole model in half precision with
// FP32 master weights, as apex O2), FP16 or BF16, the activation memory format,
// the attention kernel, fused kernels, and gradient accumulation. Two runs of
// one model that differ here are different programs with different step times
// (docs/analytical-model.md, "Program variants").
//
// A plain value type of the cost layer; `gpemu predict` and `gpemu validate`
// fill it from flags, the step-time CSV reader (step_times.h) from its columns.
// to_analytical_options() (analytical_model.h) maps it onto what the
// analytical model evaluates.

namespace gpemu {

// torch.set_float32_matmul_precision: "highest" keeps FP32 matmuls in FP32
// (PyTorch's default since 1.12); "high" lets them run as TF32 on GPUs that
// have it (allow_tf32 = True, the NGC containers' default).
enum class MatmulPrecision { Highest, High };
// None: FP32 everywhere. Autocast: torch.autocast + GradScaler (per-op casts,
// FP32 weights). PureHalf: the model itself in half precision, FP32 master
// weights in the optimizer (apex O2, DeepLearningExamples' BERT "AMP").
enum class AmpFlavour { None, Autocast, PureHalf };
enum class HalfType { FP16, BF16 };
// Activation layout of convolutional networks.
enum class MemoryFormat { NCHW, ChannelsLast };
// Eager: batched matmuls and a softmax kernel. Fused: one scaled-dot-product
// (flash / memory-efficient) attention kernel per layer.
enum class AttentionKernel { Eager, Fused };

// How the host and the GPU meet within a step.
enum class StepSync {
  // Each phase (forward; loss + zero_grad + backward + optimizer) starts on
  // an idle GPU and ends synchronised: how GPEmu timed its profiles.
  Phases,
  // The step as a training loop issues it back to back: the host runs ahead
  // of the GPU up to CUDA's launch queue depth and waits only at the
  // program's sync points (GradScaler's inf check: found_inf.item()); the
  // step time is the steady state of consecutive steps.
  Pipelined,
};
std::string_view to_string(StepSync s);  // "phases", "pipelined"

struct ProgramVariant {
  MatmulPrecision matmul_precision = MatmulPrecision::Highest;
  // torch.backends.cudnn.allow_tf32 (True by default since PyTorch 1.7).
  bool tf32_conv = true;
  AmpFlavour amp = AmpFlavour::None;
  HalfType half = HalfType::FP16;
  MemoryFormat memory_format = MemoryFormat::NCHW;
  AttentionKernel attention = AttentionKernel::Eager;
  // Fused kernels: the attention scores' scale + softmax + dropout (NVFuser,
  // Megatron's fused softmax), LayerNorm (apex FusedLayerNorm), bias + GELU,
  // and a multi-tensor optimizer (FusedAdam / FusedLAMB / foreach).
  bool fused_softmax = false, fused_layer_norm = false, fused_gelu = false, fused_optimizer = false;
  // A foreach (multi-tensor) optimizer, PyTorch 2's default: each kind of
  // per-parameter update kernel is one call over every parameter (a few
  // launches) instead of one launch per parameter; same bytes.
  bool foreach_optimizer = false;
  // Whether any of the chains the zoo's fused graphs fuse is asked
  // (softmax, LayerNorm, GELU; the optimizer is a rewrite of any graph).
  bool fused_chains() const { return fused_softmax || fused_layer_norm || fused_gelu; }
  // Gradient-accumulation micro-steps per optimizer update: the update's cost
  // is spread over this many steps.
  int micro_steps = 1;
  bool operator==(const ProgramVariant&) const = default;
};

// Names as on the command line: "highest"/"high", "none"/"autocast"/
// "pure_half", "fp16"/"bf16", "nchw"/"channels_last", "eager"/"fused".
std::string_view to_string(MatmulPrecision v);
std::string_view to_string(AmpFlavour v);
std::string_view to_string(HalfType v);
std::string_view to_string(MemoryFormat v);
std::string_view to_string(AttentionKernel v);
// Parsers (case-insensitive; '-' read as '_'). Each throws InputError naming
// `what` (a flag or a file:line:column), the value and the accepted ones.
MatmulPrecision parse_matmul_precision(std::string_view text, std::string_view what = "--matmul-precision");
AmpFlavour parse_amp_flavour(std::string_view text, std::string_view what = "--amp");
HalfType parse_half_type(std::string_view text, std::string_view what = "--half");
MemoryFormat parse_memory_format(std::string_view text, std::string_view what = "--memory-format");
AttentionKernel parse_attention(std::string_view text, std::string_view what = "--attention");
// "none", or a comma-separated set of "softmax", "layer_norm", "gelu",
// "optimizer", or "all".
void parse_fused_ops(std::string_view text, ProgramVariant& into, std::string_view what = "--fused");
std::string fused_ops_string(const ProgramVariant& v);  // "none" or "softmax,layer_norm,gelu,..."

// The zoo precision the variant's graph is traced in: FP32 without AMP,
// AMP_FP16 / AMP_BF16 otherwise.
zoo::Precision zoo_precision(const ProgramVariant& v);
// The variant from the older --precision names ("fp32", "amp", "bf16").
ProgramVariant variant_from_precision(zoo::Precision p);

// A variant as its options spell it: the command line's flags and the
// Python module's keywords (the same names and defaults).
struct ProgramVariantNames {
  std::string matmul_precision = "highest", amp = "autocast", memory_format = "nchw", attention = "eager",
              fused = "none", cudnn_tf32 = "on", foreach = "off";
  int micro_steps = 1;
};
// The variant for a run at `precision` (fp32, amp or bf16 picks AMP on or
// off and the half type; `amp` picks the AMP flavour). Throws InputError
// naming the option as a flag ("--matmul-precision") or, with keywords, as a
// keyword ("matmul_precision"), with the values it accepts.
ProgramVariant to_variant(const ProgramVariantNames& names, zoo::Precision precision, bool keywords = false);

// How a PyTorch major version runs an unchanged training script by default
// (docs/host.md): what `--torch 1|2` sets, each flag still overriding its part.
struct TorchPreset {
  int major = 1;
  bool zero_grad_to_none = false;    // optimizer.zero_grad() sets grads to None (2.0's default)
  bool foreach_optimizer = false;    // SGD/Adam default to foreach (multi-tensor) kernels on CUDA (2.0)
  bool multihead_sdpa = false;       // nn.MultiheadAttention calls scaled_dot_product_attention in training (2.0)
  StepSync sync = StepSync::Phases;  // 1: GPEmu's timing (each phase synchronised); 2: steps back to back
  bool default_host = false;         // 2: the default host profile (host.h, kDefaultHost) issues the steps
};
// "1" (also "1.x", "1.13") or "2" ("2.x", "2.11"); InputError naming `what` otherwise.
TorchPreset torch_preset(std::string_view version, std::string_view what = "--torch");
// The names with the preset's defaults where a name is "" (not given):
// attention ("fused" for a model that runs_multihead_attention under 2, else
// "eager") and foreach ("on" under 2, else "off").
ProgramVariantNames with_torch_defaults(ProgramVariantNames names, const TorchPreset& preset, std::string_view model);

// What a variant asks that the model cannot express yet: nullopt when
// everything is modelled, otherwise a sentence naming what is not.
std::optional<std::string> unsupported_part(const ProgramVariant& v);

// One line for notes and reports, e.g. "amp autocast fp16, matmul highest,
// channels_last, eager attention, fused none, 1 micro-step".
std::string describe(const ProgramVariant& v);

// The zoo model that runs `task` for a model: "" or the model's own task
// returns the model; BERT's "pretraining" (masked-only MLM head + NSP) and
// "squad" (QA head) are the zoo's <model>_pretraining and <model>_squad.
// Throws InputError naming the task and the accepted ones for that model.
std::string task_model(std::string_view model, std::string_view task);

// The zoo graph a variant of `model` runs. Fused attention is a graph of its
// own, `<model>_sdpa` (one scaled-dot-product kernel per layer each way;
// traced for the BERT, GPT-2 and Llama models): with v.attention Fused the
// result is that graph, and a model named `..._sdpa` sets it in `v`. The
// zoo has no graph with both fused attention and fused chains (InputError).
// The fused chains are graphs of
// their own, `<model>_fused` (scale + softmax + dropout of the attention
// scores, bias + dropout + residual add + LayerNorm, and bias + GELU, one
// kernel each, as DeepLearningExamples' NVFuser-scripted BERT runs them;
// traced for BERT's pretraining and squad heads): with v.fused_softmax,
// v.fused_layer_norm and v.fused_gelu the result is that graph, and a model
// named `..._fused` sets the three in `v`. Throws InputError naming `what`
// (the flag or keyword) when only some of the three are asked, or when the
// model has no fused graph.
std::string variant_model(const std::string& model, ProgramVariant& v, std::string_view what = "--fused");
// Whether `model`'s attention is torch.nn.MultiheadAttention (torchvision's
// ViT), which PyTorch 2 runs through F.scaled_dot_product_attention in
// training: its torch-2 program is the model's `_sdpa` graph.
bool runs_multihead_attention(std::string_view model);
// Whether the zoo graph `model` is a fused one (named `..._fused`).
bool is_fused_graph(std::string_view model);
// Whether the zoo graph `model` has fused attention (named `..._sdpa`).
bool is_sdpa_graph(std::string_view model);

}  // namespace gpemu

// ==== analytical model ====
//
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

// ==== zoo memory ====
//
// GPU memory of a training iteration from the model zoo's traced tensor
// lifetimes (zoo.h), replayed through gpemu's emulation of PyTorch's caching
// allocator (caching_allocator.h). docs/zoo-memory.md has the rules and the
// measured error against GPEmu's memory tables.
//
// The replay (replay_memory):
//   1. parameters, buffers and other pre-existing non-input tensors are
//      allocated once, in tensor-id order;
//   2. iteration 0 ("cold", as a training loop's first step): the input batch
//      is allocated, then per op the tensors it creates and the tensors that
//      die after it; gradients are created by their backward op, optimizer
//      state (momentum, Adam moments) at its first use in the first step;
//   3. iterations 1.. ("steady"): as 2., with gradients and optimizer state
//      already there. With ReplayOptions::keep_grads (zero_grad() with
//      set_to_none=False, PyTorch < 2.0's default and how GPEmu measured)
//      a backward op's gradient output is a temporary that is accumulated
//      into the kept .grad and freed after the op; otherwise the grads are
//      created in backward and released at the iteration's end;
//   4. the input batch is released at each iteration's end.
// Peak allocated / reserved are the allocator's peaks over all iterations.
// ReplayOptions::until_steady replays until the allocator's state repeats and
// warm_start makes grads and optimizer state before iteration 0; oom_capacity()
// and oom_replay_options() decide whether a batch fits a catalogued card.
//
// Thread safety: free functions on immutable inputs; callable from any thread.

namespace gpemu::zoo {

struct ReplayOptions {
  Precision precision = Precision::FP32;
  Optimizer optimizer = Optimizer::SGD;
  // true: optimizer.zero_grad() keeps the .grad tensors (set_to_none=False;
  // PyTorch < 2.0 default; GPEmu's measurements). false: set_to_none=True
  // (PyTorch >= 2.0 default; what the zoo trace records).
  bool keep_grads = true;
  // PyTorch < 1.10 saved the *result* of in-place hardtanh_ (ReLU6(inplace=True))
  // for backward; from 1.10 on autograd saves a clone of its input (the zoo's
  // trace, torch 1.13). true drops those clones (GPEmu's V100/P100/M40 tables
  // were measured with the older PyTorch: docs/zoo-memory.md).
  bool legacy_inplace_hardtanh = false;
  // true: the training loop holds the model's output until the step ends
  // (`output = model(x); loss = criterion(output, y)` as imagenet's main.py
  // and GPEmu's profiler write it; the zoo's trace). false: only the loss is
  // kept (`F.cross_entropy(model(x), y)`, Hugging Face's `model(...).loss`):
  // a forward result that no backward op reads dies at its last forward use.
  bool keep_output = true;
  // Iterations replayed: the first is cold, the rest steady (>= 1).
  int iterations = 2;
  // After `iterations`, keep replaying steady iterations until one reserves
  // and releases no segment (the allocator's state then repeats, so every
  // later iteration is the same), at most `max_iterations` in all. The
  // allocator's layout can take several iterations to settle, and a later
  // iteration can need more memory than the first two: a batch fits a card
  // only if the settled iterations do (docs/zoo-memory.md).
  bool until_steady = false;
  int max_iterations = 16;
  // Gradients (with keep_grads) and optimizer state exist before iteration 0
  // and were made apart from this batch's activations: allocated right after
  // the parameters, and every iteration is a steady one. This is a process
  // that has already trained (GPEmu's profiler ran batch sizes 1, 2, ... in one
  // process, emptying the cache in between) or that restored its optimizer
  // from a checkpoint. false: iteration 0 creates them, as a fresh job does.
  // (until_steady and warm_start shape replay_memory and max_batch only;
  // zoo_memory_plan ignores them.)
  bool warm_start = false;
  // PyTorch's max_split_size_mb, in bytes (CachingAllocator::Options).
  std::uint64_t max_split_size_bytes = std::numeric_limits<std::uint64_t>::max();
};

// One allocation or release in a replay plan.
struct MemoryEvent {
  int slot = 0;       // index into ZooMemoryPlan::slot_bytes
  bool alloc = true;  // false: release
  // Op (index into ModelGraph::ops() with the same precision/optimizer) the
  // event belongs to: -1 at the iteration's start (input batch), ops.size()
  // at its end (input and set_to_none grads).
  int op = -1;
  Phase phase = Phase::Forward;  // phase of `op` (start: Forward, end: Optimizer)
};

// Per-tensor allocations of training iterations, for a workload to drive a
// device's allocator with (TrainingJob): allocate `persistent` once, run
// `first_iteration` for iteration 0 and `steady_iteration` for every later
// one, applying each event when its op's phase runs. Slots are storages
// (zoo tensors plus, with keep_grads, one temporary per gradient).
struct ZooMemoryPlan {
  std::vector<std::uint64_t> slot_bytes;  // exact storage bytes (the allocator rounds)
  std::vector<int> slot_tensor;           // slot -> index into ModelGraph::tensors() (-1: none)
  std::vector<int> persistent;            // slots allocated before iteration 0, in order
  std::vector<MemoryEvent> first_iteration;
  std::vector<MemoryEvent> steady_iteration;
  int op_count = 0;               // ModelGraph::ops().size()
  std::uint64_t input_bytes = 0;  // the batch's bytes (role "input")
};
ZooMemoryPlan zoo_memory_plan(const ModelGraph& model, Shape shape, const ReplayOptions& options = {});

// What a replay found.
struct MemoryReplay {
  bool fits = true;
  std::uint64_t capacity_bytes = 0;
  Shape shape;  // resolved (defaults filled in)
  // Allocated bytes live across iterations at the end of the replay (weights,
  // buffers, optimizer state, kept grads; not the input), allocator block sizes.
  std::uint64_t persistent_bytes = 0;
  std::uint64_t input_bytes = 0;  // the batch, exact bytes
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  int iterations_replayed = 0;  // with until_steady, how many it took
  int peak_iteration = -1;      // where allocated memory peaked
  int peak_op = -1;             // op index (see MemoryEvent::op)
  Phase peak_phase = Phase::Forward;
  // Out of memory: PyTorch's message and where it happened.
  std::string oom_message;
  int oom_iteration = -1, oom_op = -1;
  Phase oom_phase = Phase::Forward;
};

// Replays `options.iterations` iterations at `shape` through a fresh
// CachingAllocator of `capacity_bytes` (CachingAllocator::kUnlimited: no limit).
MemoryReplay replay_memory(const ModelGraph& model, Shape shape, std::uint64_t capacity_bytes,
                           const ReplayOptions& options = {});

// The largest batch size (at shape.seq_len) whose replay fits in
// `capacity_bytes`: exponential search, then binary search. 0 when batch 1
// does not fit; `limit` when everything up to it fits.
std::int64_t max_batch(std::uint64_t capacity_bytes, const ModelGraph& model, Shape shape,
                       const ReplayOptions& options = {}, std::int64_t limit = std::int64_t{1} << 20);

// ---- will a batch fit on a real card? ----------------------------------------

// The replay holds exactly the traced storages. A real run also allocates
// cuDNN convolution workspaces through the caching allocator and the
// segments they leave behind fragment it, so a real card runs out of memory
// when the replay still has some room. kDefaultWorkspaceMargin (device.h) is
// that extra, as a share of what the replay needs: a batch fits when the
// replay fits in (card memory - context) / (1 + margin); fitted on GPEmu's four
// measured cards and cross-checked leaving one card out (docs/zoo-memory.md,
// "Out-of-memory points").

// The capacity to replay with to decide whether a batch fits `gpu`: its
// reported total memory (GpuSpec::reported_memory) less the CUDA context
// (Device::default_context_reserve), divided by 1 + margin. margin >= 0.
std::uint64_t oom_capacity(const GpuSpec& gpu, double margin = kDefaultWorkspaceMargin);

// The replay options for that decision: `options` with until_steady set.
ReplayOptions oom_replay_options(ReplayOptions options);

// ---- cost-model integration ------------------------------------------------

// Fills a StepCost's memory figures from the zoo replay (unlimited capacity)
// when the model is in the zoo and the cost's memory is not measured
// (provenance Measured or Interpolated keep precedence): persistent_bytes,
// peak_bytes, peak_reserved_bytes, input_bytes_per_sample; memory_provenance
// Estimated; a sentence appended to the note. Returns whether it applied.
bool apply_zoo_memory(StepCost& cost, std::string_view model, int batch_size, const ReplayOptions& options = {},
                      std::int64_t seq_len = 0);

// A CostModel that forwards to `inner` and applies apply_zoo_memory() to
// every StepCost it returns. models() is inner's.
std::unique_ptr<CostModel> with_zoo_memory(std::unique_ptr<CostModel> inner, ReplayOptions options = {});

}  // namespace gpemu::zoo
