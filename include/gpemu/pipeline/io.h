// Reading sample bytes from files, and controlling the page cache.
//
// FileReader reads byte ranges with pread(2), optionally with O_DIRECT
// (bypassing the page cache) into 4 KiB-aligned buffers. When a filesystem
// refuses O_DIRECT (tmpfs, some overlay and network filesystems answer
// EINVAL), the reader falls back to buffered reads for the rest of its life
// and reports it once through the note callback.
//
// Page cache: evict_from_page_cache() asks the kernel to drop the cached
// pages of files (fdatasync, then posix_fadvise(POSIX_FADV_DONTNEED)) so an
// epoch starts cold. What it can and cannot do:
//  - it drops clean, unmapped, unlocked pages of those files only; pages that
//    another process has mmapped or mlocked, or that are dirty and being
//    written back, can stay;
//  - it is advice: the kernel may keep pages, and on tmpfs/ramfs the page
//    cache *is* the storage, so nothing is dropped;
//  - it does not touch caches below the kernel (disk, RAID controller, a
//    network filesystem's server, a hypervisor's host page cache), so "cold"
//    means "not in this kernel's page cache", not "from the platter";
//  - readahead of the next epoch can refill it at any time.
// page_cache_resident_bytes() measures what is resident (mmap + mincore), so
// a cold run can be checked rather than assumed.
//
// Read methods: FileReader (pread, one sample at a time, the default) and
// IoUringReader (io_uring_reader.h: all of a batch's reads at once).
//
// Thread safety: a FileReader per thread; the free functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpemu::pipeline {

// How the loader reads sample bytes (LoaderOptions::read_method).
enum class ReadMethod {
  Pread,    // pread(2) per sample, read then decode, sample by sample (default)
  IoUring,  // io_uring: every read of a batch in flight at once, then decode
  // FFCV-style files only (their dataset has a page_size):
  Mmap,          // the file memory-mapped, the OS page cache serving it (FFCV's os_cache=True)
  ProcessCache,  // its pages read whole into the loader's memory once each (FFCV's os_cache=False)
};
std::string_view to_string(ReadMethod m);  // "pread", "io_uring", "mmap", "process_cache"
// Accepts "pread", "io_uring" (also "io-uring", "uring"), "mmap" and
// "process_cache"; InputError otherwise.
ReadMethod parse_read_method(std::string_view name);

class FileReader {
 public:
  using NoteFn = std::function<void(const std::string&)>;
  explicit FileReader(bool direct_io = false, NoteFn note = {});
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Reads exactly `length` bytes at `offset`. InputError naming the path when
  // the file cannot be opened or read or is shorter than offset + length. The
  // span points into this reader's buffer and is valid until the next read.
  std::span<const std::byte> read(const std::string& path, std::uint64_t offset, std::uint64_t length);

  // True while reads bypass the page cache (asked for and not refused).
  bool direct() const { return direct_; }

 private:
  int open_file(const std::string& path);
  void close_file();
  void fall_back(const std::string& path, int err);
  bool direct_;
  NoteFn note_;
  int fd_ = -1;
  std::string fd_path_;
  std::byte* buffer_ = nullptr;
  std::size_t capacity_ = 0;
};

struct PageCacheReport {
  std::size_t files = 0;            // files advised
  std::uint64_t bytes = 0;          // their total size
  std::vector<std::string> errors;  // "path: reason" for files that could not be opened
};

PageCacheReport evict_from_page_cache(const std::vector<std::string>& files);

// Bytes of these files currently in the page cache (multiples of the page size).
std::uint64_t page_cache_resident_bytes(const std::vector<std::string>& files);

}  // namespace gpemu::pipeline
