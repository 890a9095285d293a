#include <algorithm>
#include <iostream>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/job_args.h"
#include "cli/option_checks.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/variant_flags.h"
#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/zoo.h"

namespace gpemu::cli {
namespace {

struct PredictArgs {
  std::string gpu, model, profiles, host_memory = "pinned";
  std::optional<int> batch_size;
  std::int64_t seq_len = 0;
  std::string precision = "fp32", optimizer = "sgd", zero_grad = "zero";
  bool max_batch = false;
  bool json = false;
  std::string task;
  VariantFlags variant;
};

// What predict reports about memory, from the zoo replay or the cost model's figures.
struct MemoryFigures {
  bool fits = true;
  std::uint64_t peak_allocated = 0, peak_reserved = 0;
  std::string reason;
  std::string source;  // "model zoo replay" or "cost model"
};

ModelArgs model_args(const PredictArgs& a) {
  ModelArgs m;
  m.gpu = a.gpu;
  m.model = a.model;
  m.seq_len = a.seq_len;
  m.precision = a.precision;
  m.optimizer = a.optimizer;
  m.zero_grad = a.zero_grad;
  m.profiles = a.profiles;
  return m;
}

// The model options as `gpemu train` maps them (cli/job_args.h); whether a
// batch fits is decided as a real card decides it: replayed until the
// allocator's layout settles (docs/zoo-memory.md, "Out-of-memory points").
zoo::ReplayOptions replay_options(const PredictArgs& a) {
  return zoo::oom_replay_options(cli::replay_options(model_spec(model_args(a))));
}

// The analytical model's options for what was asked: time follows precision,
// optimizer, zero_grad and sequence length as memory does.
AnalyticalOptions analytical_options(const PredictArgs& a, const zoo::ReplayOptions& o) {
  AnalyticalOptions ao;
  ao.optimizer = o.optimizer;
  ao.legacy_zero_grad = o.keep_grads;
  ao.seq_len = a.seq_len;
  return to_analytical_options(to_variant(a.variant, o.precision), ao);
}

// The layered cost model sets measured profiles aside for conditions they
// were not measured in (measured_profiles_apply); say so when --profiles was given.
std::unique_ptr<CostModel> cost_model_for(const PredictArgs& a, const zoo::ReplayOptions& o) {
  const AnalyticalOptions ao = analytical_options(a, o);
  if (a.profiles.empty()) return make_layered_cost_model(std::nullopt, ao);
  if (!measured_profiles_apply(ao))
    std::cerr << fmt::format(
        "note: --profiles {} not used: measured profiles are FP32 runs with SGD and "
        "zero_grad(); times for {}, {}, zero_grad '{}' come from the analytical model\n",
        a.profiles, zoo::to_string(o.precision), zoo::to_string(o.optimizer), a.zero_grad);
  return make_layered_cost_model(std::filesystem::path(a.profiles), ao);
}

// The zoo's graph for the model when memory should come from its replay:
// the model is in the zoo and no measured profile covers this batch's memory.
const zoo::ModelGraph* zoo_graph_for_memory(const PredictArgs& a, const StepCost* c) {
  if (c && (c->memory_provenance == Provenance::Measured || c->memory_provenance == Provenance::Interpolated))
    return nullptr;
  return zoo::find_model(a.model);
}

MemoryFigures memory_figures(const PredictArgs& a, const StepCost& c, int batch, std::uint64_t capacity,
                             const zoo::ReplayOptions& opts) {
  MemoryFigures m;
  if (const zoo::ModelGraph* g = zoo_graph_for_memory(a, &c)) {
    const zoo::MemoryReplay r = zoo::replay_memory(*g, zoo::Shape{batch, a.seq_len}, capacity, opts);
    m.fits = r.fits;
    m.peak_allocated = r.peak_allocated_bytes;
    m.peak_reserved = r.peak_reserved_bytes;
    m.reason = r.oom_message;
    m.source = "model zoo replay";
    if (m.fits && c.oom_evidence_batch && batch >= *c.oom_evidence_batch) {
      m.fits = false;
      m.reason =
          fmt::format("measured profile: batch size {} ran out of memory on the real card (first failing batch {})",
                      batch, *c.oom_evidence_batch);
    }
    return m;
  }
  const MemoryCheck mem = check_memory(c, batch, capacity);
  m.fits = mem.fits;
  m.peak_allocated = mem.peak_allocated_bytes;
  m.peak_reserved = mem.peak_reserved_bytes;
  m.reason = mem.reason;
  m.source = "cost model";
  return m;
}

const zoo::ModelGraph& zoo_graph_for_max_batch(const PredictArgs& a) {
  if (const zoo::ModelGraph* g = zoo::find_model(a.model)) return *g;
  const auto known = zoo::zoo_models();
  std::string list;
  for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
  throw InputError(
      fmt::format("--max-batch needs the model's tensor graph from the model zoo, and '{}' is not in it; "
                  "zoo models: {}",
                  a.model, list));
}

// The zoo's largest batch, capped below a measured profile's first failing
// batch (OOM evidence on the real card wins, as for `fits`).
std::int64_t largest_batch(const zoo::ModelGraph& g, std::uint64_t capacity, std::int64_t seq_len,
                           const zoo::ReplayOptions& opts, std::optional<int> oom_evidence) {
  const std::int64_t best = zoo::max_batch(capacity, g, zoo::Shape{1, seq_len}, opts);
  return oom_evidence ? std::min<std::int64_t>(best, *oom_evidence - 1) : best;
}

void print_max_batch_only(const PredictArgs& a, const GpuSpec& gpu, std::uint64_t capacity,
                          const zoo::ReplayOptions& opts) {
  const zoo::ModelGraph& g = zoo_graph_for_max_batch(a);
  const zoo::Shape shape = g.resolve(zoo::Shape{1, a.seq_len});
  std::optional<int> evidence;
  if (!a.profiles.empty()) {
    auto costs = cost_model_for(a, opts);
    try {
      evidence = costs->step_cost(gpu, a.model, 1).oom_evidence_batch;
    } catch (const InputError&) {
      // no profile or estimate for this model: the zoo alone decides
    }
  }
  const std::int64_t best = largest_batch(g, capacity, shape.seq_len, opts, evidence);
  const zoo::MemoryReplay r =
      zoo::replay_memory(g, zoo::Shape{std::max<std::int64_t>(best, 1), shape.seq_len}, capacity, opts);
  if (a.json) {
    nlohmann::json j = {{"gpu", gpu.id},
                        {"model", g.name()},
                        {"precision", std::string(zoo::to_string(opts.precision))},
                        {"optimizer", std::string(zoo::to_string(opts.optimizer))},
                        {"zero_grad", a.zero_grad},
                        {"capacity_mib", mib(capacity)},
                        {"max_batch", best},
                        {"peak_allocated_mib", mib(r.peak_allocated_bytes)},
                        {"peak_reserved_mib", mib(r.peak_reserved_bytes)},
                        {"memory_source", "model zoo replay"}};
    if (g.has_seq_len()) j["seq_len"] = shape.seq_len;
    if (best == 0) j["oom_reason"] = r.oom_message;
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("{} on {} ({}, {}{})\n\n", g.name(), gpu.id, zoo::to_string(opts.precision),
                           zoo::to_string(opts.optimizer),
                           g.has_seq_len() ? fmt::format(", seq_len {}", shape.seq_len) : "");
  std::vector<std::pair<std::string, std::string>> rows = {
      {"largest batch that fits", std::to_string(best)},
      {"capacity",
       fmt::format("{} MiB (reported memory minus CUDA context and cuDNN workspace margin)", fixed(mib(capacity), 1))}};
  if (best > 0) {
    rows.push_back(
        {fmt::format("peak allocated at {}", best), fmt::format("{} MiB", fixed(mib(r.peak_allocated_bytes), 1))});
    rows.push_back(
        {fmt::format("peak reserved at {}", best), fmt::format("{} MiB", fixed(mib(r.peak_reserved_bytes), 1))});
  }
  print_summary(std::cout, rows);
  if (best == 0) std::cout << "why not: " << r.oom_message << '\n';
  std::cout << "source: model zoo tensor lifetimes replayed through the caching allocator (docs/zoo-memory.md)\n";
}

void predict(const PredictArgs& a) {
  const GpuSpec& gpu = find_gpu(a.gpu);
  const HostMemoryKind kind = parse_host_memory(a.host_memory);
  const zoo::ReplayOptions opts = replay_options(a);
  if (a.seq_len < 0)
    throw InputError(fmt::format("sequence length {} is impossible: it must be at least 1", a.seq_len));
  if (opts.precision == zoo::Precision::AMP_BF16 && !gpu.peak_tflops(Precision::BF16))
    // PyTorch's autocast checks torch.cuda.is_bf16_supported() and, on such a
    // card, disables itself with a warning: the run would be FP32.
    throw InputError(
        fmt::format("--precision bf16: {} has no BF16 support ('gpemu devices' lists its BF16 as -), "
                    "and PyTorch disables bf16 autocast there; accepted on it: fp32 or amp",
                    gpu.id));
  if (a.seq_len > 0) {
    const zoo::ModelGraph* sg = zoo::find_model(a.model);
    if (sg && !sg->has_seq_len())
      throw InputError(
          fmt::format("--seq-len {}: {} has no sequence dimension; give --seq-len only for sequence "
                      "models (gpemu models lists their default_seq_len)",
                      a.seq_len, sg->name()));
  }
  const std::uint64_t capacity = zoo::oom_capacity(gpu);
  if (!a.batch_size) {
    if (!a.max_batch) throw InputError("--batch-size is required (or --max-batch to find the largest that fits)");
    print_max_batch_only(a, gpu, capacity, opts);
    return;
  }
  const int batch = *a.batch_size;
  auto costs = cost_model_for(a, opts);
  StepCost c = costs->step_cost(gpu, a.model, batch);
  zoo::apply_zoo_memory(c, a.model, batch, opts, a.seq_len);
  // Times: two steps of the job itself (job.h, predict_step).
  JobSpec spec;
  spec.cluster.gpu = &gpu;
  spec.batch_size = batch;
  spec.compute.model = model_spec(model_args(a));
  const StepPrediction step = predict_step(*costs, spec, kind);
  const Duration transfer = step.transfer;
  c.forward = step.forward;
  c.backward = step.backward;
  const MemoryFigures mem = memory_figures(a, c, batch, capacity, opts);
  const Duration iteration = step.iteration;
  std::optional<std::int64_t> best;
  if (a.max_batch) {
    const zoo::ModelGraph& g = zoo_graph_for_max_batch(a);
    best = largest_batch(g, capacity, a.seq_len, opts, c.oom_evidence_batch);
  }
  const zoo::ModelGraph* g = zoo::find_model(a.model);

  if (a.json) {
    nlohmann::json j = {{"gpu", gpu.id},
                        {"model", canonical_model_name(a.model)},
                        {"batch_size", batch},
                        {"host_memory", std::string(to_string(kind))},
                        {"precision", std::string(zoo::to_string(opts.precision))},
                        {"optimizer", std::string(zoo::to_string(opts.optimizer))},
                        {"zero_grad", a.zero_grad},
                        {"program_variant", describe(to_variant(a.variant, opts.precision))},
                        {"forward_ms", to_ms(c.forward)},
                        {"backward_ms", to_ms(c.backward)},
                        {"transfer_ms", to_ms(transfer)},
                        {"iteration_ms", to_ms(iteration)},
                        {"samples_per_s", batch / to_seconds(iteration)},
                        {"peak_allocated_mib", mib(mem.peak_allocated)},
                        {"peak_reserved_mib", mib(mem.peak_reserved)},
                        {"capacity_mib", mib(capacity)},
                        {"fits", mem.fits},
                        {"memory_source", mem.source},
                        {"provenance",
                         {{"forward", std::string(to_string(c.forward_provenance))},
                          {"backward", std::string(to_string(c.backward_provenance))},
                          {"memory", std::string(to_string(c.memory_provenance))}}},
                        {"note", c.note},
                        {"cost_model", costs->describe()}};
    if (g && g->has_seq_len()) j["seq_len"] = g->resolve(zoo::Shape{1, a.seq_len}).seq_len;
    if (!mem.fits) j["oom_reason"] = mem.reason;
    if (c.oom_evidence_batch) j["oom_evidence_batch"] = *c.oom_evidence_batch;
    if (best) j["max_batch"] = *best;
    // How far to trust the times: the validation error of this GPU family
    // and model family (docs/validation.md); a replayed measurement has none.
    if (c.forward_provenance == Provenance::Measured && c.backward_provenance == Provenance::Measured) {
      j["expected_error_pct"] = {
          {"forward", 0.0}, {"backward", 0.0}, {"iteration", 0.0}, {"basis", "measured profile replayed"}};
    } else if (auto e = expected_error(gpu, a.model)) {
      j["expected_error_pct"] = {{"forward", e->pct.forward},
                                 {"backward", e->pct.backward},
                                 {"iteration", e->pct.iteration},
                                 {"basis", e->basis}};
    }
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("{} on {} at batch size {} ({} host memory, {}, {})\n\n", canonical_model_name(a.model),
                           gpu.id, batch, to_string(kind), zoo::to_string(opts.precision),
                           zoo::to_string(opts.optimizer));
  Table t({"phase", "time ms", "source"});
  t.add({"transfer (H2D)", fixed(to_ms(transfer), 3),
         (kind == HostMemoryKind::Pinned ? c.transfer_pinned : c.transfer_pageable) ? "measured" : "PCIe model"});
  t.add({"forward", fixed(to_ms(c.forward), 3), std::string(to_string(c.forward_provenance))});
  t.add({"backward + step", fixed(to_ms(c.backward), 3), std::string(to_string(c.backward_provenance))});
  t.add({"iteration", fixed(to_ms(iteration), 3), ""});
  t.print(std::cout);
  std::cout << '\n';
  std::vector<std::pair<std::string, std::string>> rows = {
      {"samples/s", fixed(batch / to_seconds(iteration), 1)},
      {"peak allocated", fmt::format("{} MiB", fixed(mib(mem.peak_allocated), 1))},
      {"peak reserved", fmt::format("{} MiB", fixed(mib(mem.peak_reserved), 1))},
      {"capacity",
       fmt::format("{} MiB (reported memory minus CUDA context and cuDNN workspace margin)", fixed(mib(capacity), 1))},
      {"fits", mem.fits ? "yes" : "no"},
      {"memory from", mem.source},
  };
  if (best) rows.push_back({"largest batch that fits", std::to_string(*best)});
  print_summary(std::cout, rows);
  if (!mem.fits) std::cout << "why not: " << mem.reason << '\n';
  std::cout << "source: " << c.note << '\n';
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto a = std::make_shared<PredictArgs>();
  auto* cmd = app.add_subcommand("predict", "Predict one training iteration's time and memory for a model on a GPU");
  cmd->add_option("--gpu", a->gpu, "GPU to emulate (see 'gpemu devices')")->required();
  cmd->add_option("--model", a->model, "Model name")->required();
  cmd->add_option("--batch-size,-b", a->batch_size, "Batch size (optional with --max-batch)")
      ->check(whole_number_in(1, std::numeric_limits<int>::max()));
  cmd->add_flag("--max-batch", a->max_batch,
                "Also find the largest batch size that fits on the GPU (model zoo models)");
  cmd->add_option("--seq-len", a->seq_len, "Sequence length of sequence models (default: the model's)")
      ->check(whole_number_in(1, zoo::kMaxSeqLen));
  cmd->add_option("--precision", a->precision, "fp32, amp (FP16 autocast) or bf16")->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer, "sgd (momentum) or adam")->capture_default_str();
  cmd->add_option("--zero-grad", a->zero_grad,
                  "zero: zero_grad() keeps .grad (PyTorch < 2.0 default); none: set_to_none=True (PyTorch >= 2.0)")
      ->capture_default_str();
  cmd->add_option("--profiles", a->profiles, "Directory of measured profiles (GPEmu or gpemu layout)");
  cmd->add_option("--host-memory", a->host_memory, "Host memory the batch is copied from: pinned or pageable")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->add_option(
      "--task", a->task,
      "BERT: pretraining (masked-only MLM + NSP heads) or squad (QA head); default: the zoo model as named");
  add_variant_flags(cmd, a->variant);
  cmd->callback([a] {
    PredictArgs b = *a;
    b.model = task_model(b.model, b.task);
    predict(b);
  });
}

}  // namespace gpemu::cli
