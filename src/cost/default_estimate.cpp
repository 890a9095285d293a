// The built-in estimate used where no profile was measured: a roofline-style
// time per phase and a parameter/activation memory rule (docs/cost-model.md).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "cost/text_fields.h"
#include "cost/units.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {

namespace {

// Weights, their gradients and SGD's momentum buffer, FP32 each.
constexpr std::uint64_t kPersistentBytesPerParameter = 12;

Duration phase_time(double flops, double flops_per_second, Duration floor, Duration overhead) {
  Duration compute = from_seconds(flops / flops_per_second);
  return std::max(floor, compute) + overhead;
}

}  // namespace

StepCost estimate_step_cost(const GpuSpec& gpu, std::string_view model, int batch_size,
                            const EstimateOptions& options) {
  cost_detail::require_batch_size(batch_size);
  const ModelFacts* facts = find_builtin_model(model);
  if (!facts)
    throw InputError(
        fmt::format("unknown model '{}': no measured profile and no built-in figures; "
                    "expected one of {}",
                    model, cost_detail::join(EstimateCostModel().models())));
  if (!(gpu.fp32_tflops > 0))
    throw InputError(
        fmt::format("GPU {} has no FP32 peak in the catalog, which the built-in estimate "
                    "needs",
                    gpu.id));
  if (!(options.efficiency > 0))
    throw InputError(fmt::format("estimate efficiency {} is invalid: expected a number > 0", options.efficiency));

  const double forward_flops = 2.0 * facts->forward_gmacs * 1e9 * batch_size;
  const double flops_per_second = gpu.fp32_tflops * 1e12 * options.efficiency;

  StepCost cost;
  cost.forward = phase_time(forward_flops, flops_per_second, options.forward_launch_floor, options.forward_overhead);
  // Backward computes gradients for both activations and weights: about twice
  // the forward FLOPs.
  cost.backward =
      phase_time(2.0 * forward_flops, flops_per_second, options.backward_launch_floor, options.backward_overhead);
  cost.input_bytes_per_sample = kImageNetInputBytes;
  cost.persistent_bytes = kPersistentBytesPerParameter * facts->parameters;
  const double activation_mib = facts->transient_mib + facts->activation_mib_per_sample * batch_size;
  cost.peak_bytes = cost.persistent_bytes + cost.input_bytes_per_sample * static_cast<std::uint64_t>(batch_size) +
                    cost_detail::mib_to_bytes(activation_mib);
  cost.forward_provenance = cost.backward_provenance = cost.memory_provenance = Provenance::Estimated;
  cost.note = fmt::format(
      "estimate: no measured profile for {}/{} (roofline: {:.3g} GFLOP/sample forward, {:g} TFLOP/s "
      "FP32 x {:g} efficiency; memory from parameters and V100-fitted activations)",
      gpu.id, facts->name, 2.0 * facts->forward_gmacs, gpu.fp32_tflops, options.efficiency);
  return cost;
}

EstimateCostModel::EstimateCostModel(EstimateOptions options) : options_(options) {}

StepCost EstimateCostModel::step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const {
  return estimate_step_cost(gpu, model, batch_size, options_);
}

std::vector<std::string> EstimateCostModel::models() const {
  std::vector<std::string> names;
  for (const ModelFacts& m : builtin_models()) names.emplace_back(m.name);
  return names;
}

std::string EstimateCostModel::describe() const {
  return fmt::format("built-in estimates for {} models (roofline, {:g} of peak FP32; no measured profiles)",
                     builtin_models().size(), options_.efficiency);
}

}  // namespace gpemu
