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
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gpemu/pipeline/dataset.h"

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
  // The cached bytes without counting a hit or a miss (another node asking:
  // the distributed cache across real nodes serves them from here).
  std::optional<std::span<const std::byte>> peek(const std::string& path, std::uint64_t offset) const;
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
