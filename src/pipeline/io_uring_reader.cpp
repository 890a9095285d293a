#include "pipeline/io_uring_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <string_view>
#include <unordered_map>

#include <fcntl.h>
#include <unistd.h>

#if GPEMU_HAVE_LIBURING
#include <liburing.h>
#endif

#include "gpemu/error.h"
#include "pipeline/read_errors.h"

namespace gpemu::pipeline {
namespace {

std::string unavailable(const std::string& reason) {
  return "io_uring reads are unavailable here: " + reason + "; use the default reads instead (read method 'pread')";
}

}  // namespace

std::string IoUringSupport::message() const { return available ? std::string() : unavailable(reason); }

const IoUringSupport& io_uring_support() {
  static const IoUringSupport support = probe_io_uring();
  return support;
}

#if !GPEMU_HAVE_LIBURING

IoUringSupport probe_io_uring() {
  return {false, "gpemu was built without liburing; install liburing-dev and rebuild"};
}

struct IoUringReader::Ring {};

IoUringReader::IoUringReader(unsigned, bool direct_io, NoteFn note) : direct_(direct_io), note_(std::move(note)) {
  throw InputError(unavailable(io_uring_support().reason));
}

IoUringReader::~IoUringReader() { std::free(buffer_); }

std::span<const ReadResult> IoUringReader::read_batch(std::span<const ReadRequest>) {
  throw Error(unavailable(io_uring_support().reason));
}

#else

namespace {

constexpr std::size_t kDirectAlign = 4096;     // O_DIRECT offsets, lengths and buffers
constexpr std::size_t kSlotAlign = 64;         // buffered reads: a cache line per sample slot
constexpr unsigned kMaxDepth = 4096;           // ring entries; larger batches go in waves
constexpr std::uint64_t kMaxChunk = 1u << 30;  // one read's length is an unsigned int
constexpr int kMaxRetries = 1000;              // EINTR/EAGAIN per read, ring submissions that make no progress

std::uint64_t align_down(std::uint64_t v, std::uint64_t a) { return v / a * a; }
std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

std::string setup_reason(int err) {
  if (err == EPERM)
    return std::string("io_uring_setup is not permitted (") + std::strerror(err) +
           "): a container's seccomp profile or the sysctl kernel.io_uring_disabled refuses io_uring";
  if (err == ENOSYS)
    return std::string("this kernel has no io_uring (io_uring_setup: ") + std::strerror(err) +
           "), or a seccomp profile hides it";
  return std::string("io_uring_setup failed: ") + std::strerror(err);
}

}  // namespace

IoUringSupport probe_io_uring() {
  io_uring ring{};
  const int rc = io_uring_queue_init(1, &ring, 0);
  if (rc < 0) return {false, setup_reason(-rc)};
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  const bool read_op = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_READ);
  if (probe != nullptr) io_uring_free_probe(probe);
  io_uring_queue_exit(&ring);
  if (!read_op) return {false, "this kernel's io_uring has no IORING_OP_READ (Linux 5.6 or later is needed)"};
  return {true, {}};
}

struct IoUringReader::Ring {
  io_uring ring{};
};

IoUringReader::IoUringReader(unsigned queue_depth, bool direct_io, NoteFn note)
    : depth_(std::clamp(queue_depth, 1u, kMaxDepth)), direct_(direct_io), note_(std::move(note)) {
  const IoUringSupport& support = io_uring_support();
  if (!support.available) throw InputError(unavailable(support.reason));
  auto ring = std::make_unique<Ring>();
  // Completions are processed when the worker waits anyway (Linux 5.19+);
  // older kernels refuse the flag and get a plain ring.
  int rc = -EINVAL;
#ifdef IORING_SETUP_COOP_TASKRUN
  rc = io_uring_queue_init(depth_, &ring->ring, IORING_SETUP_COOP_TASKRUN);
#endif
  if (rc == -EINVAL) rc = io_uring_queue_init(depth_, &ring->ring, 0);
  if (rc < 0)
    throw InputError(
        unavailable("cannot set up a ring of " + std::to_string(depth_) + " entries: " + setup_reason(-rc)));
  ring_ = std::move(ring);
}

IoUringReader::~IoUringReader() {
  if (ring_) io_uring_queue_exit(&ring_->ring);
  std::free(buffer_);
}

std::span<const ReadResult> IoUringReader::read_batch(std::span<const ReadRequest> requests) {
  if (!ring_) throw Error("io_uring reader: the ring failed in an earlier batch and was closed");
  io_uring* ring = &ring_->ring;
  const std::size_t n = requests.size();
  results_.assign(n, ReadResult{});

  // Each distinct file is opened once for the batch; all are closed on return.
  struct File {
    int fd = -1;
    int buffered_fd = -1;  // opened when an O_DIRECT read of the file is refused
    bool direct = false;
    int open_errno = 0;
  };
  std::vector<File> files;
  struct Closer {
    std::vector<File>& files;
    ~Closer() {
      for (const File& f : files) {
        if (f.fd >= 0) ::close(f.fd);
        if (f.buffered_fd >= 0) ::close(f.buffered_fd);
      }
    }
  } closer{files};
  std::unordered_map<std::string_view, std::size_t> file_of;

  auto fall_back = [&](const std::string& path) {
    if (!direct_) return;
    direct_ = false;
    if (note_) note_(detail::direct_io_refused(path, EINVAL));
  };
  auto open_file = [&](const std::string& path) {
    File f;
    if (direct_) {
      f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
      if (f.fd >= 0) {
        f.direct = true;
        return f;
      }
      if (errno != EINVAL) {
        f.open_errno = errno;
        return f;
      }
      fall_back(path);
    }
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) f.open_errno = errno;
    return f;
  };

  // One read per request: the byte range it asks for (widened to 4 KiB
  // boundaries with O_DIRECT) into its own slot of the buffer.
  struct Read {
    std::size_t file = 0;
    int fd = -1;
    bool direct = false;
    bool active = false;
    std::uint64_t start = 0, need = 0, got = 0;
    std::byte* destination = nullptr;  // the caller's, or null: at slot in buffer_
    std::size_t slot = 0;
    int retries = 0;
    std::byte* data(std::byte* buffer) const { return destination ? destination : buffer + slot; }
  };
  std::vector<Read> reads(n);
  std::size_t arena = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const ReadRequest& q = requests[i];
    auto [it, inserted] = file_of.try_emplace(q.path, files.size());
    if (inserted) files.push_back(open_file(q.path));
    const File& f = files[it->second];
    if (f.fd < 0) {
      results_[i].error = detail::open_error(q.path, f.open_errno);
      continue;
    }
    Read& r = reads[i];
    r.file = it->second;
    r.fd = f.fd;
    r.direct = f.direct;
    r.active = true;
    r.start = f.direct ? align_down(q.offset, kDirectAlign) : q.offset;
    const std::uint64_t end = f.direct ? align_up(q.offset + q.length, kDirectAlign) : q.offset + q.length;
    r.need = end - r.start;
    if (q.destination != nullptr && !f.direct) {
      r.destination = q.destination;
      continue;
    }
    arena = align_up(arena, f.direct ? kDirectAlign : kSlotAlign);
    r.slot = arena;
    arena += static_cast<std::size_t>(r.need);
  }
  if (arena > capacity_ || buffer_ == nullptr) {
    std::free(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
    const std::size_t size = align_up(std::max<std::size_t>(arena, 1u << 20), kDirectAlign);
    void* p = nullptr;
    if (posix_memalign(&p, kDirectAlign, size) != 0) throw std::bad_alloc();
    buffer_ = static_cast<std::byte*>(p);
    capacity_ = size;
  }

  std::deque<std::size_t> todo;  // reads (or their remainders) to submit
  auto finish = [&](std::size_t i) {
    const Read& r = reads[i];
    results_[i].bytes = {r.data(buffer_) + (requests[i].offset - r.start),
                         static_cast<std::size_t>(requests[i].length)};
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (!reads[i].active) continue;
    if (reads[i].need == 0) {
      finish(i);
    } else {
      todo.push_back(i);
    }
  }

  auto complete = [&](std::size_t i, int res) {
    Read& r = reads[i];
    const ReadRequest& q = requests[i];
    if (res < 0) {
      const int err = -res;
      if ((err == EINTR || err == EAGAIN) && ++r.retries <= kMaxRetries) {
        todo.push_back(i);
      } else if (err == EINVAL && r.direct) {
        // The filesystem refuses O_DIRECT reads: read this one, and all later
        // ones, through the page cache.
        fall_back(q.path);
        File& f = files[r.file];
        if (f.buffered_fd < 0) f.buffered_fd = ::open(q.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (f.buffered_fd < 0) {
          results_[i].error = detail::open_error(q.path, errno);
          return;
        }
        r.fd = f.buffered_fd;
        r.direct = false;
        r.start = q.offset;
        r.need = q.length;
        r.got = 0;
        todo.push_back(i);
      } else {
        results_[i].error = detail::read_error(q.path, r.start + r.got, err);
      }
      return;
    }
    r.got += static_cast<std::uint64_t>(res);
    const std::uint64_t lead = q.offset - r.start;
    const std::uint64_t available = r.got > lead ? r.got - lead : 0;
    if (r.got >= r.need || available >= q.length) {
      finish(i);  // with O_DIRECT the aligned tail may lie past the end of the file
    } else if (res == 0 || (r.direct && r.got % kDirectAlign != 0)) {
      results_[i].error = detail::short_file_error(q.path, q.offset, q.length, available);  // end of file
    } else {
      todo.push_back(i);  // a short read: submit the rest
    }
  };

  unsigned prepared = 0;   // in the submission queue, not yet taken by the kernel
  unsigned in_kernel = 0;  // submitted, not yet completed
  // A failure of the ring itself (not of a read): wait for what the kernel
  // holds (it writes into buffer_), close the ring, and report.
  auto fail_ring = [&](const std::string& what, int err) {
    while (in_kernel > 0) {
      io_uring_cqe* cqe = nullptr;
      const int w = io_uring_wait_cqe(ring, &cqe);
      if (w == -EINTR) continue;
      if (w < 0) break;
      io_uring_cqe_seen(ring, cqe);
      --in_kernel;
    }
    io_uring_queue_exit(ring);
    ring_.reset();
    throw Error("io_uring reader: " + what + ": " + std::strerror(err));
  };

  int stalls = 0;
  while (!todo.empty() || prepared > 0 || in_kernel > 0) {
    while (!todo.empty() && prepared + in_kernel < depth_) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (sqe == nullptr) break;
      const std::size_t i = todo.front();
      todo.pop_front();
      const Read& r = reads[i];
      const auto len = static_cast<unsigned>(std::min(r.need - r.got, kMaxChunk));
      io_uring_prep_read(sqe, r.fd, r.data(buffer_) + r.got, len, r.start + r.got);
      io_uring_sqe_set_data64(sqe, i);
      ++prepared;
    }
    if (prepared > 0) {
      const int s = io_uring_submit(ring);
      if (s > 0) {
        prepared -= static_cast<unsigned>(s);
        in_kernel += static_cast<unsigned>(s);
        stalls = 0;
      } else if (s < 0 && s != -EINTR && s != -EAGAIN && s != -EBUSY) {
        fail_ring("submitting reads failed", -s);
      } else if (in_kernel == 0) {
        if (++stalls > kMaxRetries) fail_ring("the kernel took no reads", s < 0 ? -s : EAGAIN);
        ::usleep(100);
        continue;
      }
    }
    if (in_kernel == 0) continue;
    io_uring_cqe* cqe = nullptr;
    const int w = io_uring_wait_cqe(ring, &cqe);
    if (w == -EINTR) continue;
    if (w < 0) fail_ring("waiting for reads failed", -w);
    unsigned head = 0, seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      complete(static_cast<std::size_t>(io_uring_cqe_get_data64(cqe)), cqe->res);
      ++seen;
    }
    io_uring_cq_advance(ring, seen);
    in_kernel -= seen;
  }
  return results_;
}

#endif

}  // namespace gpemu::pipeline
