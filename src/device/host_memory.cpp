#include "gpemu/device.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {
namespace {

std::atomic<std::uint64_t> g_pinned_bytes{0};

std::string memlock_limit_text() {
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return "unknown";
  if (lim.rlim_cur == RLIM_INFINITY) return "unlimited";
  return fmt::format("{} KiB", lim.rlim_cur / 1024);
}

}  // namespace

std::string_view to_string(HostMemoryKind k) { return k == HostMemoryKind::Pinned ? "pinned" : "pageable"; }

HostBuffer::HostBuffer(std::size_t bytes, HostMemoryKind kind, PinMode mode) : size_(bytes), kind_(kind) {
  if (bytes == 0) return;
  if (kind == HostMemoryKind::Pinned && mode == PinMode::Lock) {
    // mmap gives page-aligned memory that munmap returns to the OS at once,
    // as cudaHostAlloc's pinned pages are.
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (mlock(p, bytes) != 0) {
      int err = errno;
      munmap(p, bytes);
      throw ResourceError(
          fmt::format("cannot lock {} bytes of pinned host memory: {} (RLIMIT_MEMLOCK is {}, {} bytes already pinned "
                      "by gpemu); raise the limit (ulimit -l unlimited, or LimitMEMLOCK= in systemd) or use "
                      "--pin-mode account to count pinned memory without locking it",
                      bytes, std::strerror(err), memlock_limit_text(), g_pinned_bytes.load()));
    }
    data_ = static_cast<std::byte*>(p);
    mapped_ = true;
    locked_ = true;
  } else {
    data_ = static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (!data_) throw std::bad_alloc();
  }
  if (kind == HostMemoryKind::Pinned) g_pinned_bytes += bytes;
}

HostBuffer::~HostBuffer() { release(); }

void HostBuffer::release() noexcept {
  if (!data_) return;
  if (kind_ == HostMemoryKind::Pinned) g_pinned_bytes -= size_;
  if (mapped_) {
    munlock(data_, size_);
    munmap(data_, size_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  size_ = 0;
  locked_ = mapped_ = false;
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      kind_(o.kind_),
      locked_(std::exchange(o.locked_, false)),
      mapped_(std::exchange(o.mapped_, false)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    kind_ = o.kind_;
    locked_ = std::exchange(o.locked_, false);
    mapped_ = std::exchange(o.mapped_, false);
  }
  return *this;
}

std::uint64_t pinned_host_bytes() { return g_pinned_bytes.load(); }

}  // namespace gpemu
