#include "gpemu/train/analyze.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/host_memory.h"

namespace gpemu::train {
namespace {

enum class PassKind { GpuBound, Cached, Cold };

int effective_cores(const LoaderModelOptions& m) {
  return m.cores > 0 ? m.cores : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int loader_threads(const DataStallOptions& o) {
  return o.model.loader_threads > 0 ? o.model.loader_threads : o.train.gpus * std::max(1, o.loader.num_workers);
}

// One loader per GPU for the cached or cold pass.
std::vector<std::unique_ptr<BatchSource>> loaders(Clock& clock, Trainer& trainer, const DataStallOptions& o,
                                                  PassKind kind) {
  std::vector<std::unique_ptr<BatchSource>> sources;
  LoaderModelOptions model = o.model;
  model.loader_threads = loader_threads(o);
  if (kind == PassKind::Cold) model = cold_loader_model(model, o.storage, model.loader_threads);
  for (int g = 0; g < o.train.gpus; ++g) {
    pipeline::LoaderOptions lo = o.loader;
    lo.rank = g;
    lo.world_size = o.train.gpus;
    if (clock.is_virtual() || kind == PassKind::GpuBound) {  // gpu-bound: only counts the shard's batches
      lo.cache.reset();
      sources.push_back(std::make_unique<ModelledLoader>(clock, o.dataset, lo, model, &trainer.timeline()));
    } else {
      PipelineSourceOptions so;
      so.rank = g;
      so.cold = kind == PassKind::Cold;
      sources.push_back(std::make_unique<PipelineSource>(clock, o.dataset, lo, so));
    }
  }
  return sources;
}

DataStallPass run_pass(const GpuSpec& spec, const CostModel& costs, const DataStallOptions& o, PassKind kind,
                       std::string& model_name) {
  auto clock = make_clock(o.clock);
  TrainOptions t = o.train;
  t.epochs = 2;  // warm-up epoch, then the measured one
  t.max_iterations = -1;
  Trainer trainer(*clock, spec, costs, t);
  std::vector<std::unique_ptr<BatchSource>> sources = loaders(*clock, trainer, o, kind);
  DataStallPass p;
  if (kind == PassKind::GpuBound) {
    p.name = "gpu-bound";
    // As many full batches per GPU as its loader shard has, always ready.
    std::vector<std::unique_ptr<BatchSource>> synthetic;
    for (const auto& s : sources)
      synthetic.push_back(std::make_unique<SyntheticSource>(
          *clock, static_cast<std::int64_t>(s->batches_per_epoch()), t.batch_size, trainer.cost().input_bytes_per_sample,
          o.loader.pin_memory ? HostMemoryKind::Pinned : HostMemoryKind::Pageable));
    sources = std::move(synthetic);
  } else {
    p.name = kind == PassKind::Cached ? "cached" : "cold";
  }
  p.source = sources.front()->describe();
  TrainResult r = trainer.run(std::move(sources));
  model_name = r.model;
  if (r.epochs.size() < 2) throw InputError("the analysis needs two epochs: the dataset gave no batches");
  const EpochResult& e = r.epochs[1];
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

DataStallResult analyze_data_stalls(const GpuSpec& spec, const CostModel& costs, const DataStallOptions& o) {
  if (o.clock != "virtual" && o.clock != "real")
    throw InputError(fmt::format("unknown clock '{}': accepted 'real' or 'virtual'", o.clock));
  if (o.dataset.size() == 0) throw InputError(fmt::format("dataset '{}' has no samples", o.dataset.root));
  DataStallResult res;
  res.gpu = spec.id;
  res.clock = o.clock;
  res.gpus = o.train.gpus;
  res.batch_size = o.train.batch_size;
  res.workers = o.loader.num_workers;
  res.cores = effective_cores(o.model);
  res.gpu_bound = run_pass(spec, costs, o, PassKind::GpuBound, res.model);
  res.cached = run_pass(spec, costs, o, PassKind::Cached, res.model);
  res.cold = run_pass(spec, costs, o, PassKind::Cold, res.model);
  res.prep_stall_pct = prep_stall_share(res.gpu_bound.epoch, res.cached.epoch, res.cold.epoch);
  res.fetch_stall_pct = fetch_stall_share(res.cached.epoch, res.cold.epoch);
  return res;
}

}  // namespace gpemu::train
