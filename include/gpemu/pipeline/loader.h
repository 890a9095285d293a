// DataLoader: real data loading with the semantics of torch.utils.data's
// map-style DataLoader, on threads instead of processes.
//
//   auto ds = open_image_folder("/data/imagenet/train");
//   LoaderOptions o;  o.batch_size = 256;  o.num_workers = 8;  o.shuffle = true;
//   DataLoader loader(std::move(ds), o);
//   for (std::uint64_t epoch = 0; epoch < 90; ++epoch) {
//     loader.begin_epoch(epoch);                   // like sampler.set_epoch + iter(loader)
//     while (auto batch = loader.next()) { ... }  // nullopt at the end of the epoch
//   }
//
// Workers: the sampler's indices for the epoch are cut into batches; batch i
// goes to worker i % num_workers; at most prefetch_factor * num_workers
// batches are in flight; next() hands them out in sampler order, whatever
// order workers finish in. A worker reads each sample (pread, optionally
// O_DIRECT, through the loader cache; with read_method = IoUring it reads all
// of the batch's cache misses at once first), decodes JPEGs at reduced DCT
// scale, applies RandomResizedCrop + flip + normalize, and collates the batch
// into a staging buffer (pinned when pin_memory). Byte records are read and
// copied.
// num_workers == 0 loads in the calling thread inside next().
//
// Errors: a sample that cannot be read or decoded is, with OnError::Skip,
// dropped and counted (the batch is shorter; a batch that loses every sample
// is not delivered at all); with OnError::Stop, next() throws InputError
// naming the sample's path when that batch's turn comes, and the epoch ends.
//
// Thread safety: one consumer thread calls begin_epoch/next; stats() may be
// called from any thread. The destructor stops workers after the sample each
// is on and joins them, also mid-epoch.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpemu/device/host_memory.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/io.h"
#include "gpemu/pipeline/jpeg.h"
#include "gpemu/pipeline/loader_cache.h"
#include "gpemu/pipeline/sampler.h"
#include "gpemu/pipeline/staging.h"
#include "gpemu/pipeline/transform.h"
#include "gpemu/time.h"

namespace gpemu::pipeline {

class RealDistributedCache;

enum class OnError { Skip, Stop };

// ---- GPU decode (DALI-style mixed pipeline) ----
//
// DALI's `fn.decoders.image_random_crop(device="mixed")` + `fn.resize` +
// `fn.crop_mirror_normalize` on the GPU: the host reads and parses each JPEG;
// a card with a JPEG engine (NVJPG: A100, H100) decodes on it, others decode
// with CUDA on the SMs after the host threads entropy-decode (nvJPEG's hybrid
// backend, DALI's choice for images under 1 Mpixel); crop, resize and
// normalisation run on the SMs; the decoded batch stays on the device. Costs
// and sources: docs/pipeline.md, "GPU decode (DALI-style)".

// Pixels of an ImageNet-like JPEG per byte of file: about 110 KB for 500 x 375
// (docs/pipeline.md, "Generators"); the rule the virtual datasets' layouts use.
inline constexpr double kImageNetPixelsPerJpegByte = 500.0 * 375.0 / 110e3;

struct GpuDecodeModel {
  std::string gpu;                 // the card's id
  bool engine = false;             // decoded by its JPEG engine (else CUDA on the SMs)
  double engine_ns_per_pixel = 0;  // engine time per decoded pixel
  double sm_ns_per_pixel = 0;      // CUDA decode (dequantise, IDCT, colour) per pixel on the SMs
  double memory_bytes_per_s = 0;   // crop, resize and normalise move their bytes at the card's bandwidth
  int queue_depth = 2;             // decoded batches held on the device (DALI's prefetch_queue_depth)
};
struct LoaderOptions {
  std::size_t batch_size = 1;
  int num_workers = 0;      // 0: load in the consumer's thread
  int prefetch_factor = 2;  // batches in flight per worker
  bool pin_memory = false;  // collate into page-locked staging buffers
  PinMode pin_mode = PinMode::Lock;
  bool persistent_workers = false;  // keep worker threads between epochs
  bool drop_last = false;           // drop the last, incomplete batch
  bool shuffle = false;
  std::uint64_t seed = 0;  // shuffle order and augmentations
  int rank = 0;            // distributed sharding (see sampler.h)
  int world_size = 1;
  bool drop_uneven_shards = false;  // DistributedSampler's drop_last
  bool decode_images = true;        // false: JPEG samples are delivered as bytes
  ImageTransformOptions transform;  // output image size and augmentation
  // How much of each JPEG is checked for damage: Truncation (decode stops
  // after the crop; truncated files are still errors, as in PIL) or Full
  // (every row entropy-decoded; corrupt data anywhere is an error). See jpeg.h.
  JpegValidation jpeg_validation = JpegValidation::Truncation;
  OnError on_error = OnError::Stop;
  bool direct_io = false;  // O_DIRECT reads, falling back when refused
  // Pread: one pread(2) per sample, then its decode (default). IoUring: a
  // worker submits the reads of all of its batch's cache misses at once
  // (io_uring_reader.h), waits for them, then decodes; InputError at
  // construction when io_uring is unavailable (built without liburing, or
  // refused by the kernel or a sandbox). Combines with direct_io.
  ReadMethod read_method = ReadMethod::Pread;
  // Superbatches (GPEmu's async loader): with IoUring, a worker that starts
  // the first of k of its batches submits the reads of all k at once and
  // keeps the later ones' bytes (a copy, up to k batches of raw bytes per
  // worker) until it builds them. 1: a batch's reads only. Needs IoUring
  // (InputError otherwise); the modelled loader submits them to its storage
  // model the same way.
  std::size_t superbatch = 1;
  // Samples per file of a grouped dataset: the sampler shuffles and shards
  // groups (sampler.h); 1: samples.
  std::size_t group_size = 1;
  std::uint64_t cache_bytes = 0;                  // loader cache capacity; 0: no cache
  CachePolicy cache_policy = CachePolicy::Minio;  // its admission (with cache_bytes)
  std::shared_ptr<LoaderCache> cache;             // a cache to share; overrides cache_bytes and cache_policy
  // One node of several processes (real nodes): the distributed cache the
  // nodes' loader caches make (real_distributed_cache.h). A sample this
  // node's cache misses that another node's holds is read from that node
  // over the network (a remote hit) instead of storage, then decoded as
  // usual; with LocalityAware each rank visits its epoch-0 shard every epoch
  // (locality_aware_order). The per-epoch figures (LoaderStats::epochs) are
  // kept. Needs `cache` (the node's).
  std::shared_ptr<RealDistributedCache> distributed_cache;
  // JPEGs decoded on the GPU as DALI's mixed pipeline does (GpuDecodeModel):
  // the workers read each image and parse it (entropy-decode it too without a
  // JPEG engine) and deliver its bytes; the batch's GPU work is the emulated
  // GPU's (LoadedBatch::gpu_decode). Both loaders. Unset: decoded by the workers.
  std::optional<GpuDecodeModel> gpu_decode;
};

// The sampler options of a loader's options (shuffle, seed, rank, world
// size, uneven shards, groups).
SamplerOptions sampler_options(const LoaderOptions& o);
// The dataset indices a loader visits in an epoch, in order: the sampler's,
// or for a shuffled FFCV-style file (page_size > 0) FFCV's quasi-random
// order over them (quasi_random_order, windows of a batch). Both loaders use it.
std::vector<std::size_t> epoch_order(const Sampler& sampler, const Dataset& dataset, const LoaderOptions& o,
                                     std::uint64_t epoch);

struct SampleError {
  std::size_t index;  // dataset index
  std::string path;
  std::string message;
};

// Times are steady-clock nanoseconds; points are measured from the loader's
// origin() (its construction). read/decode/collate are summed over the batch.
struct BatchTiming {
  Duration read_ns = 0;     // reading bytes (including cache lookups)
  Duration decode_ns = 0;   // JPEG decode + crop/resize/flip/normalize
  Duration collate_ns = 0;  // staging buffer acquisition + copy into it
  Time started_at = 0;      // worker began the batch
  Time finished_at = 0;     // worker finished it
  Time delivered_at = 0;    // next() returned it
  Duration wait_ns = 0;     // how long next() blocked for it (data stall)
};

enum class BatchLayout {
  Images,  // float32, shape {n, 3, height, width}
  Bytes,   // uint8; shape {n, record_length} when all records have one length, else {total}
};

class Batch {
 public:
  std::uint64_t epoch = 0;
  std::size_t index = 0;  // position in the epoch's batch sequence
  int worker = -1;        // -1: loaded in the consumer's thread
  BatchLayout layout = BatchLayout::Images;
  std::vector<std::int64_t> shape;
  std::vector<std::size_t> sample_indices;  // dataset indices, in batch order
  std::vector<std::int64_t> labels;
  std::vector<std::size_t> byte_offsets;  // Bytes: sample i is [off[i], off[i+1])
  std::vector<SampleError> skipped;       // OnError::Skip: samples dropped
  std::uint64_t bytes_read = 0;           // from files (cache hits excluded)
  std::size_t cache_hits = 0;
  std::size_t cache_misses = 0;
  // With LoaderOptions::distributed_cache: samples read from files, and those
  // read from another node's cache with the bytes that crossed the network.
  std::size_t storage_reads = 0;
  std::size_t remote_hits = 0;
  std::uint64_t network_bytes = 0;
  BatchTiming timing;
  // GPU decode (LoaderOptions::gpu_decode): the batch's JPEG pixels and crop
  // pixels (each image's, at most the output's), from their headers.
  double gpu_jpeg_pixels = 0, gpu_crop_pixels = 0;

  std::size_t size() const { return sample_indices.size(); }
  std::span<const float> images() const;     // empty unless layout == Images
  std::span<const std::byte> bytes() const;  // the whole buffer
  const std::byte* data() const { return buffer_.data(); }
  std::size_t data_bytes() const { return buffer_.size(); }
  bool pinned() const { return buffer_.kind() == HostMemoryKind::Pinned; }
  const StagingBuffer& buffer() const { return buffer_; }

 private:
  friend class DataLoader;
  StagingBuffer buffer_;
};

struct LoaderStats {
  std::uint64_t batches = 0;  // delivered
  std::uint64_t samples = 0;  // delivered
  std::uint64_t skipped = 0;  // dropped by OnError::Skip
  std::uint64_t bytes_read = 0;
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  std::uint64_t cache_resident_bytes = 0;  // in the loader cache, at the time of asking
  // The modelled loader with a storage model: the page cache in front of the
  // storage, and what the storage served.
  std::uint64_t page_cache_hits = 0;
  std::uint64_t page_cache_misses = 0;
  std::uint64_t page_cache_resident_bytes = 0;
  std::uint64_t storage_requests = 0;
  std::uint64_t storage_bytes = 0;
  // A distributed cache (the modelled loader's over modelled nodes, the real
  // loader's over real ones): samples read from another node's cache, and
  // the bytes that crossed the network.
  std::uint64_t remote_hits = 0;
  std::uint64_t network_bytes = 0;
  // The modelled loader, and the real one with a distributed cache: the same
  // figures per epoch, in epoch order (the real loader's storage requests are
  // the samples it read from files, one request each).
  struct Epoch {
    std::uint64_t epoch = 0;
    std::uint64_t cache_hits = 0, remote_hits = 0, storage_requests = 0, storage_bytes = 0, network_bytes = 0;
  };
  std::vector<Epoch> epochs;
  std::uint64_t out_of_order = 0;  // batches finished before an earlier one
  std::uint64_t staging_allocations = 0;
  std::uint64_t staging_reuses = 0;
  bool direct_io_active = false;
  std::vector<std::string> notes;  // e.g. O_DIRECT fallback
};

class DataLoader {
 public:
  // InputError for impossible options or a dataset mixing JPEG and byte
  // samples while decode_images is set.
  DataLoader(Dataset dataset, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts (or restarts) an epoch; abandons what is left of the current one.
  // Prefetching starts here.
  void begin_epoch(std::uint64_t epoch);
  // The next batch in sampler order; nullopt when the epoch is done. Begins
  // epoch 0 when no epoch was begun.
  std::optional<Batch> next();

  std::size_t batches_per_epoch() const;
  const Dataset& dataset() const;
  const Sampler& sampler() const;
  const LoaderOptions& options() const;
  LoaderStats stats() const;
  std::shared_ptr<LoaderCache> cache() const;
  std::chrono::steady_clock::time_point origin() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpemu::pipeline
