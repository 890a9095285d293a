#include "pipeline/mapped_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::pipeline {

MappedFiles::~MappedFiles() {
  for (auto& [path, m] : maps_)
    if (m.data) munmap(const_cast<std::byte*>(m.data), m.size);
}

MappedFiles::Mapping& MappedFiles::mapping(const std::string& path) {
  std::lock_guard lock(mu_);
  Mapping& m = maps_[path];
  if (m.data) return m;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("'{}': cannot be opened ({})", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    const int err = errno;
    close(fd);
    throw InputError(fmt::format("'{}': cannot be mapped ({})", path, st.st_size <= 0 ? "empty" : std::strerror(err)));
  }
  void* p = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) throw InputError(fmt::format("'{}': cannot be mapped ({})", path, std::strerror(err)));
  m.data = static_cast<const std::byte*>(p);
  m.size = static_cast<std::uint64_t>(st.st_size);
  return m;
}

std::span<const std::byte> MappedFiles::read(const std::string& path, std::uint64_t offset, std::uint64_t length) {
  if (!process_cache_) {
    const Mapping& m = mapping(path);
    if (offset > m.size || length > m.size - offset)
      throw InputError(fmt::format("'{}': bytes {} + {} lie past its end ({} bytes): the file shrank", path, offset,
                                   length, m.size));
    return {m.data + offset, length};
  }
  // The record's run of pages: one page, or the pages a large record owns
  // (it starts a page, and no other record starts in them).
  if (page_size_ == 0 || offset < kFfcvDataOffset)
    throw InputError(fmt::format("'{}': the process cache reads FFCV-style files' pages only", path));
  const std::uint64_t first = (offset - kFfcvDataOffset) / page_size_;
  const std::uint64_t start = kFfcvDataOffset + first * page_size_;
  const std::uint64_t pages = (offset + length - start + page_size_ - 1) / page_size_;
  Pages* entry;
  {
    std::lock_guard lock(mu_);
    auto& slot = pages_[{path, first}];
    if (!slot) slot = std::make_unique<Pages>();
    entry = slot.get();
  }
  std::call_once(entry->loaded, [&] {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      entry->error = fmt::format("'{}': cannot be opened ({})", path, std::strerror(errno));
      return;
    }
    entry->bytes.resize(pages * page_size_);
    std::uint64_t got = 0;
    while (got < entry->bytes.size()) {
      const ssize_t r =
          pread(fd, entry->bytes.data() + got, entry->bytes.size() - got, static_cast<off_t>(start + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;  // the last page ends with the file
      got += static_cast<std::uint64_t>(r);
    }
    close(fd);
    entry->bytes.resize(got);
    std::lock_guard lock(mu_);
    loaded_ += got;
  });
  if (!entry->error.empty()) throw InputError(entry->error);
  if (offset + length - start > entry->bytes.size())
    throw InputError(fmt::format("'{}': bytes {} + {} lie past its end: the file shrank", path, offset, length));
  return {entry->bytes.data() + (offset - start), length};
}

std::uint64_t MappedFiles::bytes_loaded() const {
  std::lock_guard lock(mu_);
  return loaded_;
}

}  // namespace gpemu::pipeline
