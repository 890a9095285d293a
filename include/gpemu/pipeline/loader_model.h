// A modelled data loader: DataLoader's semantics (sampler and
// sharding, batches dealt round-robin to workers, prefetch_factor batches in
// flight per worker, in-order delivery) with modelled per-sample costs instead
// of real reads and decodes, so data stalls are exact and deterministic under
// the virtual clock. docs/train.md describes the model; in short:
//
//   cost(sample) = read_per_sample + bytes / read_bytes_per_s
//                + (decode_per_sample + bytes * decode_ns_per_byte)   [JPEG samples that are decoded]
//   cost(batch)  = (sum of its samples' costs + collate_per_batch) * share
//   share        = max(1, loader threads on the machine / cores)
//
// Batch i goes to worker w = i mod W. It is dispatched when the epoch begins
// (i < prefetch_factor * W) or when batch i - prefetch_factor * W is
// delivered, as PyTorch's DataLoader refills its queue; the worker starts it
// when dispatched and done with its previous batch, and finishes it `cost`
// later. next() for batch i returns at max(call time, finish of batch i).
// With num_workers = 0 the batch is loaded inside next(): it starts when next()
// is called.
//
// Thread safety: one host thread, as a DataLoader's consumer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpemu/pipeline/batch_source.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/pipeline/sampler.h"

namespace gpemu::pipeline {

struct LoaderModelOptions {
  // Per sample: open + pread from the page cache (syscalls, lookups).
  Duration read_per_sample = 60 * kMicrosecond;
  // Copy rate of a read; 0: instantaneous.
  double read_bytes_per_s = 2.0e9;
  // Per decoded JPEG: RandomResizedCrop resize + flip + normalize into the
  // batch (fixed output size) ...
  Duration decode_per_sample = 800 * kMicrosecond;
  // ... plus entropy decoding, proportional to the file size.
  double decode_ns_per_byte = 15.0;
  Duration collate_per_batch = 0;
  // CPU cores the loader threads of all ranks share; 0: this machine's.
  int cores = 0;
  // Loader threads on the machine: set to world_size * max(1, num_workers)
  // by the caller when several loaders run at once; 0: this loader's own.
  int loader_threads = 0;
};

// The model's figures for one sample (exposed for tests and docs).
struct SampleCost {
  Duration read = 0;
  Duration decode = 0;
};
SampleCost model_sample_cost(const Sample& sample, bool decode_images, const LoaderModelOptions& model);

class ModelledLoader : public BatchSource {
 public:
  // `options` as for a DataLoader (batch_size, num_workers, prefetch_factor,
  // pin_memory, shuffle, seed, rank, world_size, drop_last, transform size,
  // decode_images). Sample sizes come from the dataset; no file is read.
  // `trace`: where worker spans go (when it traces). InputError for
  // impossible options, as DataLoader.
  ModelledLoader(Clock& clock, Dataset dataset, LoaderOptions options, LoaderModelOptions model = {},
                 Timeline* trace = nullptr);

  void begin_epoch(std::uint64_t epoch) override;
  std::optional<LoadedBatch> next(const SleepFn& sleep_until) override;
  std::size_t batches_per_epoch() const override;
  std::size_t samples_per_epoch() const override;
  std::string describe() const override;

  // The CPU share factor in effect (>= 1).
  double share() const { return share_; }
  const Sampler& sampler() const { return sampler_; }

 private:
  Time finish_of(std::size_t i);

  Clock& clock_;
  Dataset dataset_;
  LoaderOptions options_;
  LoaderModelOptions model_;
  Timeline* trace_;
  Sampler sampler_;
  double share_ = 1.0;
  std::uint64_t output_bytes_per_image_ = 0;

  // Current epoch.
  std::uint64_t epoch_ = 0;
  bool begun_ = false;
  Time epoch_start_ = 0;
  std::vector<std::vector<std::size_t>> batches_;  // dataset indices per batch
  std::vector<Time> finish_;                       // per batch, once computed
  std::vector<Time> delivered_;                    // per batch, once delivered
  std::vector<Duration> read_, decode_;
  std::vector<Time> worker_free_;
  std::size_t next_ = 0;
};

}  // namespace gpemu::pipeline
