// `gpemu predict`'s figures for every front end (job.h, "gpemu predict").
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/zoo.h"
#include "workload/prediction_json.h"
#include "zoo/seq_len.h"

namespace gpemu {

ProgramVariant program_variant(const ModelSpec& m) {
  return m.variant ? *m.variant : variant_from_precision(m.precision);
}

void set_program_variant(ModelSpec& m, const ProgramVariant& v) {
  m.variant = v;
  m.precision = zoo_precision(v);
}

void apply_torch_preset(ModelSpec& m, const TorchPreset& preset, ProgramVariantNames names, bool keywords) {
  ProgramVariant v = to_variant(with_torch_defaults(std::move(names), preset, m.name), m.precision, keywords);
  m.name = variant_model(m.name, v, keywords ? "fused" : "--fused");
  set_program_variant(m, v);
  m.keep_grads = !preset.zero_grad_to_none;
  m.sync = preset.sync;
  m.host.reset();
  if (preset.default_host) m.host = find_host(kDefaultHost, "--host");
}

void apply_zero_grad(ModelSpec& m, std::string_view value, bool keywords) {
  if (value == "zero")
    m.keep_grads = true;
  else if (value == "none")
    m.keep_grads = false;
  else if (!value.empty())
    throw InputError(
        fmt::format("unknown {} '{}': expected zero (grads kept, PyTorch < 2.0's zero_grad()) or none "
                    "(set_to_none=True, PyTorch >= 2.0's default)",
                    keywords ? "zero_grad" : "--zero-grad", value));
}

AnalyticalOptions analytical_options(const ModelSpec& m) {
  AnalyticalOptions ao;
  ao.optimizer = m.optimizer;
  ao.legacy_zero_grad = m.keep_grads;
  ao.seq_len = m.seq_len;
  ao.host = m.host;
  ao.sync = m.sync;
  ao = to_analytical_options(program_variant(m), ao);
  if (ao.precision != m.precision)
    throw Error(fmt::format("model spec of {}: precision {} but a variant traced in {} (use set_program_variant)",
                            m.name, zoo::to_string(m.precision), zoo::to_string(ao.precision)));
  return ao;
}

zoo::ReplayOptions replay_options(const ModelSpec& m) {
  zoo::ReplayOptions o;
  o.precision = m.precision;
  o.optimizer = m.optimizer;
  o.keep_grads = m.keep_grads;
  o.keep_output = m.keep_output;
  return o;
}

namespace {

std::string profiles_set_aside(const ModelSpec& m, const std::filesystem::path& profiles) {
  return fmt::format(
      "--profiles {} not used: measured profiles are PyTorch 1.x programs (FP32, SGD, zero_grad(), each phase "
      "synchronised, on GPEmu's hosts; --torch 1); times for {}, {}, zero_grad '{}'{} come from the analytical model",
      profiles.string(), zoo::to_string(m.precision), zoo::to_string(m.optimizer), m.keep_grads ? "zero" : "none",
      m.sync == StepSync::Pipelined ? ", steps back to back" : "");
}

}  // namespace

std::unique_ptr<CostModel> job_cost_model(const ModelSpec& m, const std::optional<std::filesystem::path>& profiles,
                                          std::vector<std::string>* notes) {
  const AnalyticalOptions ao = analytical_options(m);
  if (profiles && !measured_profiles_apply(ao) && notes) notes->push_back(profiles_set_aside(m, *profiles));
  return make_layered_cost_model(profiles, ao);
}

namespace {

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::string zero_grad_name(bool keep_grads) { return keep_grads ? "zero" : "none"; }

// The layered cost model of the request's program variant; the prediction
// notes why measured profiles were set aside when they were.
std::unique_ptr<CostModel> cost_model_for(const PredictRequest& r, const AnalyticalOptions& ao,
                                          std::vector<std::string>& notes) {
  if (r.profiles && !measured_profiles_apply(ao)) notes.push_back(profiles_set_aside(r.model, *r.profiles));
  return make_layered_cost_model(r.profiles, ao);
}

const zoo::ModelGraph& zoo_graph_for_max_batch(std::string_view model) {
  if (const zoo::ModelGraph* g = zoo::find_model(model)) return *g;
  std::string list;
  for (const auto& n : zoo::zoo_models()) list += (list.empty() ? "" : ", ") + n;
  throw InputError(
      fmt::format("--max-batch needs the model's tensor graph from the model zoo, and '{}' is not in it; "
                  "zoo models: {}",
                  model, list));
}

// The zoo's largest batch, capped below a measured profile's first failing
// batch (OOM evidence on the real card wins, as for `fits`).
std::int64_t largest_batch(const zoo::ModelGraph& g, std::uint64_t capacity, std::int64_t seq_len,
                           const zoo::ReplayOptions& opts, std::optional<int> oom_evidence) {
  const std::int64_t best = zoo::max_batch(capacity, g, zoo::Shape{1, seq_len}, opts);
  return oom_evidence ? std::min<std::int64_t>(best, *oom_evidence - 1) : best;
}

void check_request(const PredictRequest& r) {
  if (!r.gpu) throw InputError("predict: no GPU given");
  const GpuSpec& gpu = *r.gpu;
  if (r.model.seq_len < 0)
    throw InputError(fmt::format("sequence length {} is impossible: it must be at least 1", r.model.seq_len));
  if (r.batch_size && *r.batch_size < 1)
    throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", *r.batch_size));
  if (zoo::is_bf16(r.model.precision) && !gpu.peak_tflops(Precision::BF16))
    // PyTorch's autocast checks torch.cuda.is_bf16_supported() and, on such a
    // card, disables itself with a warning: the run would be FP32.
    throw InputError(
        fmt::format("--precision bf16: {} has no BF16 support ('gpemu devices' lists its BF16 as -), "
                    "and PyTorch disables bf16 autocast there; accepted on it: fp32 or amp",
                    gpu.id));
  zoo::check_seq_len_applies(r.model.name, r.model.seq_len);
  if (!r.batch_size && !r.max_batch)
    throw InputError("--batch-size is required (or --max-batch to find the largest that fits)");
}

Prediction base_prediction(const PredictRequest& r) {
  Prediction p;
  p.gpu = r.gpu->id;
  p.host = r.host;
  p.precision = r.model.precision;
  p.optimizer = r.model.optimizer;
  p.keep_grads = r.model.keep_grads;
  p.keep_output = r.model.keep_output;
  p.program_variant = describe(program_variant(r.model));
  return p;
}

// Only the largest batch that fits, from the zoo's replay.
Prediction predict_max_batch(const PredictRequest& r, const zoo::ReplayOptions& opts, std::uint64_t capacity) {
  Prediction p = base_prediction(r);
  const zoo::ModelGraph& g = zoo_graph_for_max_batch(r.model.name);
  const zoo::Shape shape = g.resolve(zoo::Shape{1, r.model.seq_len});
  std::optional<int> evidence;
  if (r.profiles) {
    auto costs = cost_model_for(r, analytical_options(r.model), p.notes);
    try {
      evidence = costs->step_cost(*r.gpu, r.model.name, 1).oom_evidence_batch;
    } catch (const InputError&) {
      // no profile or estimate for this model: the zoo alone decides
    }
  }
  const std::int64_t best = largest_batch(g, capacity, shape.seq_len, opts, evidence);
  const zoo::MemoryReplay rep =
      zoo::replay_memory(g, zoo::Shape{std::max<std::int64_t>(best, 1), shape.seq_len}, capacity, opts);
  p.model = g.name();
  if (g.has_seq_len()) p.seq_len = shape.seq_len;
  p.capacity_bytes = capacity;
  p.max_batch = best;
  p.fits = best > 0;
  p.peak_allocated_bytes = rep.peak_allocated_bytes;
  p.peak_reserved_bytes = rep.peak_reserved_bytes;
  if (best == 0) p.oom_reason = rep.oom_message;
  p.memory_source = "model zoo replay";
  return p;
}

}  // namespace

Prediction predict(const PredictRequest& r) {
  check_request(r);
  const GpuSpec& gpu = *r.gpu;
  // Whether a batch fits is decided as a real card decides it: replayed until
  // the allocator's layout settles (docs/zoo-memory.md, "Out-of-memory points").
  const zoo::ReplayOptions opts = zoo::oom_replay_options(replay_options(r.model));
  const std::uint64_t capacity = zoo::oom_capacity(gpu);
  if (!r.batch_size) return predict_max_batch(r, opts, capacity);

  Prediction p = base_prediction(r);
  const int batch = *r.batch_size;
  const AnalyticalOptions ao = analytical_options(r.model);
  auto costs = cost_model_for(r, ao, p.notes);
  StepCost c = costs->step_cost(gpu, r.model.name, batch);
  zoo::apply_zoo_memory(c, r.model.name, batch, opts, r.model.seq_len);
  // Times: two steps of the job itself (predict_step).
  JobSpec spec;
  spec.cluster.gpu = &gpu;
  spec.batch_size = batch;
  spec.compute.model = r.model;
  const StepPrediction step = predict_step(*costs, spec, r.host);
  p.model = canonical_model_name(r.model.name);
  p.batch_size = batch;
  p.transfer = step.transfer;
  p.forward = step.forward;
  p.backward = step.backward;
  p.iteration = step.iteration;
  p.transfer_measured = (r.host == HostMemoryKind::Pinned ? c.transfer_pinned : c.transfer_pageable).has_value();
  p.forward_provenance = c.forward_provenance;
  p.backward_provenance = c.backward_provenance;
  p.memory_provenance = c.memory_provenance;
  p.note = c.note;
  p.cost_model = costs->describe();
  p.host_profile = r.model.host ? r.model.host->name : "";
  p.step_sync = std::string(to_string(r.model.sync));
  if (const auto* layered = dynamic_cast<const LayeredCostModel*>(costs.get());
      layered && c.forward_provenance == Provenance::Estimated && zoo::has_model(r.model.name)) {
    const AnalyticalCostModel& am = layered->analytical();
    p.breakdown = predict_step(am.program(r.model.name), batch, gpu_peaks(gpu, ao), am.calibration().factors(gpu),
                               am.calibration().correction(r.model.name));
  }
  p.oom_evidence_batch = c.oom_evidence_batch;
  p.capacity_bytes = capacity;

  // Memory: the zoo's replay unless a measured profile covers this batch's memory.
  const zoo::ModelGraph* g = zoo::find_model(r.model.name);
  const bool measured_memory =
      c.memory_provenance == Provenance::Measured || c.memory_provenance == Provenance::Interpolated;
  if (g && !measured_memory) {
    const zoo::MemoryReplay rep = zoo::replay_memory(*g, zoo::Shape{batch, r.model.seq_len}, capacity, opts);
    p.fits = rep.fits;
    p.peak_allocated_bytes = rep.peak_allocated_bytes;
    p.peak_reserved_bytes = rep.peak_reserved_bytes;
    p.oom_reason = rep.oom_message;
    p.memory_source = "model zoo replay";
    if (p.fits && c.oom_evidence_batch && batch >= *c.oom_evidence_batch) {
      p.fits = false;
      p.oom_reason =
          fmt::format("measured profile: batch size {} ran out of memory on the real card (first failing batch {})",
                      batch, *c.oom_evidence_batch);
    }
  } else {
    const MemoryCheck mem = check_memory(c, batch, capacity);
    p.fits = mem.fits;
    p.peak_allocated_bytes = mem.peak_allocated_bytes;
    p.peak_reserved_bytes = mem.peak_reserved_bytes;
    p.oom_reason = mem.reason;
    p.memory_source = "cost model";
  }
  if (p.fits) p.oom_reason.clear();
  if (r.max_batch)
    p.max_batch =
        largest_batch(zoo_graph_for_max_batch(r.model.name), capacity, r.model.seq_len, opts, c.oom_evidence_batch);
  if (g && g->has_seq_len()) p.seq_len = g->resolve(zoo::Shape{1, r.model.seq_len}).seq_len;
  // How far to trust the times: the validation error of this GPU family and
  // model family (docs/validation.md); a replayed measurement has none.
  if (c.forward_provenance == Provenance::Measured && c.backward_provenance == Provenance::Measured)
    p.expected_error = ExpectedError{PhaseErrors{0, 0, 0}, "measured profile replayed"};
  else
    p.expected_error = expected_error(gpu, r.model.name, evidence_precision(ao, gpu, g ? g->family() : "cnn"));
  return p;
}

nlohmann::json prediction_json(const Prediction& p) {
  nlohmann::json j;
  if (p.batch_size == 0) {
    // A largest-batch-only request.
    j = {{"gpu", p.gpu},
         {"model", p.model},
         {"precision", std::string(zoo::to_string(p.precision))},
         {"optimizer", std::string(zoo::to_string(p.optimizer))},
         {"zero_grad", zero_grad_name(p.keep_grads)},
         {"keep_output", p.keep_output},
         {"capacity_mib", mib(p.capacity_bytes)},
         {"max_batch", p.max_batch.value_or(0)},
         {"peak_allocated_mib", mib(p.peak_allocated_bytes)},
         {"peak_reserved_mib", mib(p.peak_reserved_bytes)},
         {"memory_source", p.memory_source}};
    if (p.seq_len) j["seq_len"] = *p.seq_len;
    if (!p.fits) j["oom_reason"] = p.oom_reason;
    return j;
  }
  j = {{"gpu", p.gpu},
       {"model", p.model},
       {"batch_size", p.batch_size},
       {"host_memory", std::string(to_string(p.host))},
       {"precision", std::string(zoo::to_string(p.precision))},
       {"optimizer", std::string(zoo::to_string(p.optimizer))},
       {"zero_grad", zero_grad_name(p.keep_grads)},
       {"keep_output", p.keep_output},
       {"program_variant", p.program_variant},
       {"host_profile", p.host_profile.empty() ? std::string("calibrated family launch times") : p.host_profile},
       {"step_sync", p.step_sync},
       {"forward_ms", to_ms(p.forward)},
       {"backward_ms", to_ms(p.backward)},
       {"transfer_ms", to_ms(p.transfer)},
       {"iteration_ms", to_ms(p.iteration)},
       {"samples_per_s", p.samples_per_s()},
       {"peak_allocated_mib", mib(p.peak_allocated_bytes)},
       {"peak_reserved_mib", mib(p.peak_reserved_bytes)},
       {"capacity_mib", mib(p.capacity_bytes)},
       {"fits", p.fits},
       {"memory_source", p.memory_source},
       {"provenance",
        {{"forward", std::string(to_string(p.forward_provenance))},
         {"backward", std::string(to_string(p.backward_provenance))},
         {"memory", std::string(to_string(p.memory_provenance))}}},
       {"note", p.note},
       {"cost_model", p.cost_model}};
  if (p.seq_len) j["seq_len"] = *p.seq_len;
  if (!p.fits) j["oom_reason"] = p.oom_reason;
  if (p.oom_evidence_batch) j["oom_evidence_batch"] = *p.oom_evidence_batch;
  if (p.max_batch) j["max_batch"] = *p.max_batch;
  if (p.expected_error)
    j["expected_error_pct"] = {{"forward", p.expected_error->pct.forward},
                               {"backward", p.expected_error->pct.backward},
                               {"iteration", p.expected_error->pct.iteration},
                               {"basis", p.expected_error->basis}};
  if (p.breakdown) {
    const StepBreakdown& b = *p.breakdown;
    j["host_ms"] = {{"forward", b.host.forward * 1e3}, {"backward", b.host.backward * 1e3}};
    j["gpu_ms"] = {{"forward", b.gpu.forward * 1e3}, {"backward", b.gpu.backward * 1e3}};
    j["bound"] = {{"forward", b.host.forward > b.gpu.forward ? "host" : "gpu"},
                  {"backward", b.host.backward > b.gpu.backward ? "host" : "gpu"}};
    j["syncs_per_step"] = b.syncs;
  }
  return j;
}

}  // namespace gpemu
