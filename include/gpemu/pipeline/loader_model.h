// A modelled data loader: DataLoader's semantics (sampler and
// sharding, batches dealt round-robin to workers, prefetch_factor batches in
// flight per worker, in-order delivery) with modelled per-sample costs instead
// of real reads and decodes, so data stalls are exact and deterministic under
// the virtual clock. docs/train.md describes the model; in short:
//
//   cost(sample) = read_per_sample + bytes / read_bytes_per_s
//                + (decode_per_sample + bytes * decode_ns_per_byte)   [JPEG samples that are decoded]
//                + decode_per_sample                                  [raw RGB samples that are decoded]
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

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/pipeline/batch_source.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/distributed_cache.h"
#include "gpemu/pipeline/io.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/pipeline/loader_cache.h"
#include "gpemu/pipeline/loader_scaling.h"
#include "gpemu/pipeline/sampler.h"
#include "gpemu/pipeline/storage_model.h"
#include "gpemu/pipeline/transform.h"
#include "gpemu/prep_service.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu::pipeline {

// The CPU cores of one machine that several jobs' modelled loaders share.
// Thread-safe.
struct CpuPool {
  explicit CpuPool(int cores) : cores(cores) {}
  const int cores;
  std::atomic<int> threads{0};
  double share() const { return std::max(1.0, static_cast<double>(threads.load()) / std::max(1, cores)); }
};

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
  // How the machine's loader scales with its workers, measured
  // (loader_scaling.h): each worker's CPU costs are divided by the
  // efficiency at the workers busy (the loader threads on the machine, at
  // most its cores). Null: linear (every worker as fast as one alone).
  std::shared_ptr<const LoaderScaling> scaling;
  // Loaders that come and go on one machine (jobs sharing a node): each
  // loader adds its threads to the pool while it exists, and a batch's CPU
  // costs are scaled by max(1, the pool's threads / its cores) when the
  // batch is costed. Overrides cores and loader_threads. Null: none.
  std::shared_ptr<CpuPool> cpu_pool;
  // Where reads come from. Without a storage device every read costs the
  // page-cache read above (the dataset is in memory). With one, a read that
  // misses the loader cache and the page cache costs read_per_sample of CPU,
  // then waits for the device (StorageServer, shared by this loader's
  // workers; shared_by() its ranks).
  std::optional<StorageDevice> storage;
  // A device other jobs' loaders read too (a session's node disk or shared
  // store: storage_model.h, StorageShare): this job's tenancy of it, and
  // `storage` is then served at shared_by(storage, its ranks sharing it x
  // the tenants), the count read as each request is served. Null: the
  // device is this job's alone.
  std::shared_ptr<const StorageTenancy> storage_tenancy;
  // The page cache in front of the storage (LRU of samples), bytes; it lasts
  // across epochs unless page_cache_cold, which drops it before each.
  std::uint64_t page_cache_bytes = UINT64_MAX;
  bool page_cache_cold = false;
  // The loader cache (LoaderCache's policies), bytes; a hit costs a memory
  // copy at read_bytes_per_s. 0: none.
  std::uint64_t cache_bytes = 0;
  CachePolicy cache_policy = CachePolicy::Minio;
  // Loaders of a job's ranks each model their own page cache and loader
  // cache of an even share of these capacities, and their share of the
  // storage (shared_by): set by the job to the ranks of a node (world_size
  // on one node).
  int ranks_sharing = 1;
  // GPU decode's model (gpu_decode.cpp): taken from LoaderOptions::gpu_decode
  // by the modelled loader; model_sample_cost reads it.
  std::optional<GpuDecodeModel> gpu_decode;

  // DLIO's modelled loading. With either of these set, each batch is an
  // operation on the loader's timeline (the ModelledLoader's `trace`
  // argument, then required), issued when the batch is dispatched and on its
  // worker's lane after the batch before it: its samples' preprocessing,
  // drawn from `preprocess` (reader.preprocess_time, seeded by
  // preprocess_seed; a sleep in DLIO's loader, so not scaled by the CPU
  // share), then its bytes over storage_link, which the loaders of several
  // ranks share max-min (storage_bytes_per_s). The costs above still add to
  // the draws (DLIO gives them 0).
  std::optional<TimeSpec> preprocess;
  std::uint64_t preprocess_seed = 0;
  const Link* storage_link = nullptr;
  std::uint64_t link_bytes_per_sample = 0;  // bytes a sample puts on storage_link; 0: its length
  // Batches an epoch delivers at most (a fixed-steps epoch, DLIO's); 0: all the sampler gives.
  std::size_t batches_per_epoch = 0;

  // Loaders sharing the storage device: 0, the ranks_sharing above (each
  // node has its own device); the job's world_size for one server that all
  // nodes read (shared storage, as an NFS server).
  int storage_ranks_sharing = 0;
  // This loader's storage requests in flight at most (a client's limit, as
  // LADCache's --loader-bottleneck on its io_uring reads); 0: the device's slots.
  int storage_slots = 0;
  // Several nodes: this loader's node (0-based), and the cache spanning the
  // nodes (the same object for every rank of the job); null: each node's
  // loader cache is its own.
  int node = 0;
  std::shared_ptr<DistributedCache> distributed_cache;
  // A preprocessing service (prep_service.h): remote workers run a prefix
  // of the pipeline for the batches the client does not make itself. Not
  // with a storage device, a loader cache, GPU decode or the timeline path.
  std::optional<PrepServiceOptions> prep_service;
};

// The model's figures for one sample (exposed for tests and docs).
struct SampleCost {
  Duration read = 0;
  Duration decode = 0;
};
SampleCost model_sample_cost(const Sample& sample, bool decode_images, const LoaderModelOptions& model);

// The FFCV-style loader (an FFCV-style file: Dataset::page_size > 0) under
// the virtual clock: the modelled loader over the file's records, read from
// the mapped pages (no per-sample syscall: read_per_sample 0), raw samples
// costing the crop/resize/normalise part of decoding only (decode_per_sample)
// and JPEG ones also their entropy decoding (decode_ns_per_byte x bytes),
// FFCV's quasi-random order (epoch_order), and per batch the stages after its
// JIT-compiled decode (ToDevice, ToTorchImage, Convert, NormalizeImage) at
// GPEmu's measured medians (ffcv_stage_costs.csv; on the GPU, or as
// GPEmu's emulator ran them on the CPU), scaled by batch_size / 256.
LoaderModelOptions ffcv_loader_model(LoaderModelOptions base, std::size_t batch_size, bool stages_on_cpu);
// What a job over an FFCV-style file uses: mmap reads unless another memory
// read (the process cache) was asked for, and ffcv_loader_model's costs when
// `model` is given (the virtual clock). Nothing for other datasets.
void use_ffcv_loader(const Dataset& dataset, std::size_t batch_size, LoaderOptions& options, LoaderModelOptions* model);

// GPU decode (GpuDecodeModel above): the model for a card of the catalog.
GpuDecodeModel gpu_decode_model(const GpuSpec& gpu);
// "GPU decode (DALI-style) on <card>'s JPEG engine" (or SMs), for the loaders' describe().
std::string describe(const GpuDecodeModel& m);

// One batch's GPU work: engine time, SM time (decode without an engine, then
// crop/resize/normalise) and the device memory the pipeline holds for it.
struct GpuDecodeCost {
  Duration engine = 0;
  Duration sm = 0;
  std::uint64_t device_bytes = 0;
};
GpuDecodeCost gpu_decode_cost(const GpuDecodeModel& m, const Dataset& dataset, const std::vector<std::size_t>& batch,
                              const ImageTransformOptions& transform);
// The same from a batch's summed JPEG pixels and its crop pixels (each
// image's, at most its output's): what the real loader measured.
GpuDecodeCost gpu_decode_cost(const GpuDecodeModel& m, double jpeg_pixels, double crop_pixels, std::size_t images,
                              const ImageTransformOptions& transform);

class PrepServiceModel;  // prep_service.cpp

class ModelledLoader : public BatchSource {
 public:
  // `options` as for a DataLoader (batch_size, num_workers, prefetch_factor,
  // pin_memory, shuffle, seed, rank, world_size, drop_last, transform size,
  // decode_images). Sample sizes come from the dataset; no file is read.
  // `trace`: where worker spans go (when it traces). InputError for
  // impossible options, as DataLoader.
  ModelledLoader(Clock& clock, Dataset dataset, LoaderOptions options, LoaderModelOptions model = {},
                 Timeline* trace = nullptr);
  // The same over a dataset several loaders share (not copied: a job's
  // ranks hold one copy of a large dataset's sample list), delivering the
  // batches of `inner` (a real loader's or in-memory ones: their data), each
  // once `inner` has it and its modelled work has ended (DLIO's modelled
  // loading, which reads for real and models the time). Without `inner` the
  // loader makes its batches itself, as above. `dataset` is not null.
  ModelledLoader(Clock& clock, std::shared_ptr<const Dataset> dataset, LoaderOptions options,
                 LoaderModelOptions model = {}, Timeline* trace = nullptr,
                 std::unique_ptr<BatchSource> inner = nullptr);
  ~ModelledLoader() override;  // its threads leave the CPU pool
  ModelledLoader(const ModelledLoader&) = delete;
  ModelledLoader& operator=(const ModelledLoader&) = delete;

  void begin_epoch(std::uint64_t epoch) override;
  std::optional<LoadedBatch> next(const SleepFn& sleep_until) override;
  std::size_t batches_per_epoch() const override;
  std::size_t samples_per_epoch() const override;
  std::string describe() const override;

  // The CPU share factor in effect now (>= 1).
  double share() const { return model_.cpu_pool ? model_.cpu_pool->share() : share_; }
  // The measured per-worker efficiency in effect now (LoaderModelOptions::scaling; 1 without).
  double efficiency() const;
  const Sampler& sampler() const { return sampler_; }
  LoaderStats stats() const override;

 private:
  Time finish_of(std::size_t i);
  // With a storage device or a loader cache: workers' sample reads simulated
  // in time order (the storage queue and the caches see them as they happen).
  bool simulated() const { return storage_ != nullptr || admission_.capacity > 0; }
  // io_uring reads or superbatches with a storage device: a worker submits
  // whole batches' reads at once.
  bool submits_batches() const {
    return storage_ != nullptr && (options_.read_method == ReadMethod::IoUring || options_.superbatch > 1);
  }
  Time simulate_until_finished(std::size_t i);
  // The timeline path (LoaderModelOptions::preprocess, storage_link).
  bool on_timeline() const { return model_.preprocess.has_value() || model_.storage_link != nullptr; }
  void issue(std::size_t i);
  struct WorkerState;
  Duration sample_step(WorkerState& ws, Time& t);
  void submit_reads(WorkerState& ws, Time t);
  Duration scaled(Duration d) const;
  // The storage device as this loader's share of it, among `tenants` jobs.
  StorageDevice storage_device(int tenants) const;
  // A request to the storage device, at this loader's share of it now.
  Time serve_storage(Time arrival, std::uint64_t bytes);

  Clock& clock_;
  std::shared_ptr<const Dataset> data_;
  const Dataset& dataset_;  // *data_
  LoaderOptions options_;
  LoaderModelOptions model_;
  Timeline* trace_;
  Sampler sampler_;
  double share_ = 1.0;
  int busy_ = 1;  // loader threads busy at once without a CPU pool: min(threads, cores)
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
  Time gpu_free_ = 0;  // GPU decode: when the GPU stage finishes the batch before

  // The simulated path: per worker, the batch it works on (or none), the
  // next sample in it and when its next read starts; the next batch it takes.
  struct WorkerState {
    std::size_t batch = SIZE_MAX;
    std::size_t pos = 0;
    std::size_t fetched_until = 0;  // batch positions before this were read by one request with an earlier one
    // Submitted batches: per position, when its bytes are in memory; -1: a
    // cache or page-cache hit, read at its turn.
    std::map<std::size_t, std::vector<Time>> ready;
    Time t = 0;
    Time started = 0;
    Duration read = 0, decode = 0;
    std::size_t next_batch = 0;
  };
  std::vector<WorkerState> workers_;
  std::unique_ptr<StorageServer> storage_;
  int storage_tenants_ = 1;  // the tenants storage_ is shared among (storage_tenancy)
  std::unique_ptr<PageCacheModel> page_cache_;
  std::unique_ptr<StorageServer> fetch_;  // remote hits of a distributed cache
  CacheAdmission admission_;
  std::vector<bool> cached_;  // per dataset sample: in the loader cache
  std::uint64_t cache_used_ = 0;
  Time consumer_dispatch_ = -1;  // num_workers == 0: when next() asked for the batch
  LoaderStats stats_;
  std::unique_ptr<BatchSource> inner_;
  // The timeline path: per batch its operation (once issued); per worker
  // lane its last one.
  std::optional<TimeSampler> preprocess_;
  std::vector<Completion> issued_, lanes_;
  std::vector<bool> is_issued_;
  LoaderStats::Epoch epoch_base_;  // the cumulative figures when the epoch began
  LoaderStats::Epoch cumulative() const;
  LoaderStats::Epoch open_epoch() const;  // the current epoch's figures so far
  // The node whose cache holds sample idx (this one's: a local hit); -1: none.
  int holder_of(std::size_t idx) const;
  std::unique_ptr<PrepServiceModel> prep_;  // a preprocessing service's remote workers and network
};

}  // namespace gpemu::pipeline
