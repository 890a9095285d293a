// The data pipeline: datasets, the real data loader (I/O, JPEG decoding, transforms,
// staging, its cache), the modelled loader, and the batch sources a job draws from.
//
// Sections: dataset, io, sampler, loader cache, storage model, staging, jpeg, transform, generator, loader, batch
// source, distributed cache, loader model.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpemu/clock.h"
#include "gpemu/device.h"
#include "gpemu/error.h"
#include "gpemu/prep_service.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

// ==== dataset ====
//
// Datasets of real files. A Dataset is a list of Samples, each a byte range
// of a file (a whole JPEG, or one fixed-length record inside a .npy/.npz/raw
// file) with an optional label. Opening a dataset lists and stats files (it
// reads the headers of npy/npz files) but reads no sample data; the loader
// does that (loader.h).
//
// Layouts:
//  - ImageFolder (torchvision): root/<class>/.../<image>.jpg; class index =
//    position of the class folder in sorted (byte-wise) order; images sorted by
//    path within a class. Only .jpg/.jpeg files (any case) are samples; other
//    files are counted in ignored_files.
//  - DLIO-style generated files: a folder of .npy, .npz, raw binary or JPEG
//    files. npy/npz files hold an array whose first axis is the sample axis
//    (C order), so each sample is one contiguous record; raw files are
//    concatenated records of a fixed record_length; a JPEG file is one sample.
//  - File list: a text file, one sample per line: `path` or `path<TAB or
//    spaces>label`; relative paths are relative to the list file's folder;
//    blank lines and lines starting with '#' are skipped. .jpg/.jpeg files are
//    images, anything else is read as one byte record of the whole file.
//
// Errors (missing folder, empty dataset, malformed header, a listed file that
// does not exist) are InputError naming the path. Thread safety: a Dataset is
// a value; const access from many threads is safe.

namespace gpemu::pipeline {

enum class SampleFormat {
  Jpeg,    // decoded and transformed into a float tensor by the loader
  Bytes,   // delivered as raw bytes; costs its read, no decode
  RawRgb,  // 8-bit RGB pixels, width x height x 3 (an FFCV-style file's raw samples): cropped and transformed as a JPEG
};

// Whether the loader decodes and transforms a sample of this format into an image.
inline bool is_image(SampleFormat f) { return f != SampleFormat::Bytes; }

struct Sample {
  std::string path;
  std::uint64_t offset = 0;  // first byte of the sample in the file
  std::uint64_t length = 0;  // bytes; for whole-file samples, the size when the dataset was opened
  std::int64_t label = -1;   // -1: no label
  SampleFormat format = SampleFormat::Bytes;
  std::uint32_t width = 0, height = 0;  // RawRgb: its pixels
};

struct Dataset {
  std::string root;  // folder or list file it was opened from
  std::vector<Sample> samples;
  std::vector<std::string> classes;  // ImageFolder: class names, index = label
  std::size_t ignored_files = 0;     // files skipped because of their extension
  // Samples per file of a grouped dataset (open_grouped_dataset, grouped()):
  // samples i*k .. i*k + k - 1 are one file, in order; 1 otherwise.
  std::size_t group_size = 1;
  // An FFCV-style file (open_ffcv_file): its page size; 0 otherwise.
  std::uint64_t page_size = 0;

  std::size_t size() const { return samples.size(); }
  // The distinct files behind the samples, in first-use order.
  std::vector<std::string> files() const;
  // Sum of sample lengths.
  std::uint64_t total_bytes() const;
};

// A folder holding this file is a dataset whose generation did not finish
// (synthesize_image_folder, generator.h); open_image_folder refuses it.
inline constexpr const char* kIncompleteDatasetMarker = ".gpemu-incomplete";

Dataset open_image_folder(const std::filesystem::path& root);

enum class DlioFormat { Npy, Npz, Raw, Jpeg, Tfrecord };
std::string_view to_string(DlioFormat f);
// Accepts "npy", "npz", "raw" (also "bin"), "jpeg" (also "jpg"); InputError otherwise.
DlioFormat parse_dlio_format(std::string_view name);

struct DlioOptions {
  DlioFormat format = DlioFormat::Npz;
  // Bytes per sample. Required for Raw; for Npy/Npz it is read from the array
  // header and, when non-zero here, must match it.
  std::uint64_t record_length = 0;
  // File name suffix to pick up; empty means .npy / .npz / .bin / .jpg+.jpeg /
  // .tfrecord. A TFRecord file's samples are its framed records (what
  // TensorFlow's reader reads), the framing checked when the folder is opened.
  std::string extension;
  // Name of the sample array inside an .npz file (DLIO writes "x"); a file
  // without it is an InputError. An int array "y" of one value per sample,
  // when present, gives the labels.
  std::string npz_key = "x";
};

// Files are taken from `dir` only (not its subfolders), sorted by name.
Dataset open_dlio_dataset(const std::filesystem::path& dir, const DlioOptions& options);

Dataset open_file_list(const std::filesystem::path& list_file);

// Grouped datasets (GPEmu's file grouping): `gpemu dataset group` packs a
// dataset's samples `group_size` to a file, so a loader reads a file's
// samples with one seek. The folder holds group-NNNNNNNN.bin files (the
// samples' bytes back to back) and index.tsv: a first line
// "# gpemu grouped dataset: <k> samples per file", then one line per sample,
// "<file>\t<offset>\t<length>\t<label>\t<jpeg|bytes>", in group order.
// `order` "random" (seeded) packs a random mix of samples into each file (what
// GPEmu's accuracy runs found harmless); "sequential" keeps the dataset's order
// (an ImageFolder's is by class, which cost accuracy there).
struct GroupedDatasetSummary {
  std::size_t samples = 0;
  std::size_t files = 0;
  std::uint64_t total_bytes = 0;
};
// `out` must be missing or empty (InputError otherwise); on an error or an
// interruption everything it created is removed, and while it runs the folder
// holds kIncompleteDatasetMarker.
GroupedDatasetSummary write_grouped_dataset(const Dataset& dataset, const std::filesystem::path& out,
                                            std::size_t group_size, std::string_view order, std::uint64_t seed);
// Whether `dir` holds a grouped dataset's index.
bool is_grouped_dataset(const std::filesystem::path& dir);
// Opens one, checking every line (fields, a plain file name in the folder,
// the byte range inside the file, whole groups in order); InputError naming
// the file and line otherwise.
Dataset open_grouped_dataset(const std::filesystem::path& dir);
// What --data names: an FFCV-style file (open_ffcv_file), a grouped dataset, else an ImageFolder.
Dataset open_dataset_folder(const std::filesystem::path& dir);

// The dataset with its samples packed `group_size` to a file, in order
// (sample i into group i / group_size at the running offset), for datasets
// described by sizes (a virtual dataset, whose files become "virtual:<name>/
// group-<g>"): the layout `gpemu dataset group` writes, without writing it.
// InputError for a group size of 0.
Dataset grouped(const Dataset& dataset, std::size_t group_size);

// Datasets described by their sizes, without files: for the modelled loader
// (virtual clock) at an original experiment's scale, which no test machine
// has the disk for. `spec` is a preset or "sizes=FILE":
//  - "imagenet1k": ILSVRC-2012's training set, 1,281,167 JPEG files in 1,000
//    classes;
//  - "imagenette10g": GPEmu's Imagenette-10G, 87,473 JPEG files in 10
//    classes (Imagenette copied up to about 10 GB);
//  - "imagenette": Imagenette's training split (full size), 9,469 JPEG files
//    in 10 classes;
//  - "ffcv:<any of these>": that dataset's FFCV-style layout (ffcv_layout with
//    FfcvWriteOptions' defaults, write_imagenet.sh 500 0.50 90), which the
//    modelled loader reads as the FFCV-style loader;
//  - "sizes=FILE": one sample size in bytes per line (blank lines and lines
//    starting with '#' skipped), 1 byte to 1 TiB each, at most 20,000,000
//    samples and a file of at most 1 GiB; one class.
// The presets' file sizes follow ImageNet's file-size distribution (GPEmu's
// measurement, docs/pipeline.md "Datasets"): the dataset's i-th smallest file is that
// distribution's (i + 0.5)/n quantile, and a seeded permutation spreads the
// sizes over the samples. Samples are JPEG, labels round-robin over the
// classes, paths "virtual:<name>/<index>" that no file backs (the real
// loader cannot read them). InputError naming the spec, or the file and
// line, for anything else.
Dataset virtual_dataset(std::string_view spec, std::uint64_t seed = 0);
// The sizes of a "sizes=FILE" text, `name` naming it in errors.
std::vector<std::uint64_t> parse_sample_sizes(std::string_view text, const std::string& name);

// FFCV-style files (`gpemu dataset ffcv`; docs/pipeline.md "FFCV-style files"):
// a whole image dataset in one file, as FFCV's .beton holds it. Each image is
// scaled down so its longer side is at most max_resolution pixels (area
// averaging) and stored, by a seeded coin of probability jpeg_share, as a JPEG
// of jpeg_quality or as raw RGB pixels (FFCV's RGBImageField in 'proportion'
// mode: `write_imagenet.sh 500 0.50 90` is 500, 0.5, 90). Records are packed
// into pages of page_size bytes and never straddle a page unless larger than
// one (which then starts a page of its own, and the next record the page
// after it), so a page can be read or cached whole. Layout: a 4 KiB header
// (magic, version, figures), the pages, then the per-sample metadata table
// (offset, length, label, width, height, JPEG or raw) and an end magic.
struct FfcvWriteOptions {
  int max_resolution = 500;
  double jpeg_share = 0.5;
  int jpeg_quality = 90;
  std::uint64_t page_size = std::uint64_t{4} << 20;  // FFCV's DatasetWriter default
  std::uint64_t seed = 0;
};
struct FfcvSummary {
  std::size_t samples = 0, jpeg = 0, raw = 0;
  std::uint64_t file_bytes = 0, pages = 0;
};
// `out` must not exist (InputError otherwise); it appears whole or not at all.
FfcvSummary write_ffcv_file(const Dataset& images, const std::filesystem::path& out, const FfcvWriteOptions& options);
// Whether `path` is a file that starts with the format's magic.
bool is_ffcv_file(const std::filesystem::path& path);
// Its samples (format Jpeg or RawRgb, all in the one file) with page_size
// set; every table entry is checked (inside the data, raw lengths equal to
// width x height x 3, pages not straddled); InputError naming the file and
// entry otherwise.
Dataset open_ffcv_file(const std::filesystem::path& path);
// The same layout for a dataset described by sizes (a virtual dataset): each
// JPEG's pixels from its size at ImageNet's ~110 KB for 500x375 pixels, scaled
// to max_resolution, stored as JPEG (the size that quality gives) or raw by
// the same seeded coin, packed into pages as the writer packs them.
Dataset ffcv_layout(const Dataset& images, const FfcvWriteOptions& options);

// FFCV's QUASI_RANDOM order (ffcv.loader.OrderOption): the pages a rank
// reads are shuffled, then the samples of each window of consecutive pages
// holding at least `window` samples, so a batch touches few pages and a page
// is done with soon after it is first read (what a process cache needs).
// A pure function of (page of each sample, seed, epoch).
std::vector<std::size_t> quasi_random_order(const std::vector<std::size_t>& indices, const Dataset& dataset,
                                            std::size_t window, std::uint64_t seed, std::uint64_t epoch);

}  // namespace gpemu::pipeline

// ==== io ====
//
// Reading sample bytes from files, and controlling the page cache.
//
// FileReader reads byte ranges with pread(2), optionally with O_DIRECT
// (bypassing the page cache) into 4 KiB-aligned buffers. When a filesystem
// refuses O_DIRECT (tmpfs, some overlay and network filesystems answer
// EINVAL), the reader falls back to buffered reads for the rest of its life
// and reports it once through the note callback.
//
// Page cache: evict_from_page_cache() asks the kernel to drop the cached
// pages of files (fdatasync, then posix_fadvise(POSIX_FADV_DONTNEED)) so an
// epoch starts cold. What it can and cannot do:
//  - it drops clean, unmapped, unlocked pages of those files only; pages that
//    another process has mmapped or mlocked, or that are dirty and being
//    written back, can stay;
//  - it is advice: the kernel may keep pages, and on tmpfs/ramfs the page
//    cache *is* the storage, so nothing is dropped;
//  - it does not touch caches below the kernel (disk, RAID controller, a
//    network filesystem's server, a hypervisor's host page cache), so "cold"
//    means "not in this kernel's page cache", not "from the platter";
//  - readahead of the next epoch can refill it at any time.
// page_cache_resident_bytes() measures what is resident (mmap + mincore), so
// a cold run can be checked rather than assumed.
//
// Read methods: FileReader (pread, one sample at a time, the default) and
// IoUringReader (io_uring_reader.h: all of a batch's reads at once).
//
// Thread safety: a FileReader per thread; the free functions are thread-safe.

namespace gpemu::pipeline {

// How the loader reads sample bytes (LoaderOptions::read_method).
enum class ReadMethod {
  Pread,    // pread(2) per sample, read then decode, sample by sample (default)
  IoUring,  // io_uring: every read of a batch in flight at once, then decode
  // FFCV-style files only (their dataset has a page_size):
  Mmap,          // the file memory-mapped, the OS page cache serving it (FFCV's os_cache=True)
  ProcessCache,  // its pages read whole into the loader's memory once each (FFCV's os_cache=False)
};
std::string_view to_string(ReadMethod m);  // "pread", "io_uring", "mmap", "process_cache"
// Accepts "pread", "io_uring" (also "io-uring", "uring"), "mmap" and
// "process_cache"; InputError otherwise.
ReadMethod parse_read_method(std::string_view name);

class FileReader {
 public:
  using NoteFn = std::function<void(const std::string&)>;
  explicit FileReader(bool direct_io = false, NoteFn note = {});
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Reads exactly `length` bytes at `offset`. InputError naming the path when
  // the file cannot be opened or read or is shorter than offset + length. The
  // span points into this reader's buffer and is valid until the next read.
  std::span<const std::byte> read(const std::string& path, std::uint64_t offset, std::uint64_t length);

  // True while reads bypass the page cache (asked for and not refused).
  bool direct() const { return direct_; }

 private:
  int open_file(const std::string& path);
  void close_file();
  void fall_back(const std::string& path, int err);
  bool direct_;
  NoteFn note_;
  int fd_ = -1;
  std::string fd_path_;
  std::byte* buffer_ = nullptr;
  std::size_t capacity_ = 0;
};

struct PageCacheReport {
  std::size_t files = 0;            // files advised
  std::uint64_t bytes = 0;          // their total size
  std::vector<std::string> errors;  // "path: reason" for files that could not be opened
};

PageCacheReport evict_from_page_cache(const std::vector<std::string>& files);

// Bytes of these files currently in the page cache (multiples of the page size).
std::uint64_t page_cache_resident_bytes(const std::vector<std::string>& files);

}  // namespace gpemu::pipeline

// ==== sampler ====
//
// The order in which a loader visits samples, with torch.utils.data's
// RandomSampler/SequentialSampler and DistributedSampler semantics.
//
// Shuffle: each epoch's permutation is a pure function of (seed, epoch), the
// same on every platform (PyTorch's DistributedSampler uses seed + epoch the
// same way, with a different generator, so the permutations differ from
// PyTorch's).
//
// Sharding across world_size ranks, as DistributedSampler:
//  - drop_uneven == false (DistributedSampler's drop_last=False, the default):
//    the epoch's index list is padded to ceil(N / world_size) * world_size
//    entries by repeating its own first entries (cyclically, if the padding is
//    longer than the list), then rank r takes entries r, r + world_size, ...
//    Every rank gets the same count; every sample is visited exactly once per
//    epoch across ranks when N is divisible by world_size, otherwise the first
//    (N mod world_size ? world_size - N mod world_size : 0) entries of the
//    permutation are visited twice.
//  - drop_uneven == true: the list is cut to floor(N / world_size) *
//    world_size entries; the last N mod world_size entries of the permutation
//    are not visited that epoch.
//
// Groups (group_size k > 1, a grouped dataset: samples i*k .. i*k + k - 1 are
// one file): the permutation, padding and sharding above apply to the
// ceil(N / k) groups, and each group is expanded to its samples in file
// order, so a worker reads a group's samples one after another (GPEmu's file
// grouping). With world_size > 1 every group must be whole (N mod k == 0,
// InputError otherwise): a partial group would give ranks unequal counts.
// Thread safety: immutable after construction.

namespace gpemu::pipeline {

struct SamplerOptions {
  bool shuffle = false;
  std::uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  bool drop_uneven = false;
  std::size_t group_size = 1;
};

class Sampler {
 public:
  // InputError when world_size < 1 or rank is outside [0, world_size).
  Sampler(std::size_t dataset_size, SamplerOptions options);

  // Samples this rank visits per epoch.
  std::size_t size() const { return per_rank_; }
  // Dataset indices this rank visits in `epoch`, in visiting order.
  std::vector<std::size_t> indices(std::uint64_t epoch) const;
  const SamplerOptions& options() const { return options_; }

 private:
  std::size_t dataset_size_;
  SamplerOptions options_;
  std::size_t per_rank_;
  std::size_t items_;  // what is permuted: samples, or groups
};

}  // namespace gpemu::pipeline

// ==== loader cache ====
//
// A loader-side, in-memory cache of sample bytes, with one of two admission
// policies; neither evicts:
//  - MinIO (the DataStall paper, Mohan et al., VLDB 2021): admit items until
//    the capacity is reached, then never evict. With a random order every
//    epoch, this keeps a fixed subset of the dataset in memory and gives a
//    steady hit rate of about capacity / dataset size, instead of the
//    thrashing an LRU page cache shows when the dataset is a little larger
//    than memory.
//  - SFF, small file first (GPEmu, VLDB 2025): MinIO that admits only items
//    no larger than the largest size s such that every sample of size <= s
//    fits in the capacity together (sff_size_limit). On storage whose cost is
//    mostly per request (a disk's seek), caching many small files saves more
//    requests than caching the same bytes of large ones.
//
// Items are keyed by (path, offset). Bytes stay put once admitted, so a span
// returned by lookup() is valid for the cache's lifetime.
// Thread safety: all methods may be called from many threads.

namespace gpemu::pipeline {

enum class CachePolicy { Minio, Sff };
std::string_view to_string(CachePolicy p);  // "minio", "sff"
// Accepts "minio" and "sff"; InputError naming what is accepted otherwise.
CachePolicy parse_cache_policy(std::string_view name);

// What a cache admits: items of at most max_item_bytes while they fit.
struct CacheAdmission {
  std::uint64_t capacity = 0;
  std::uint64_t max_item_bytes = UINT64_MAX;
  CachePolicy policy = CachePolicy::Minio;
  bool admits(std::uint64_t used, std::uint64_t bytes) const {
    return bytes <= max_item_bytes && used <= capacity && bytes <= capacity - used;
  }
};

// SFF's size limit over a dataset's samples (GPEmu's rule: sort the sizes,
// take the longest prefix whose sum fits in `capacity`, the limit is its
// last size); 0 when not even the smallest sample fits.
std::uint64_t sff_size_limit(const Dataset& dataset, std::uint64_t capacity);
// The admission of a cache of `capacity` bytes under `policy` for this dataset.
CacheAdmission cache_admission(const Dataset& dataset, std::uint64_t capacity, CachePolicy policy);

class LoaderCache {
 public:
  explicit LoaderCache(std::uint64_t capacity_bytes);  // MinIO
  explicit LoaderCache(CacheAdmission admission);

  // The cached bytes, counting a hit; or nullopt, counting a miss.
  std::optional<std::span<const std::byte>> lookup(const std::string& path, std::uint64_t offset);
  // Admits a copy of data if the policy admits it in what is left of the
  // capacity and the key is not cached yet. Returns whether it was admitted.
  bool admit(const std::string& path, std::uint64_t offset, std::span<const std::byte> data);

  std::uint64_t capacity_bytes() const { return admission_.capacity; }
  const CacheAdmission& admission() const { return admission_; }
  std::uint64_t used_bytes() const { return used_.load(); }
  std::size_t entries() const;
  std::uint64_t hits() const { return hits_.load(); }
  std::uint64_t misses() const { return misses_.load(); }
  std::uint64_t rejected() const { return rejected_.load(); }  // admissions refused (no room, or too large for SFF)

 private:
  struct Entry {
    std::unique_ptr<std::byte[]> data;
    std::size_t size;
  };
  static std::string key(const std::string& path, std::uint64_t offset);

  const CacheAdmission admission_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, Entry> map_;
  std::atomic<std::uint64_t> used_{0}, hits_{0}, misses_{0}, rejected_{0};
};

}  // namespace gpemu::pipeline

// ==== storage model ====
//
// Storage as a queued server, for the modelled loader: a device serves
// `parallelism` requests at once (a disk's one head; an SSD's or NFS
// server's concurrent requests), first come first served. A request of b
// bytes that starts service at t ends at
//
//   max(t + latency + b / bytes_per_s,  channel_free + b / total_bytes_per_s)
//
// where the second term (only when total_bytes_per_s > 0) is a channel all
// requests' bytes pass one after another (a SATA link, a NIC), and
// channel_free is when it finished the previous request's bytes. A slot is
// busy until its request ends. Presets (docs/pipeline.md "Storage" gives
// every figure's source):
//   hdd:  4.4 ms + b / 108 MB/s, 1 request at a time (GPEmu's testbed HDD,
//         its measured random-read throughput per request size, fitted)
//   ssd:  90 us + b / 530 MB/s, 32 at once, 530 MB/s in all (SATA III SSD)
//   nvme: 80 us + b / 3.2 GB/s, 64 at once, 3.2 GB/s in all (PCIe 3 x4 NVMe)
//   nfs:  500 us + b / 117 MB/s, 16 at once, 117 MB/s in all (NFS over 1 GbE)
// A JSON file gives its own: {"name", "latency_us", "bandwidth_mb_s",
// "parallelism", "total_bandwidth_mb_s" (optional), "iops" (optional), "source" (optional)}.
//
// PageCacheModel is the kernel's page cache in front of it as an LRU of
// samples with a capacity in bytes (what a cgroup memory limit gave the
// original experiments).
// Thread safety: one owner each (a modelled loader).

namespace gpemu::pipeline {

struct StorageDevice {
  std::string name;
  Duration latency = 0;          // per request: seek and rotation, flash read, RPC round trip
  double bytes_per_s = 0;        // one request's transfer rate
  int parallelism = 1;           // requests in service at once
  double total_bytes_per_s = 0;  // the shared channel; 0: none
  // Requests the device (a file server's daemons, a network store) starts
  // per second in all; 0: no limit beyond the slots. A request then starts
  // no earlier than 1 / iops after the previous one started.
  double iops = 0;
  std::string source;  // where the figures come from
};

// "hdd", "ssd", "nvme", "nfs", or a JSON file (see above). InputError naming
// the spec (or the file and key) and what is accepted.
StorageDevice parse_storage(std::string_view spec);
std::vector<std::string> storage_presets();
// InputError unless latency >= 0, bandwidths > 0 (total >= 0) and finite,
// and parallelism in [1, 65536].
void validate(const StorageDevice& d);
// The device as one of `ranks` loaders that share it sees it (each gets an
// even share of its parallelism and bandwidth; fewer slots than ranks
// stretch a slot's service time): the modelled loaders of a job's ranks do
// not queue at one server together.
StorageDevice shared_by(const StorageDevice& d, int ranks);

class StorageServer {
 public:
  explicit StorageServer(StorageDevice device);  // validates it
  // A request of `bytes` that arrives at `arrival` (not earlier than the
  // previous request's arrival); returns when it ends.
  Time serve(Time arrival, std::uint64_t bytes);
  const StorageDevice& device() const { return device_; }
  std::uint64_t requests() const { return requests_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  StorageDevice device_;
  std::vector<Time> slot_free_;  // a min-heap
  Time channel_free_ = 0;
  Time request_free_ = 0;  // iops: when the next request may start
  Time last_arrival_ = 0;
  std::uint64_t requests_ = 0, bytes_ = 0;
};

class PageCacheModel {
 public:
  explicit PageCacheModel(std::uint64_t capacity_bytes);
  // Whether sample `key` of `bytes` is resident (a hit, now the most recently
  // used); a miss makes it resident, evicting the least recently used
  // samples, unless it is larger than the capacity.
  bool access(std::size_t key, std::uint64_t bytes);
  bool contains(std::size_t key) const { return where_.count(key) != 0; }  // without touching it
  void clear();
  std::uint64_t capacity_bytes() const { return capacity_; }
  std::uint64_t resident_bytes() const { return used_; }

 private:
  std::uint64_t capacity_;
  std::uint64_t used_ = 0;
  std::list<std::pair<std::size_t, std::uint64_t>> lru_;  // front: most recent
  std::unordered_map<std::size_t, std::list<std::pair<std::size_t, std::uint64_t>>::iterator> where_;
};

}  // namespace gpemu::pipeline

// ==== staging ====
//
// Recycled host buffers that batches are collated into. With pinned memory
// they are page-locked HostBuffers (host_memory.h), as PyTorch's pin_memory
// thread and caching host allocator would give, so an H2D copy from them can
// run at pinned bandwidth; locking memory is slow, so buffers go back to the
// pool when a batch is destroyed and are reused for later batches.
//
// acquire() reuses the smallest free buffer that is large enough, and
// allocates a new one only when none is; the pool keeps at most
// max_free_buffers idle buffers and frees the rest. Buffers may outlive the
// loader that made them (the pool lives until its last buffer is returned).
// Thread safety: acquire and buffer release may happen on any thread.

namespace gpemu::pipeline {

class StagingPool;

class StagingBuffer {
 public:
  StagingBuffer() = default;
  ~StagingBuffer();
  StagingBuffer(StagingBuffer&& other) noexcept;
  StagingBuffer& operator=(StagingBuffer&& other) noexcept;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  std::byte* data() const { return buffer_.data(); }
  std::size_t size() const { return size_; }  // bytes in use
  // Marks only the first `bytes` (<= capacity) as in use, e.g. after
  // samples of a batch were skipped.
  void set_size(std::size_t bytes) { size_ = bytes < buffer_.size() ? bytes : buffer_.size(); }
  std::size_t capacity() const { return buffer_.size(); }  // bytes held
  HostMemoryKind kind() const { return buffer_.kind(); }
  bool locked() const { return buffer_.locked(); }

 private:
  friend class StagingPool;
  StagingBuffer(HostBuffer buffer, std::size_t size, std::shared_ptr<StagingPool> pool)
      : buffer_(std::move(buffer)), size_(size), pool_(std::move(pool)) {}
  void release() noexcept;
  HostBuffer buffer_;
  std::size_t size_ = 0;
  std::shared_ptr<StagingPool> pool_;
};

class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  static std::shared_ptr<StagingPool> create(HostMemoryKind kind, PinMode mode, std::size_t max_free_buffers);

  // Throws ResourceError when pinned memory cannot be locked.
  StagingBuffer acquire(std::size_t bytes);

  std::uint64_t allocations() const;  // buffers ever allocated
  std::uint64_t reuses() const;       // acquisitions served from the free list
  HostMemoryKind kind() const { return kind_; }

 private:
  friend class StagingBuffer;
  StagingPool(HostMemoryKind kind, PinMode mode, std::size_t max_free_buffers)
      : kind_(kind), mode_(mode), max_free_(max_free_buffers) {}
  void give_back(HostBuffer buffer) noexcept;

  const HostMemoryKind kind_;
  const PinMode mode_;
  const std::size_t max_free_;
  mutable std::mutex mu_;
  std::vector<HostBuffer> free_;
  std::uint64_t allocations_ = 0;
  std::uint64_t reuses_ = 0;
};

}  // namespace gpemu::pipeline

// ==== jpeg ====
//
// JPEG decode and encode with libjpeg-turbo (jpeglib.h API).
//
// The decoder is built for training input pipelines: it decodes only what a
// random crop needs, at the smallest DCT scale (scale_num/8, 1 <= scale_num
// <= 8) at which the crop is still at least as large as the network input, and
// only the rows and iMCU columns around the crop (jpeg_crop_scanline,
// jpeg_skip_scanlines). How much of the rest is checked for damage is a
// JpegValidation: by default decoding stops after the crop's last row and
// only truncation below it is detected (as PIL detects it); Full
// entropy-decodes the whole file so any corrupt data is an error.
//
// Errors: libjpeg's fatal errors never abort the process; they longjmp back
// into the decoder and surface as JpegError. Warnings that mean the data is
// damaged (premature end of data, corrupt entropy data, bad Huffman codes,
// ...) are treated as errors too; harmless warnings (an unknown JFIF
// revision, extraneous bytes before a marker) are ignored.
//
// Thread safety: one JpegDecoder per thread; distinct decoders are independent.

namespace gpemu::pipeline {

class JpegError : public InputError {
 public:
  using InputError::InputError;
};

struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 0;
};

// How much of a JPEG JpegDecoder::decode_crop examines for damage. Both
// detect damage in every row they decode (the crop and everything above it,
// which sequential Huffman decoding has to go through) and a truncated file.
enum class JpegValidation {
  // Stops after the last row the crop needs. The rest of the entropy-coded
  // data is only scanned for its end-of-image marker: a file whose scan is
  // not followed by EOI (truncated, or holding unexpected markers) is then
  // decoded to the end as with Full, which reports the error libjpeg gives.
  // Corrupt entropy-coded data below the crop in a complete file is not
  // noticed; PIL does not notice it anywhere (it ignores libjpeg's
  // corrupt-data warnings and only raises on truncation).
  Truncation,
  // Entropy-decodes the whole file, so damage anywhere is an error.
  Full,
};

// A rectangle in full-resolution image pixels.
struct CropBox {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// The decoded neighbourhood of a crop: an 8-bit RGB region (rows of `stride`
// bytes, `pixel_bytes` per pixel: 3 for RGB, 4 for RGBX whose fourth byte is
// padding; decode_crop gives RGBX) and, inside it, the crop box in region
// pixel coordinates (fractional because the DCT scale is not always a
// divisor of the box). The region
// extends a few pixels beyond the box where the image allows, so a resampling
// filter sees the same neighbours as it would in the full image.
struct DecodedCrop {
  const std::uint8_t* rgb = nullptr;
  int stride = 0;
  int region_width = 0;
  int region_height = 0;
  double box_x = 0, box_y = 0, box_width = 0, box_height = 0;
  int scale_num = 8;    // decoded at scale_num/8 of full resolution
  JpegInfo info;        // full-resolution image
  int pixel_bytes = 3;  // 3: RGB, 4: RGBX
};

struct DecodedImage {
  std::vector<std::uint8_t> rgb;  // width * height * 3, row-major
  int width = 0;
  int height = 0;
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  JpegInfo read_info(std::span<const std::byte> data);

  // Reads the header, asks choose_box(width, height) for the crop, and decodes
  // it at the smallest scale at which the scaled box is >= min_width x
  // min_height (full scale when even that is smaller). The result (RGBX)
  // points into this decoder's buffers and stays valid until its next call.
  DecodedCrop decode_crop(std::span<const std::byte> data,
                          const std::function<CropBox(int width, int height)>& choose_box, int min_width,
                          int min_height, JpegValidation validation = JpegValidation::Truncation);

  // Whole image as RGB8 at scale_num/8 (1..8) of full resolution.
  DecodedImage decode(std::span<const std::byte> data, int scale_num = 8);

  // The host's part of a GPU decode (nvJPEG's hybrid backend): the header,
  // and with `entropy_decode` every DCT coefficient Huffman-decoded
  // (jpeg_read_coefficients), as the host threads do before the GPU's IDCT.
  JpegInfo host_part(std::span<const std::byte> data, bool entropy_decode);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Encodes an RGB8 image (width * height * 3 bytes) with 4:2:0 chroma
// subsampling at `quality` (1..100).
std::vector<std::byte> encode_jpeg(const std::uint8_t* rgb, int width, int height, int quality);

}  // namespace gpemu::pipeline

// ==== transform ====
//
// Image transforms of a training pipeline: torchvision's
// RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip(p) + ToTensor
// + Normalize(mean, std), producing float32 CHW tensors.
//
// Randomness is a pure function of a per-sample seed (the loader derives it
// from (loader seed, epoch, dataset index)), so augmentations do not depend on
// which worker handled a sample. Resizing is separable bilinear with
// antialiasing (a triangle filter widened by the downscale factor), which is
// what PIL's BILINEAR resize does and what torchvision applies to PIL images.

namespace gpemu::pipeline {

struct ImageTransformOptions {
  int height = 224;  // output tensor is 3 x height x width
  int width = 224;
  double scale_min = 0.08;  // fraction of the image area the crop covers
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;  // crop aspect ratio (width / height)
  double ratio_max = 4.0 / 3.0;
  double flip_probability = 0.5;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};  // ImageNet
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
};

struct Augmentation {
  CropBox box;
  bool flip = false;
};

// torchvision's RandomResizedCrop.get_params (10 attempts, then a centre crop
// with the ratio clamped) and a flip draw.
Augmentation draw_augmentation(int image_width, int image_height, const ImageTransformOptions& options,
                               std::uint64_t sample_seed);

// Resamples crop.box to options.height x options.width, flips when asked,
// and writes (v / 255 - mean) / std as float32 CHW into out
// (3 * height * width floats). One pass per output row: the vertical filter
// over the columns needed (RGBX, four float lanes), then the horizontal one
// with normalisation and flip, stored straight into the three planes.
// Accepts RGB or RGBX crops (RGB is widened to RGBX first, for tests and
// callers with their own buffers; decode_crop gives RGBX).
void resize_normalize(const DecodedCrop& crop, bool flip, const ImageTransformOptions& options, float* out);

}  // namespace gpemu::pipeline

// ==== generator ====
//
// Synthetic datasets of real files, for experiments and tests without the
// real ImageNet: an ImageFolder of real JPEGs whose sizes spread like
// ImageNet's, and DLIO-style npy / npz / raw-record / JPEG files.
// All generators are deterministic for a given seed.

namespace gpemu::pipeline {

struct ImageDatasetSummary {
  std::size_t images = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t median_bytes = 0;
  std::uint64_t p90_bytes = 0;
  std::uint64_t max_bytes = 0;
};

// Writes dir/class_NNNN/img_NNNNNNNN.JPEG, images dealt round-robin over the
// classes. Each image has a random size (log-normal around median_kb with a
// long right tail), aspect ratio, JPEG quality (70-95) and content (smooth
// gradients, shapes and texture noise, so it compresses like a photo rather
// than like noise or a flat colour); the pixel count is steered so that the
// file sizes' median lands near median_kb (ImageNet-1k's train set: ~110 KB).
ImageDatasetSummary generate_image_dataset(const std::filesystem::path& dir, int num_classes, std::size_t num_images,
                                           std::uint64_t seed, double median_kb = 110.0);

// generate_image_dataset for a folder a user named (`gpemu dataset synth`):
// `dir` must be missing or empty (InputError otherwise: a merge with older
// files would not be the dataset asked for). While it runs the folder holds
// kIncompleteDatasetMarker, so a killed run is never trained on; on an error or
// an interruption (gpemu::Interrupted) everything it created is removed.
ImageDatasetSummary synthesize_image_folder(const std::filesystem::path& dir, int num_classes, std::size_t num_images,
                                            std::uint64_t seed, double median_kb = 110.0);

struct DlioGeneratorOptions {
  DlioFormat format = DlioFormat::Npz;
  std::size_t num_files = 1;
  std::size_t samples_per_file = 1;    // must be 1 for Jpeg
  std::uint64_t record_length = 4096;  // bytes per sample; for Jpeg, the target file size
  std::uint64_t seed = 0;
  int num_classes = 10;  // labels (npz "y" array) are sample_index % num_classes
};

// Writes dir/img_<i>_of_<n>.{npy,npz,bin,jpg,tfrecord}; returns the paths. npy files
// hold a uint8 array (samples_per_file, record_length); npz files hold that as
// "x" plus int64 labels "y" (samples_per_file,); raw files hold the records
// back to back; tfrecord files hold one framed tf.train.Example per record
// (pipeline/tfrecord.h).
std::vector<std::string> generate_dlio_dataset(const std::filesystem::path& dir, const DlioGeneratorOptions& options);

// The bytes generate_dlio_dataset wrote for record `sample` of file `file`
// (npy/npz/raw), so readers can be checked.
std::vector<std::byte> dlio_record_bytes(std::uint64_t seed, std::size_t file, std::size_t sample,
                                         std::uint64_t record_length);

}  // namespace gpemu::pipeline

// ==== loader ====
//
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

namespace gpemu::pipeline {

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
  // The modelled loader with a distributed cache (several nodes): samples
  // read from another node's cache, and the bytes that crossed the network.
  std::uint64_t remote_hits = 0;
  std::uint64_t network_bytes = 0;
  // The modelled loader: the same figures per epoch, in epoch order.
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

// ==== batch source ====
//
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

// ==== distributed cache ====
//
// Caches that span the nodes of a job (several nodes, each with its own
// loaders, page cache and loader cache), for the modelled loader. Both keep
// a node's loader cache (LoaderModelOptions::cache_bytes, MinIO: admit until
// full, never evict) and add a directory of which node holds which sample:
//  - Partitioned: CoorDL's partitioned cache (Mohan et al., "Analyzing and
//    Mitigating Data Stalls in DNN Training", VLDB 2021, section 5.2), which
//    is also LADCache's regular mode (the authors' gpufs repository, branch
//    gus-ladcache-v2, --use-ladcache without --locality-aware). Each node
//    caches what it reads from storage; since a DistributedSampler gives
//    every sample to one node per epoch, the nodes' caches hold disjoint
//    shards. A sample that another node holds is read from that node's
//    memory over the network (a remote hit) instead of storage; a remote hit
//    is not cached again locally.
//  - LocalityAware: LADCache's locality-aware mode (--locality-aware): the
//    sampler gives each node the same partition of the dataset every epoch
//    (its epoch-0 shard, shuffled anew each epoch), so a node reads what it
//    cached itself and remote hits do not occur.
// A remote hit costs the reader's CPU per request (read_per_sample), then a
// request to the node's fetch server: `fetch`, a StorageDevice whose latency
// is a request's round trip and cache-server work, whose bandwidth is the
// NIC's payload rate and whose slots are the requests the cache servers
// answer at once. Under a symmetric load every node receives as much as it
// sends, so each node's ranks share one such server (shared_by).
// The directory records the epoch in which each sample was admitted and a
// lookup in epoch e sees only admissions from epochs before e: within an
// epoch no node reads a sample another node reads, so what a lookup may
// find was admitted in an earlier epoch and does not depend on the order in
// which the nodes' loaders were simulated.
// Thread safety: DistributedCache's methods may be called from many threads.

namespace gpemu::pipeline {

enum class DistributedCacheKind { None, Partitioned, LocalityAware };
std::string_view to_string(DistributedCacheKind k);  // "none", "partitioned", "locality-aware"
// Accepts "none", "partitioned" (also "coordl", "ladcache") and
// "locality-aware" (also "ladcache-locality"); InputError otherwise.
DistributedCacheKind parse_distributed_cache(std::string_view name);

class DistributedCache {
 public:
  // For a dataset of `samples` over `nodes` nodes; `fetch` as above (validated).
  DistributedCache(std::size_t samples, int nodes, DistributedCacheKind kind, StorageDevice fetch);
  DistributedCacheKind kind() const { return kind_; }
  int nodes() const { return nodes_; }
  const StorageDevice& fetch() const { return fetch_; }
  // The node that admitted sample `index` in an epoch before `epoch`; -1: none.
  int holder(std::size_t index, std::uint64_t epoch) const;
  // Node `node` admitted sample `index` during `epoch` (the first admission stays).
  void admit(std::size_t index, int node, std::uint64_t epoch);

 private:
  DistributedCacheKind kind_;
  int nodes_;
  StorageDevice fetch_;
  mutable std::mutex mu_;
  std::vector<int> holder_;
  std::vector<std::uint64_t> admitted_in_;
};

// LocalityAware: the order a rank visits in `epoch`: its shard of epoch 0
// (sampler.indices(0)), shuffled by (seed, epoch) when the sampler shuffles.
std::vector<std::size_t> locality_aware_order(const Sampler& sampler, std::uint64_t epoch);

}  // namespace gpemu::pipeline

// ==== loader model ====
//
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

  Clock& clock_;
  std::shared_ptr<const Dataset> data_;
  const Dataset& dataset_;  // *data_
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
