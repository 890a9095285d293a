#include "gpemu/train.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gpemu/clock.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/loader_choice.h"
#include "gpemu/pipeline.h"
#include "gpemu/session.h"

namespace gpemu::train {
namespace {

enum class PassKind { GpuBound, Cached, Cold };

int effective_cores(const LoaderModelOptions& m) {
  return m.cores > 0 ? m.cores : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int loader_threads(const DataStallOptions& o) {
  return o.model.loader_threads > 0 ? o.model.loader_threads : o.job.cluster.gpus * std::max(1, o.loader.num_workers);
}

DataStallPass run_pass(const CostModel& costs, const DataStallOptions& o, PassKind kind, std::string& model_name) {
  auto clock = make_clock(o.clock);
  JobSpec spec = o.job;
  spec.schedule.epochs = 2;  // warm-up epoch, then the measured one
  spec.schedule.max_iterations = -1;
  spec.data.dataset = o.dataset;
  spec.data.loader = o.loader;
  spec.data.pin_memory = o.loader.pin_memory;
  LoaderModelOptions model = o.model;
  model.loader_threads = loader_threads(o);
  if (kind == PassKind::Cold) model = cold_loader_model(model, o.storage, model.loader_threads);
  spec.data.model = model;
  DataStallPass p;
  if (kind == PassKind::GpuBound) {
    p.name = "gpu-bound";
    // As many full batches per GPU as its loader shard has, always ready.
    pipeline::LoaderOptions lo = o.loader;
    lo.world_size = spec.cluster.gpus;
    lo.cache.reset();
    const pipeline::ModelledLoader shard(*clock, o.dataset, lo, model);
    spec.data.source = DataSource::Synthetic;
    spec.data.synthetic_batches = static_cast<std::int64_t>(shard.batches_per_epoch());
  } else {
    p.name = kind == PassKind::Cached ? "cached" : "cold";
    spec.data.source = dataset_source(o.clock);
    spec.data.cold = kind == PassKind::Cold;
  }
  const RunRecord rec = run_alone(*clock, costs, spec);
  const RunSummary r = summarize(rec);
  p.source = r.source;
  model_name = r.model;
  if (r.epochs.size() < 2) throw InputError("the analysis needs two epochs: the dataset gave no batches");
  const EpochSummary& e = r.epochs[1];
  p.epoch = e.end - e.start;
  p.samples = e.samples;
  p.samples_per_s = p.epoch > 0 ? static_cast<double>(p.samples) / to_seconds(p.epoch) : 0;
  p.trainer_stall_pct = r.data_stall_pct;
  return p;
}

}  // namespace

LoaderModelOptions cold_loader_model(const LoaderModelOptions& cached, const StorageModel& storage, int threads) {
  if (storage.read_per_sample < 0 || !(storage.bytes_per_s > 0))
    throw InputError("storage model: the per-file latency must not be negative and the bandwidth must be positive");
  LoaderModelOptions m = cached;
  const int concurrent = std::max(1, std::min(std::max(1, threads), effective_cores(cached)));
  m.read_per_sample = storage.read_per_sample;
  m.read_bytes_per_s = storage.bytes_per_s / concurrent;
  return m;
}

double prep_stall_share(Duration t_gpu, Duration t_prep, Duration t_cold) {
  if (t_cold <= 0) return 0;
  return 100.0 * static_cast<double>(std::max<Duration>(0, t_prep - t_gpu)) / static_cast<double>(t_cold);
}

double fetch_stall_share(Duration t_prep, Duration t_cold) {
  if (t_cold <= 0) return 0;
  return 100.0 * static_cast<double>(std::max<Duration>(0, t_cold - t_prep)) / static_cast<double>(t_cold);
}

DataStallResult analyze_data_stalls(const CostModel& costs, const DataStallOptions& o) {
  validate(o.job);
  if (o.dataset.size() == 0) throw InputError(fmt::format("dataset '{}' has no samples", o.dataset.root));
  DataStallResult res;
  res.gpu = o.job.cluster.gpu->id;
  res.clock = std::string(to_string(o.clock));
  res.gpus = o.job.cluster.gpus;
  res.batch_size = o.job.batch_size;
  res.workers = o.loader.num_workers;
  res.cores = effective_cores(o.model);
  res.gpu_bound = run_pass(costs, o, PassKind::GpuBound, res.model);
  res.cached = run_pass(costs, o, PassKind::Cached, res.model);
  res.cold = run_pass(costs, o, PassKind::Cold, res.model);
  res.prep_stall_pct = prep_stall_share(res.gpu_bound.epoch, res.cached.epoch, res.cold.epoch);
  res.fetch_stall_pct = fetch_stall_share(res.cached.epoch, res.cold.epoch);
  return res;
}

}  // namespace gpemu::train
