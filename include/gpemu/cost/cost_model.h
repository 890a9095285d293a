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
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/cost/profile.h"
#include "gpemu/time.h"

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
