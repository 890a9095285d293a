#include "gpemu/pipeline.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpemu/error.h"
#include "pipeline/read_errors.h"

namespace gpemu::pipeline {
namespace {

constexpr std::size_t kAlign = 4096;

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

std::string_view to_string(ReadMethod m) {
  switch (m) {
    case ReadMethod::IoUring: return "io_uring";
    case ReadMethod::Mmap: return "mmap";
    case ReadMethod::ProcessCache: return "process_cache";
    default: return "pread";
  }
}

ReadMethod parse_read_method(std::string_view name) {
  if (name == "pread") return ReadMethod::Pread;
  if (name == "io_uring" || name == "io-uring" || name == "uring") return ReadMethod::IoUring;
  if (name == "mmap") return ReadMethod::Mmap;
  if (name == "process_cache" || name == "process-cache") return ReadMethod::ProcessCache;
  throw InputError("unknown read method '" + std::string(name) +
                   "': accepted 'pread' (the default), 'io_uring', and for FFCV-style files 'mmap' or 'process_cache'");
}

FileReader::FileReader(bool direct_io, NoteFn note) : direct_(direct_io), note_(std::move(note)) {}

FileReader::~FileReader() {
  close_file();
  std::free(buffer_);
}

void FileReader::close_file() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  fd_path_.clear();
}

void FileReader::fall_back(const std::string& path, int err) {
  direct_ = false;
  close_file();
  if (note_) note_(detail::direct_io_refused(path, err));
}

int FileReader::open_file(const std::string& path) {
  if (fd_ >= 0 && fd_path_ == path) return fd_;
  close_file();
  int fd = -1;
  if (direct_) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0 && errno == EINVAL) {
      fall_back(path, EINVAL);
    }
  }
  if (fd < 0 && !direct_) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(detail::open_error(path, errno));
  fd_ = fd;
  fd_path_ = path;
  return fd_;
}

std::span<const std::byte> FileReader::read(const std::string& path, std::uint64_t offset, std::uint64_t length) {
  for (;;) {
    const int fd = open_file(path);
    const bool direct = direct_;
    const std::uint64_t start = direct ? offset / kAlign * kAlign : offset;
    const std::uint64_t end = direct ? (offset + length + kAlign - 1) / kAlign * kAlign : offset + length;
    const std::size_t need = static_cast<std::size_t>(end - start);
    if (need > capacity_ || buffer_ == nullptr) {
      std::free(buffer_);
      capacity_ = std::max<std::size_t>(need, 64 * 1024);
      capacity_ = (capacity_ + kAlign - 1) / kAlign * kAlign;
      void* p = nullptr;
      if (posix_memalign(&p, kAlign, capacity_) != 0) {
        buffer_ = nullptr;
        capacity_ = 0;
        throw std::bad_alloc();
      }
      buffer_ = static_cast<std::byte*>(p);
    }
    std::size_t got = 0;
    bool retry_buffered = false;
    while (got < need) {
      const ssize_t n = ::pread(fd, buffer_ + got, need - got, static_cast<off_t>(start + got));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (direct && errno == EINVAL) {
          fall_back(path, EINVAL);
          retry_buffered = true;
          break;
        }
        const int err = errno;
        close_file();
        throw InputError(detail::read_error(path, start + got, err));
      }
      if (n == 0) break;  // end of file
      got += static_cast<std::size_t>(n);
    }
    if (retry_buffered) continue;
    const std::uint64_t available = got > offset - start ? got - (offset - start) : 0;
    if (available < length) {
      close_file();
      throw InputError(detail::short_file_error(path, offset, length, available));
    }
    return {buffer_ + (offset - start), static_cast<std::size_t>(length)};
  }
}

PageCacheReport evict_from_page_cache(const std::vector<std::string>& files) {
  PageCacheReport report;
  for (const auto& path : files) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      report.errors.push_back(path + ": " + errno_text(errno));
      continue;
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0) report.bytes += static_cast<std::uint64_t>(st.st_size);
    ::fdatasync(fd);  // dirty pages cannot be dropped until written back
    const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (rc != 0) {
      report.errors.push_back(path + ": posix_fadvise: " + errno_text(rc));
    } else {
      ++report.files;
    }
    ::close(fd);
  }
  return report;
}

std::uint64_t page_cache_resident_bytes(const std::vector<std::string>& files) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t resident = 0;
  std::vector<unsigned char> vec;
  for (const auto& path : files) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      const auto size = static_cast<std::size_t>(st.st_size);
      void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      if (map != MAP_FAILED) {
        vec.resize((size + page - 1) / page);
        if (::mincore(map, size, vec.data()) == 0) {
          for (unsigned char v : vec) resident += (v & 1) ? page : 0;
        }
        ::munmap(map, size);
      }
    }
    ::close(fd);
  }
  return resident;
}

}  // namespace gpemu::pipeline
