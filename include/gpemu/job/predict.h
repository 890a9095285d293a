// `gpemu predict`: a model's training step on a card, its time and memory
// (the zoo replay), with the expected error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/cost/analytical_model.h"
#include "gpemu/cost/cost_model.h"
#include "gpemu/cost/profile.h"
#include "gpemu/cost/zoo_memory.h"
#include "gpemu/device/host_memory.h"
#include "gpemu/job/spec.h"
#include "gpemu/time.h"
#include "gpemu/zoo.h"

namespace gpemu {
//
// What `gpemu predict` prints and the Python module's gpemu.predict returns,
// computed once here for every front end: the times from predict_step with
// the layered cost model of the request's program variant, the memory from
// the zoo's traced lifetimes replayed until the allocator settles (or the
// cost model's figures for models outside the zoo), a measured profile's OOM
// evidence winning over the replay, and the expected error of the calibration.

// The options of the analytical model and of the zoo's memory replay for a model spec.
AnalyticalOptions analytical_options(const ModelSpec& m);
zoo::ReplayOptions replay_options(const ModelSpec& m);
// The layered cost model a job of this model runs on (make_layered_cost_model):
// measured profiles from `profiles` where they apply, then the analytical
// model; `notes` hears why profiles were set aside when they were.
std::unique_ptr<CostModel> job_cost_model(const ModelSpec& m,
                                          const std::optional<std::filesystem::path>& profiles = std::nullopt,
                                          std::vector<std::string>* notes = nullptr);

struct PredictRequest {
  const GpuSpec* gpu = nullptr;  // required
  ModelSpec model;
  // nullopt: only the largest batch that fits (max_batch must be set).
  std::optional<int> batch_size;
  bool max_batch = false;  // also find the largest batch that fits (zoo models)
  HostMemoryKind host = HostMemoryKind::Pinned;
  // Measured profiles (GPEmu or gpemu layout); nullopt: the analytical model alone.
  std::optional<std::filesystem::path> profiles;
};

struct Prediction {
  std::string gpu, model;  // catalog id, canonical model name
  int batch_size = 0;      // 0: a largest-batch-only request
  HostMemoryKind host = HostMemoryKind::Pinned;
  zoo::Precision precision = zoo::Precision::FP32;
  zoo::Optimizer optimizer = zoo::Optimizer::SGD;
  bool keep_grads = true;
  bool keep_output = true;      // ModelSpec::keep_output
  std::string program_variant;  // describe(variant)
  std::string host_profile;     // the host profile's name ("" : the GPU family's calibrated launch times)
  std::string step_sync;        // "phases" or "pipelined"
  // The analytical model's host and GPU side of one step (zoo models whose
  // times the analytical model gives): which bounds each phase.
  std::optional<StepBreakdown> breakdown;
  std::optional<std::int64_t> seq_len;  // sequence models: the resolved length
  Duration transfer = 0, forward = 0, backward = 0, iteration = 0;
  bool transfer_measured = false;  // from a profile, not the PCIe model
  std::uint64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0, capacity_bytes = 0;
  bool fits = true;
  std::string oom_reason;     // when it does not fit (or max_batch is 0)
  std::string memory_source;  // "model zoo replay" or "cost model"
  Provenance forward_provenance = Provenance::Estimated, backward_provenance = Provenance::Estimated,
             memory_provenance = Provenance::Estimated;
  std::string note, cost_model;  // where the times come from; the cost model's describe()
  std::optional<int> oom_evidence_batch;
  std::optional<std::int64_t> max_batch;
  std::optional<ExpectedError> expected_error;  // zero for a replayed measurement
  std::vector<std::string> notes;               // warnings for the user (profiles set aside)
  double samples_per_s() const { return iteration > 0 ? batch_size / to_seconds(iteration) : 0; }
};

// InputError naming what was wrong: an unknown model, a sequence length for
// a model without one, BF16 on a card without it, no batch size and no
// max_batch, max_batch for a model outside the zoo.
Prediction predict(const PredictRequest& request);

}  // namespace gpemu
