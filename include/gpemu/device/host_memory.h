// Host memory for copies to and from emulated GPUs. Pageable memory is plain
// heap memory; pinned (page-locked) memory is really locked with mlock(2) so
// that a data pipeline using it pays the same host-side costs as with
// cudaHostAlloc, or, in accounted-only mode, merely counted.
//
// Thread safety: HostBuffer objects are not shared; the global pinned-bytes
// counter is atomic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpemu {

enum class HostMemoryKind { Pageable, Pinned };
std::string_view to_string(HostMemoryKind k);

enum class PinMode {
  Lock,         // mmap + mlock; ResourceError when RLIMIT_MEMLOCK is too low
  AccountOnly,  // allocate normally, count as pinned, do not lock
};

class HostBuffer {
 public:
  HostBuffer() = default;
  // Throws ResourceError (naming the size, the limit and how to raise it)
  // when kind is Pinned, mode is Lock and the memory cannot be locked.
  HostBuffer(std::size_t bytes, HostMemoryKind kind, PinMode mode = PinMode::Lock);
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  HostMemoryKind kind() const { return kind_; }
  bool locked() const { return locked_; }

 private:
  void release() noexcept;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  HostMemoryKind kind_ = HostMemoryKind::Pageable;
  bool locked_ = false;
  bool mapped_ = false;
};

// Bytes currently held in pinned HostBuffers in this process (locked or accounted).
std::uint64_t pinned_host_bytes();

// Whether `bytes` more of pinned buffers can really be locked: within
// RLIMIT_MEMLOCK (beyond what is locked already), or the process may lock
// beyond it (CAP_IPC_LOCK, e.g. root), which a probe lock of one page more
// than the limit shows.
bool can_lock_pinned(std::uint64_t bytes);

// A byte size as people write it: 0, 123456, 512K, 256M, 4G (powers of 1024;
// an optional trailing B or iB), 0 or from 1 byte to kMaxByteSize. InputError
// naming `what` otherwise.
inline constexpr std::uint64_t kMaxByteSize = std::uint64_t{1} << 50;
std::uint64_t parse_byte_size(std::string_view text, std::string_view what);

}  // namespace gpemu
