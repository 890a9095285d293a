// Composing the cost of a step: measured profiles where they exist, built-in
// estimates for the (GPU, model) pairs and quantities they do not cover.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "cost/text_fields.h"
#include "cost/units.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {

namespace {

using cost_detail::join;
using cost_detail::mib_to_bytes;

// "forward measured", "memory extrapolated beyond batch 176", ...
std::string describe_part(std::string_view what, const Series& series, int batch, Provenance p) {
  switch (p) {
    case Provenance::Measured: return fmt::format("{} measured", what);
    case Provenance::Interpolated: return fmt::format("{} interpolated", what);
    case Provenance::Extrapolated:
      return batch > series.back().batch_size
                 ? fmt::format("{} extrapolated beyond batch {}", what, series.back().batch_size)
                 : fmt::format("{} extrapolated below batch {}", what, series.front().batch_size);
    case Provenance::Estimated: return fmt::format("{} estimated", what);
  }
  return std::string(what);
}

}  // namespace

CostModel::~CostModel() = default;

ProfileCostModel::ProfileCostModel(ProfileDatabase profiles, std::string origin, EstimateOptions options)
    : profiles_(std::move(profiles)), origin_(std::move(origin)), estimates_(options), options_(options) {}

StepCost ProfileCostModel::step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const {
  cost_detail::require_batch_size(batch_size);
  const Profile* p = profiles_.find(gpu.id, model);
  const ModelFacts* facts = find_builtin_model(model);
  if (!p) {
    if (!facts) {
      std::vector<std::string> elsewhere;
      for (const Profile& q : profiles_.profiles())
        if (q.model == canonical_model_name(model)) elsewhere.push_back(q.gpu);
      if (!elsewhere.empty())
        throw InputError(
            fmt::format("no profile for model '{}' on {} and no built-in figures for it; "
                        "profiles for it exist on {}; built-in models: {}",
                        model, gpu.id, join(elsewhere), join(estimates_.models())));
      throw InputError(fmt::format("unknown model '{}': expected one of {}", model, join(models())));
    }
    return estimates_.step_cost(gpu, model, batch_size);
  }

  std::optional<StepCost> estimate;
  if (facts) estimate = estimate_step_cost(gpu, model, batch_size, options_);
  auto need_estimate = [&](std::string_view what) -> const StepCost& {
    if (!estimate)
      throw InputError(
          fmt::format("{}: the profile for {}/{} has no {} rows and '{}' has no built-in "
                      "figures to fill in; expected {} rows in the profile",
                      p->source, p->gpu, p->model, what, p->model, what));
    return *estimate;
  };

  StepCost cost;
  std::vector<std::string> parts;

  // Forward and backward: replayed from the profile when it has the phase,
  // estimated otherwise.
  auto phase = [&](const char* name, const auto& series, Duration& out, Provenance& provenance, auto estimated) {
    if (!series.empty()) {
      SeriesValue v = lookup(series, batch_size);
      out = from_seconds(v.value);
      provenance = v.provenance;
      parts.push_back(describe_part(name, series, batch_size, v.provenance));
    } else {
      out = estimated();
      provenance = Provenance::Estimated;
      parts.push_back(std::string(name) + " estimated (not in profile)");
    }
  };
  phase("forward", p->forward_s, cost.forward, cost.forward_provenance,
        [&] { return need_estimate("forward_s").forward; });
  phase("backward", p->backward_s, cost.backward, cost.backward_provenance,
        [&] { return need_estimate("backward_s").backward; });

  if (!p->transfer_s.empty()) {
    Duration t = from_seconds(lookup(p->transfer_s, batch_size).value);
    if (p->transfer_host_memory == HostMemoryKind::Pinned)
      cost.transfer_pinned = t;
    else
      cost.transfer_pageable = t;
  }
  if (p->model_transfer_s) cost.model_transfer = from_seconds(*p->model_transfer_s);

  cost.input_bytes_per_sample = p->input_bytes_per_sample > 0 ? p->input_bytes_per_sample
                                : estimate                    ? estimate->input_bytes_per_sample
                                                              : 0;
  if (!p->peak_allocated_mib.empty()) {
    SeriesValue v = lookup(p->peak_allocated_mib, batch_size);
    cost.peak_bytes = mib_to_bytes(v.value);
    cost.memory_provenance = v.provenance;
    parts.push_back(describe_part("memory", p->peak_allocated_mib, batch_size, v.provenance));
    if (!p->persistent_mib.empty())
      cost.persistent_bytes = mib_to_bytes(lookup(p->persistent_mib, batch_size).value);
    else if (estimate)
      cost.persistent_bytes = estimate->persistent_bytes;
  } else if (estimate) {
    cost.peak_bytes = estimate->peak_bytes;
    cost.persistent_bytes = estimate->persistent_bytes;
    cost.memory_provenance = Provenance::Estimated;
    parts.emplace_back("memory estimated (not in profile)");
  } else {
    cost.memory_provenance = Provenance::Estimated;
    parts.emplace_back("memory unknown (not in profile, no built-in figures): 0 bytes");
  }
  if (!p->peak_reserved_mib.empty())
    cost.peak_reserved_bytes = mib_to_bytes(lookup(p->peak_reserved_mib, batch_size).value);
  if (!p->forward_cv.empty()) cost.forward_cv = lookup(p->forward_cv, batch_size).value;
  if (!p->backward_cv.empty()) cost.backward_cv = lookup(p->backward_cv, batch_size).value;

  cost.oom_evidence_batch = p->oom_batch_size;
  cost.note = fmt::format("profile {}: {}", p->source, join(parts));
  if (p->oom_batch_size) cost.note += fmt::format("; batch {} did not fit on the measured card", *p->oom_batch_size);
  return cost;
}

std::vector<std::string> ProfileCostModel::models() const {
  std::set<std::string> names;
  for (const std::string& m : profiles_.models()) names.insert(m);
  for (const std::string& m : estimates_.models()) names.insert(m);
  return {names.begin(), names.end()};
}

std::string ProfileCostModel::describe() const {
  std::vector<std::string> layouts;
  for (ProfileLayout l : profiles_.layouts()) layouts.emplace_back(to_string(l));
  return fmt::format(
      "measured profiles from {} ({}: {} GPU/model pairs on {} GPUs); built-in estimates for other "
      "pairs ({} models, roofline at {:g} of peak FP32)",
      origin_, layouts.empty() ? std::string("added in memory") : join(layouts), profiles_.profiles().size(),
      profiles_.gpus().size(), builtin_models().size(), options_.efficiency);
}

// Measured profiles for the pairs they cover, the calibrated analytical model
// for the other pairs of zoo models, the built-in estimate for the rest
// (analytical_model.h, docs/analytical-model.md).
std::unique_ptr<CostModel> make_cost_model(const std::optional<std::filesystem::path>& profiles_dir) {
  return make_layered_cost_model(profiles_dir, AnalyticalOptions{});
}

}  // namespace gpemu
