// Helpers for the train tests: a cost model with round numbers, in-memory
// datasets for the modelled loader, a temporary folder, and Trainer: a small
// test rig that runs the job (job.h) on sources the test builds itself.
#pragma once

#include "support/temp_dir.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "clock/host_sync.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/pipeline.h"
#include "gpemu/train.h"
#include "report/configuration_rows.h"
#include "train/summary_json.h"
#include "workload/backward_plan.h"

namespace gpemu::train {

using pipeline::BatchSource;
using pipeline::LoaderModelOptions;
using pipeline::model_sample_cost;
using pipeline::ModelledLoader;
using pipeline::PipelineSource;
using pipeline::PipelineSourceOptions;
using pipeline::SampleCost;
using pipeline::SyntheticSource;
using BatchRecord = StepRecord;
using GpuResult = GpuSummary;
using EpochResult = EpochSummary;

// What a test asks of a training run (mapped onto a JobSpec).
struct TrainOptions {
  std::string model = std::string(kDefaultModel);
  int batch_size = 64;
  int gpus = 1;
  int epochs = 1;
  std::int64_t max_iterations = -1;
  SyncMode sync = SyncMode::EveryIteration;
  VariationOptions variation;
  NodeOptions node;
  BucketOptions buckets;
};

// The summary with the record's train steps beside it.
struct TrainResult : RunSummary {
  std::vector<StepRecord> batches;
  RunRecord record;
};

inline JobSpec job_spec(const TrainOptions& o, const GpuSpec& gpu) {
  JobSpec spec;
  spec.cluster.gpu = &gpu;
  spec.cluster.gpus = o.gpus;
  spec.cluster.node = o.node;
  spec.cluster.buckets = o.buckets;
  spec.batch_size = o.batch_size;
  spec.compute.model.name = o.model;
  spec.compute.sync = o.sync;
  spec.compute.variation = o.variation;
  spec.schedule.epochs = o.epochs;
  spec.schedule.max_iterations = o.max_iterations;
  return spec;
}

// Runs one job on sources the test made (DataSource::Custom).
class Trainer {
 public:
  Trainer(Clock& clock, const GpuSpec& gpu, const CostModel& costs, TrainOptions o) {
    JobSpec spec = job_spec(o, gpu);
    spec.data.source = DataSource::Custom;
    spec.data.custom = [this](int rank, Clock&, Timeline&) {
      return std::move(sources_.at(static_cast<std::size_t>(rank)));
    };
    job_ = std::make_unique<Job>(clock, costs, spec);
  }
  Timeline& timeline() { return job_->timeline(); }
  int gpus() const { return job_->gpus(); }
  Device& device(int g) { return job_->device(g); }
  const StepCost& cost() const { return job_->cost(); }
  std::vector<TraceDeviceName> trace_devices() const { return job_->trace_devices(); }
  Job& job() { return *job_; }

  TrainResult run(std::vector<std::unique_ptr<BatchSource>> sources) {
    sources_ = std::move(sources);
    TrainResult r;
    r.record = job_->run();
    static_cast<RunSummary&>(r) = summarize(r.record);
    for (const StepRecord& b : r.record.steps)
      if (b.phase == RunPhase::Train) r.batches.push_back(b);
    return r;
  }

 private:
  std::vector<std::unique_ptr<BatchSource>> sources_;
  std::unique_ptr<Job> job_;
};

inline nlohmann::json summary_json(const TrainResult& r) { return train::summary_json(r.record); }
inline void add_stall_spans(const TrainResult& r, Timeline& t) { train::add_stall_spans(r.record, t); }
inline RunReport make_run_report(const TrainResult& r, nlohmann::json c = nlohmann::json::object()) {
  return train::make_run_report(r.record, configuration_rows(c));
}

}  // namespace gpemu::train

namespace gpemu::train::testing {

// Fixed per-iteration costs (any batch size scales nothing, except bytes).
class FixedCosts : public CostModel {
 public:
  Duration forward = 10 * kMillisecond;
  Duration backward = 10 * kMillisecond;
  std::optional<Duration> transfer_pinned;  // replayed when set
  std::uint64_t persistent = 64ull << 20;
  std::uint64_t activations_per_sample = 1ull << 20;

  StepCost step_cost(const GpuSpec&, std::string_view, int batch_size) const override {
    StepCost c;
    c.forward = forward;
    c.backward = backward;
    c.transfer_pinned = transfer_pinned;
    c.input_bytes_per_sample = kImageNetInputBytes;
    c.persistent_bytes = persistent;
    c.peak_bytes = persistent + static_cast<std::uint64_t>(batch_size) * (kImageNetInputBytes + activations_per_sample);
    c.note = "fixed test costs";
    return c;
  }
  std::vector<std::string> models() const override { return {"resnet18"}; }
  std::string describe() const override { return "fixed"; }
};

// Exact timing: no noise, no warm-up.
inline TrainOptions exact_options(int gpus = 1, int batch_size = 4) {
  TrainOptions o;
  o.batch_size = batch_size;
  o.gpus = gpus;
  o.variation.cv = 0;
  o.variation.warmup_factor = 1;
  return o;
}

// `n` JPEG samples of `bytes` each (no files: for the modelled loader).
inline pipeline::Dataset memory_dataset(std::size_t n, std::uint64_t bytes = 100000) {
  pipeline::Dataset d;
  d.root = "memory";
  for (std::size_t i = 0; i < n; ++i) {
    pipeline::Sample s;
    s.path = "memory/" + std::to_string(i) + ".jpg";
    s.length = bytes;
    s.format = pipeline::SampleFormat::Jpeg;
    s.label = static_cast<std::int64_t>(i % 10);
    d.samples.push_back(s);
  }
  return d;
}

// A loader model costing exactly `per_sample` per sample (decode only), on
// enough cores that workers never share.
inline LoaderModelOptions per_sample_cost(Duration per_sample) {
  LoaderModelOptions m;
  m.read_per_sample = 0;
  m.read_bytes_per_s = 0;
  m.decode_per_sample = per_sample;
  m.decode_ns_per_byte = 0;
  m.cores = 64;
  return m;
}

inline pipeline::LoaderOptions loader_options(std::size_t batch, int workers, int prefetch = 2, int rank = 0,
                                              int world = 1) {
  pipeline::LoaderOptions o;
  o.batch_size = batch;
  o.num_workers = workers;
  o.prefetch_factor = prefetch;
  o.pin_memory = true;
  o.shuffle = true;
  o.seed = 1;
  o.rank = rank;
  o.world_size = world;
  return o;
}

inline std::vector<std::unique_ptr<BatchSource>> modelled_sources(Clock& clock, Trainer& t, std::size_t samples,
                                                                  std::size_t batch, int workers, Duration per_sample,
                                                                  int prefetch = 2) {
  std::vector<std::unique_ptr<BatchSource>> out;
  for (int g = 0; g < t.gpus(); ++g)
    out.push_back(std::make_unique<ModelledLoader>(clock, memory_dataset(samples),
                                                   loader_options(batch, workers, prefetch, g, t.gpus()),
                                                   per_sample_cost(per_sample), &t.timeline()));
  return out;
}

using TempDir = gpemu::testing::TempDir;

}  // namespace gpemu::train::testing
