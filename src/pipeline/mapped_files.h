// Sample bytes of FFCV-style files straight from memory, as FFCV's loader
// reads its .beton: the file memory-mapped whole, so the OS page cache serves
// it (ReadMethod::Mmap, FFCV's os_cache=True), or its pages read whole into
// the loader's own memory the first time a sample on them is asked for and
// kept there (ReadMethod::ProcessCache, FFCV's os_cache=False; FFCV also
// frees a page once the epoch's samples on it are done, which this does not).
// Thread safety: read() may be called from many threads; returned spans stay
// valid for the reader's lifetime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace gpemu::pipeline {

// An FFCV-style file's pages start here (after its header).
inline constexpr std::uint64_t kFfcvDataOffset = 4096;

class MappedFiles {
 public:
  // page_size: the file's (Dataset::page_size); used by the process cache.
  MappedFiles(bool process_cache, std::uint64_t page_size) : process_cache_(process_cache), page_size_(page_size) {}
  ~MappedFiles();
  MappedFiles(const MappedFiles&) = delete;
  MappedFiles& operator=(const MappedFiles&) = delete;
  // InputError naming the file when it cannot be opened or mapped, or no
  // longer holds the range.
  std::span<const std::byte> read(const std::string& path, std::uint64_t offset, std::uint64_t length);
  // Process cache: bytes read from files into it so far.
  std::uint64_t bytes_loaded() const;

 private:
  struct Mapping {
    const std::byte* data = nullptr;
    std::uint64_t size = 0;
  };
  struct Pages {
    std::once_flag loaded;
    std::vector<std::byte> bytes;
    std::string error;
  };
  Mapping& mapping(const std::string& path);
  bool process_cache_;
  std::uint64_t page_size_;
  mutable std::mutex mu_;
  std::map<std::string, Mapping> maps_;
  std::map<std::pair<std::string, std::uint64_t>, std::unique_ptr<Pages>> pages_;
  std::uint64_t loaded_ = 0;
};

}  // namespace gpemu::pipeline
