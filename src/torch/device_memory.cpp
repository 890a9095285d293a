// The torch runtime's device memory: each device's caching allocator (the
// server's, attached), the process's memory fraction, and the warning when
// two processes of a run allocate on one device.
#include "torch/runtime.h"

#include <fmt/format.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "gpemu/error.h"
#include "share/serve.h"
#include "torch/settings.h"

namespace gpemu::torch_backend {

using detail::env;

// N10: each process of a run has its own emulated devices, so two processes
// on one device index would each get the whole card. The first process of
// the run to allocate on device i holds an abstract Unix socket named after
// the run (its first process's pid) and i, for as long as it lives; a later
// one finds the name taken and says so on stderr, naming the holder (its
// SO_PEERCRED). (decisions.md: "Processes of one gpemu torch run on one GPU")
void Runtime::claim_device(int index) {
  if (index < 0 || index >= kMaxTorchGpus || claimed_[static_cast<std::size_t>(index)].exchange(true)) return;
  const auto run = env("GPEMU_TORCH_MAIN_PID");
  if (!run) return;  // not under gpemu torch: no run to share with
  const std::string name = fmt::format("gpemu-torch-{}-cuda{}", *run, index);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof a.sun_path - 2));  // sun_path[0] = 0: abstract
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd, 64) == 0) return;  // held until exit
  ::close(fd);
  // Taken: by whom (a connection its listener never accepts tells its pid).
  pid_t holder = 0;
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&a), len) == 0) {
    ucred cred{};
    socklen_t n = sizeof cred;
    if (::getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cred, &n) == 0) holder = cred.pid;
  }
  if (probe >= 0) ::close(probe);
  const std::string warning = fmt::format(
      "gpemu torch: warning: process {} allocates on cuda:{}, which {} of this run uses too; processes of one run do "
      "not share an emulated GPU: each has a whole {}, its memory and its time (a real GPU would run out of memory "
      "or time-slice them). To share one card, run `gpemu serve` and `gpemu torch --connect`, or give each process "
      "its own GPU (--gpus)\n",
      ::getpid(), index, holder > 0 ? fmt::format("process {}", holder) : std::string("another process"), gpu_->id);
  std::fputs(warning.c_str(), stderr);
}

CachingAllocator::Ptr Runtime::allocate(int device_index, std::uint64_t bytes, std::int64_t stream_id) {
  if (!remote()) {
    Device& d = device(device_index);
    if (!claimed_[static_cast<std::size_t>(device_index)].load(std::memory_order_relaxed)) claim_device(device_index);
    CachingAllocator& a = d.allocator();
    const CachingAllocator::Ptr p = a.allocate(bytes, static_cast<int>(stream_id));
    const std::uint64_t limit = reserve_limits_[static_cast<std::size_t>(device_index)].load(std::memory_order_relaxed);
    if (limit == CachingAllocator::kUnlimited || a.stats().reserved_bytes <= limit) return p;
    // A new segment past the process's memory fraction: as PyTorch, the
    // cache is released and the request tried again, then it is an OOM.
    a.free(p);
    a.empty_cache();
    const CachingAllocator::Ptr q = a.allocate(bytes, static_cast<int>(stream_id));
    if (a.stats().reserved_bytes <= limit) return q;
    a.free(q);
    a.empty_cache();
    throw OutOfMemoryError(
        fmt::format("CUDA out of memory. Tried to allocate {} (GPU {}; {} total capacity; {} allowed by "
                    "set_per_process_memory_fraction; {} already allocated; {} reserved in total by PyTorch)",
                    CachingAllocator::format_size(bytes), device_index,
                    CachingAllocator::format_size(gpu_->reported_memory()), CachingAllocator::format_size(limit),
                    CachingAllocator::format_size(a.stats().allocated_bytes),
                    CachingAllocator::format_size(a.stats().reserved_bytes)),
        bytes);
  }
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  const nlohmann::json reply =
      attached(r, device_index).call({{"op", "malloc"}, {"bytes", bytes}, {"stream", stream_id}});
  const auto p = reply["ptr"].get<CachingAllocator::Ptr>();
  if (p != 0) r.block_sizes[p] = reply["size"].get<std::uint64_t>();
  return p;
}

void Runtime::free(int device_index, CachingAllocator::Ptr p) {
  if (!remote()) {
    device(device_index).allocator().free(p);
    return;
  }
  if (p == 0) return;
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  r.block_sizes.erase(p);
  attached(r, device_index).post({{"op", "free"}, {"ptr", p}});
}

std::uint64_t Runtime::block_size(int device_index, CachingAllocator::Ptr p) {
  if (!remote()) return device(device_index).allocator().block_size(p);
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  const auto it = r.block_sizes.find(p);
  if (it == r.block_sizes.end()) throw std::invalid_argument("block_size: not a live allocation");
  return it->second;
}

AllocatorStats Runtime::memory_stats(int device_index) {
  if (!remote()) return device(device_index).allocator().stats();
  const auto reply = call_if_attached(device_index, {{"op", "memory"}});
  return reply ? allocator_stats_from_json(*reply) : AllocatorStats{};
}

void Runtime::set_memory_fraction(int device_index, double fraction) {
  if (!(fraction >= 0 && fraction <= 1))
    throw InputError(fmt::format("set_per_process_memory_fraction: {} is not a fraction from 0 to 1", fraction));
  if (remote())
    throw InputError(
        "set_per_process_memory_fraction: not emulated for a script attached to gpemu serve (--connect): the "
        "server's allocator has no such limit; run without --connect to emulate it");
  // PyTorch's rule: the fraction of the card's total memory (what
  // get_device_properties reports), as a bound on what the process reserves.
  (void)device(device_index);
  reserve_limits_[static_cast<std::size_t>(device_index)].store(
      fraction >= 1 ? CachingAllocator::kUnlimited
                    : static_cast<std::uint64_t>(fraction * static_cast<double>(gpu_->reported_memory())),
      std::memory_order_relaxed);
}

void Runtime::empty_cache(int device_index) {
  if (!remote())
    device(device_index).allocator().empty_cache();
  else
    call_if_attached(device_index, {{"op", "empty_cache"}});
}

void Runtime::reset_peak_stats(int device_index) {
  if (!remote())
    device(device_index).allocator().reset_peak_stats();
  else
    call_if_attached(device_index, {{"op", "reset_peak"}});
}

}  // namespace gpemu::torch_backend
