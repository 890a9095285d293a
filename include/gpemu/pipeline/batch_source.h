// Where a training loop's batches come from, as its host thread sees them:
// `next()` blocks until the next batch is in host memory and says when it
// became ready and how the loader spent its time on it.
//
//  - PipelineSource: the real data pipeline (DataLoader): real
//    files, real reads and JPEG decodes on real worker threads. Real clock
//    only (its workers run in wall time).
//  - ModelledLoader (train/loader_model.h): the same loader semantics with
//    modelled read/decode costs, on either clock; deterministic under the
//    virtual clock.
//  - SyntheticSource: in-memory batches that are always ready (no files), the
//    workload-only mode of `gpemu train --synthetic`.
//
// Thread safety: a BatchSource belongs to one rank's host thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/clock.h"
#include "gpemu/device/host_memory.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/pipeline/sampler.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu::pipeline {

struct LoadedBatch {
  std::uint64_t epoch = 0;
  std::size_t index = 0;  // position in the epoch
  std::int64_t samples = 0;
  std::uint64_t bytes = 0;                         // what the H2D copy moves: the batch's real size
  HostMemoryKind memory = HostMemoryKind::Pinned;  // its staging buffer
  std::vector<std::size_t> sample_indices;         // dataset indices (empty for synthetic batches)
  Time ready = 0;                                  // when the loader had finished it (emulation clock)
  Duration read = 0;                               // worker time reading its samples (summed)
  Duration decode = 0;                             // worker time decoding + transforming them (summed)
  // GPU decode (LoaderModelOptions::gpu_decode): the SM time of its decoding
  // and augmentation, which the job launches on its own stream of the rank's
  // GPU, and the device memory the pipeline holds (its decoded batches and
  // decode buffers), which the job allocates once; 0 for CPU loaders.
  Duration gpu_decode = 0;
  std::uint64_t pipeline_device_bytes = 0;
  std::shared_ptr<void> keep_alive;  // the real batch (its staging buffer), held until the next batch
};

// How a source's host thread sleeps: through the rank's HostSync, so peers
// know when it will run again (host_sync.h).
using SleepFn = std::function<void(Time deadline)>;

class BatchSource {
 public:
  virtual ~BatchSource();
  // Starts an epoch (sampler.set_epoch + iter(loader)): prefetching starts now.
  virtual void begin_epoch(std::uint64_t epoch) = 0;
  // The next batch, blocking until it is ready; nullopt at the end of the epoch.
  virtual std::optional<LoadedBatch> next(const SleepFn& sleep_until) = 0;
  virtual std::size_t batches_per_epoch() const = 0;
  // Samples this source delivers per epoch.
  virtual std::size_t samples_per_epoch() const = 0;
  // One line for people: what it is ("real loader: 2 workers, ...").
  virtual std::string describe() const = 0;
  // What it delivered and read so far.
  virtual LoaderStats stats() const { return {}; }
};

// Bytes a loader's staging buffers may hold at once for `ranks` loaders of
// these options over this dataset: (prefetch_factor x workers + 2) buffers
// per loader, each a batch of the dataset's largest output sample (a decoded
// JPEG: 3 x height x width floats; raw records: their length), rounded up to
// 1 MiB. What pinning would lock.
std::uint64_t staging_bytes(const Dataset& dataset, const LoaderOptions& options, int ranks);

// Host spans of loader work go to the trace under the process name
// "GPU <rank> loader worker" (one track per worker) or
// "GPU <rank> loader main thread" (num_workers = 0).
std::string loader_trace_process(int rank, int worker);

// ---- in-memory batches ------------------------------------------------------

class SyntheticSource : public BatchSource {
 public:
  // `batches` batches of `batch_size` samples of `bytes_per_sample` each, in
  // `memory`, ready as soon as they are asked for.
  SyntheticSource(Clock& clock, std::int64_t batches, int batch_size, std::uint64_t bytes_per_sample,
                  HostMemoryKind memory);
  // DLIO's synthetic loader: whole batches of the sampler's indices (a
  // dataset of that many samples, sharded and shuffled as the sampler says),
  // every sample `bytes_per_sample`, read from nowhere.
  SyntheticSource(Clock& clock, Sampler sampler, int batch_size, std::uint64_t bytes_per_sample, HostMemoryKind memory);
  void begin_epoch(std::uint64_t epoch) override;
  std::optional<LoadedBatch> next(const SleepFn& sleep_until) override;
  std::size_t batches_per_epoch() const override { return static_cast<std::size_t>(batches_); }
  std::size_t samples_per_epoch() const override { return static_cast<std::size_t>(batches_) * batch_size_; }
  std::string describe() const override;
  LoaderStats stats() const override { return stats_; }

 private:
  Clock& clock_;
  LoaderStats stats_;
  std::int64_t batches_;
  int batch_size_;
  std::uint64_t bytes_per_sample_;
  HostMemoryKind memory_;
  std::optional<Sampler> sampler_;
  std::vector<std::size_t> order_;
  std::uint64_t epoch_ = 0;
  std::int64_t next_ = 0;
};

// ---- the real data pipeline -------------------------------------------------

struct PipelineSourceOptions {
  int rank = 0;
  // Evict the files this rank reads in an epoch from the page cache before it
  // (pipeline/io.h: what that can and cannot do).
  bool cold = false;
  // Host spans of worker reads/decodes, when the timeline traces.
  Timeline* trace = nullptr;
  // The reads are real but take no emulated time: a batch is ready when
  // next() returns (DLIO under the virtual clock: real files, emulated time
  // from the step program and the modelled storage only). Allowed on either
  // clock; without it the loader's wall time is the batch's time (real clock only).
  bool untimed = false;
};

class PipelineSource : public BatchSource {
 public:
  // Takes the loader's options as given (rank/world_size included). Real
  // clock only: InputError under a virtual clock.
  PipelineSource(Clock& clock, Dataset dataset, LoaderOptions options, PipelineSourceOptions source = {});
  ~PipelineSource() override;
  void begin_epoch(std::uint64_t epoch) override;
  std::optional<LoadedBatch> next(const SleepFn& sleep_until) override;
  std::size_t batches_per_epoch() const override;
  std::size_t samples_per_epoch() const override;
  std::string describe() const override;
  LoaderStats stats() const override { return loader_->stats(); }
  DataLoader& loader() { return *loader_; }

 private:
  Time to_clock(Time loader_ns) const;
  Clock& clock_;
  PipelineSourceOptions source_;
  std::unique_ptr<DataLoader> loader_;
  Duration offset_ = 0;   // emulation clock time = loader time + offset_
  Time engine_free_ = 0;  // GPU decode on a JPEG engine: when it finishes its last batch
};

}  // namespace gpemu::pipeline
