// Reading a batch's samples with io_uring: every read in flight at once.
//
// A loader worker with FileReader (io.h) reads one sample, decodes it, reads
// the next: storage sees one request at a time per worker. IoUringReader
// takes the batch's samples that the loader cache did not serve, opens their
// files, submits one IORING_OP_READ per sample (its offset and length) and
// waits once for all of them, so the device works on up to a batch of
// requests in parallel; then the worker decodes from the reader's buffer.
//
//   IoUringReader reader(/*queue_depth=*/64);
//   const auto results = reader.read_batch(requests);   // one result per request
//   for (const ReadResult& r : results) r.ok() ? use(r.bytes) : report(r.error);
//
// Details:
//  - queue_depth is the size of the ring (1 to 4096): the most reads in
//    flight. A batch with more requests keeps the ring full and refills it as
//    reads complete.
//  - A request may name a destination (e.g. the sample's place in a batch);
//    otherwise the bytes land in the reader's own buffer.
//  - Short reads are resubmitted for their remainder; EINTR/EAGAIN are
//    retried. A sample whose file cannot be opened or read, or ends before
//    offset + length, gets its own error (the path and strerror, the same text
//    as FileReader's), so the loader's skip/stop policy applies per sample.
//  - direct_io: files are opened with O_DIRECT and each sample's 4 KiB-aligned
//    range is read into a 4 KiB-aligned slot. When the filesystem refuses
//    O_DIRECT (EINVAL from open or from a read) the reader falls back to
//    buffered reads for the rest of its life and says so once through note.
//  - Files are opened with open(2) before the batch is submitted, each
//    distinct path once per batch, and closed when every read is done.
//
// Availability: io_uring needs liburing at build time (Debian: liburing-dev)
// and a kernel and sandbox that allow it (Linux 5.6 or later for
// IORING_OP_READ; container seccomp profiles and kernel.io_uring_disabled can
// refuse io_uring_setup). io_uring_support() probes once per process; the
// constructor throws InputError saying what is missing rather than falling
// back to pread, so a measurement is never silently of the other method.
//
// Thread safety: one IoUringReader per thread (a ring, a buffer); the free
// functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpemu/pipeline.h"

namespace gpemu::pipeline {

struct IoUringSupport {
  bool available = false;
  std::string reason;  // when not available: why, and what to do
  // "io_uring reads are unavailable here: <reason>; use the default reads instead (read method 'pread')"
  std::string message() const;
};

// Whether io_uring reads work here, probed on the first call (a one-entry
// ring and the kernel's opcode probe) and remembered for the process.
const IoUringSupport& io_uring_support();
// The same probe, made now and not remembered.
IoUringSupport probe_io_uring();

struct ReadRequest {
  std::string path;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  // Where to put the bytes (length of them), e.g. the sample's place in a
  // batch, saving a copy; null: the reader's buffer. Ignored for files read
  // with O_DIRECT, which need an aligned buffer.
  std::byte* destination = nullptr;
};

struct ReadResult {
  std::span<const std::byte>
      bytes;          // the sample, in destination or the reader's buffer (valid until the next read_batch)
  std::string error;  // empty on success, else "cannot open '<path>': <strerror>" or the like
  bool ok() const { return error.empty(); }
};

class IoUringReader {
 public:
  using NoteFn = FileReader::NoteFn;
  // InputError when io_uring is unavailable (io_uring_support()'s reason) or
  // the ring cannot be set up.
  explicit IoUringReader(unsigned queue_depth, bool direct_io = false, NoteFn note = {});
  ~IoUringReader();
  IoUringReader(const IoUringReader&) = delete;
  IoUringReader& operator=(const IoUringReader&) = delete;

  // Reads every request; results are in request order. A request's failure is
  // in its result, never an exception; Error only when the ring itself fails.
  std::span<const ReadResult> read_batch(std::span<const ReadRequest> requests);

  unsigned queue_depth() const { return depth_; }
  // True while reads bypass the page cache (asked for and not refused).
  bool direct() const { return direct_; }

 private:
  struct Ring;
  std::unique_ptr<Ring> ring_;
  unsigned depth_ = 0;
  bool direct_ = false;
  NoteFn note_;
  std::vector<ReadResult> results_;
  std::byte* buffer_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace gpemu::pipeline
