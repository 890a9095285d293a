// A loader-side, in-memory cache of sample bytes with the MinIO policy of the
// DataStall paper (Mohan et al., VLDB 2021): admit items until the capacity
// is reached, then never evict. With a random order every epoch, this keeps
// a fixed subset of the dataset in memory and gives a steady hit rate of
// about capacity / dataset size, instead of the thrashing an LRU page cache
// shows when the dataset is a little larger than memory.
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
#include <unordered_map>

namespace gpemu::pipeline {

class LoaderCache {
 public:
  explicit LoaderCache(std::uint64_t capacity_bytes);

  // The cached bytes, counting a hit; or nullopt, counting a miss.
  std::optional<std::span<const std::byte>> lookup(const std::string& path, std::uint64_t offset);
  // Admits a copy of data if it fits in what is left of the capacity and the
  // key is not cached yet. Returns whether it was admitted.
  bool admit(const std::string& path, std::uint64_t offset, std::span<const std::byte> data);

  std::uint64_t capacity_bytes() const { return capacity_; }
  std::uint64_t used_bytes() const { return used_.load(); }
  std::size_t entries() const;
  std::uint64_t hits() const { return hits_.load(); }
  std::uint64_t misses() const { return misses_.load(); }
  std::uint64_t rejected() const { return rejected_.load(); }  // admissions refused for lack of room

 private:
  struct Entry {
    std::unique_ptr<std::byte[]> data;
    std::size_t size;
  };
  static std::string key(const std::string& path, std::uint64_t offset);

  const std::uint64_t capacity_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, Entry> map_;
  std::atomic<std::uint64_t> used_{0}, hits_{0}, misses_{0}, rejected_{0};
};

}  // namespace gpemu::pipeline
