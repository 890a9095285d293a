#include "gpemu/pipeline.h"

#include <algorithm>

namespace gpemu::pipeline {

StagingBuffer::~StagingBuffer() { release(); }

StagingBuffer::StagingBuffer(StagingBuffer&& other) noexcept
    : buffer_(std::move(other.buffer_)), size_(other.size_), pool_(std::move(other.pool_)) {
  other.size_ = 0;
}

StagingBuffer& StagingBuffer::operator=(StagingBuffer&& other) noexcept {
  if (this != &other) {
    release();
    buffer_ = std::move(other.buffer_);
    size_ = other.size_;
    pool_ = std::move(other.pool_);
    other.size_ = 0;
  }
  return *this;
}

void StagingBuffer::release() noexcept {
  if (pool_ && buffer_.data() != nullptr) pool_->give_back(std::move(buffer_));
  pool_.reset();
  buffer_ = HostBuffer();
  size_ = 0;
}

std::shared_ptr<StagingPool> StagingPool::create(HostMemoryKind kind, PinMode mode, std::size_t max_free_buffers) {
  return std::shared_ptr<StagingPool>(new StagingPool(kind, mode, max_free_buffers));
}

StagingBuffer StagingPool::acquire(std::size_t bytes) {
  if (bytes == 0) return StagingBuffer(HostBuffer(), 0, nullptr);
  {
    std::lock_guard lock(mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->size() >= bytes && (best == free_.end() || it->size() < best->size())) best = it;
    }
    if (best != free_.end()) {
      HostBuffer b = std::move(*best);
      free_.erase(best);
      ++reuses_;
      return StagingBuffer(std::move(b), bytes, shared_from_this());
    }
    ++allocations_;
  }
  // Round up so slightly different batch sizes (short last batches, skipped
  // samples, byte records) can share buffers.
  constexpr std::size_t kGranule = 1 << 20;
  const std::size_t capacity = (bytes + kGranule - 1) / kGranule * kGranule;
  return StagingBuffer(HostBuffer(capacity, kind_, mode_), bytes, shared_from_this());
}

void StagingPool::give_back(HostBuffer buffer) noexcept {
  std::lock_guard lock(mu_);
  if (free_.size() < max_free_) {
    try {
      free_.push_back(std::move(buffer));
    } catch (...) {
      // dropping the buffer frees it
    }
  }
}

std::uint64_t StagingPool::allocations() const {
  std::lock_guard lock(mu_);
  return allocations_;
}

std::uint64_t StagingPool::reuses() const {
  std::lock_guard lock(mu_);
  return reuses_;
}

}  // namespace gpemu::pipeline
