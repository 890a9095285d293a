#include "gpemu/pipeline.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::pipeline {

std::string_view to_string(CachePolicy p) { return p == CachePolicy::Sff ? "sff" : "minio"; }

CachePolicy parse_cache_policy(std::string_view name) {
  if (name == "minio") return CachePolicy::Minio;
  if (name == "sff") return CachePolicy::Sff;
  throw InputError(fmt::format(
      "unknown cache policy '{}': accepted minio (admit until full) or sff (small files first, then as minio)", name));
}

std::uint64_t sff_size_limit(const Dataset& dataset, std::uint64_t capacity) {
  std::vector<std::uint64_t> sizes;
  sizes.reserve(dataset.samples.size());
  for (const Sample& s : dataset.samples) sizes.push_back(s.length);
  std::sort(sizes.begin(), sizes.end());
  std::uint64_t sum = 0, limit = 0;
  for (std::uint64_t b : sizes) {
    if (b > capacity - sum) break;  // sum <= capacity throughout
    sum += b;
    limit = b;
  }
  return limit;
}

CacheAdmission cache_admission(const Dataset& dataset, std::uint64_t capacity, CachePolicy policy) {
  CacheAdmission a;
  a.capacity = capacity;
  a.policy = policy;
  if (policy == CachePolicy::Sff) a.max_item_bytes = sff_size_limit(dataset, capacity);
  return a;
}

LoaderCache::LoaderCache(std::uint64_t capacity_bytes) : admission_{capacity_bytes} {}
LoaderCache::LoaderCache(CacheAdmission admission) : admission_(admission) {}

std::string LoaderCache::key(const std::string& path, std::uint64_t offset) {
  std::string k = path;
  k.push_back('\0');
  k += std::to_string(offset);
  return k;
}

std::optional<std::span<const std::byte>> LoaderCache::lookup(const std::string& path, std::uint64_t offset) {
  const auto k = key(path, offset);
  std::shared_lock lock(mu_);
  const auto it = map_.find(k);
  if (it == map_.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  return std::span<const std::byte>(it->second.data.get(), it->second.size);
}

std::optional<std::span<const std::byte>> LoaderCache::peek(const std::string& path, std::uint64_t offset) const {
  const auto k = key(path, offset);
  std::shared_lock lock(mu_);
  const auto it = map_.find(k);
  if (it == map_.end()) return std::nullopt;
  return std::span<const std::byte>(it->second.data.get(), it->second.size);
}

bool LoaderCache::admit(const std::string& path, std::uint64_t offset, std::span<const std::byte> data) {
  if (!admission_.admits(used_.load(), data.size())) {  // cheap early refusal once full
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  auto k = key(path, offset);
  Entry e{std::make_unique<std::byte[]>(data.size()), data.size()};
  if (!data.empty()) std::memcpy(e.data.get(), data.data(), data.size());
  std::unique_lock lock(mu_);
  if (map_.count(k) != 0) return false;
  if (!admission_.admits(used_.load(), data.size())) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  used_.fetch_add(data.size());
  map_.emplace(std::move(k), std::move(e));
  return true;
}

std::size_t LoaderCache::entries() const {
  std::shared_lock lock(mu_);
  return map_.size();
}

}  // namespace gpemu::pipeline
