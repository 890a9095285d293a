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

#include "gpemu/host_memory.h"
#include "gpemu/pipeline/dataset.h"
#include "gpemu/pipeline/io.h"
#include "gpemu/pipeline/loader_cache.h"
#include "gpemu/pipeline/sampler.h"
#include "gpemu/pipeline/staging.h"
#include "gpemu/pipeline/transform.h"
#include "gpemu/time.h"

namespace gpemu::pipeline {

enum class OnError { Skip, Stop };

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
  std::uint64_t cache_bytes = 0;       // loader cache capacity; 0: no cache
  std::shared_ptr<LoaderCache> cache;  // a cache to share; overrides cache_bytes
};

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
  BatchTiming timing;

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
