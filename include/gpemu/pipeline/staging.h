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
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gpemu/device/host_memory.h"

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
