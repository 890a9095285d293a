#include "gpemu/pipeline.h"

#include <cstring>
#include <mutex>

namespace gpemu::pipeline {

LoaderCache::LoaderCache(std::uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

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

bool LoaderCache::admit(const std::string& path, std::uint64_t offset, std::span<const std::byte> data) {
  if (used_.load() + data.size() > capacity_) {  // cheap early refusal once full
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  auto k = key(path, offset);
  Entry e{std::make_unique<std::byte[]>(data.size()), data.size()};
  if (!data.empty()) std::memcpy(e.data.get(), data.data(), data.size());
  std::unique_lock lock(mu_);
  if (map_.count(k) != 0) return false;
  if (used_.load() + data.size() > capacity_) {
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
