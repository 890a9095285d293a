// The messages of sample read errors, shared by FileReader (pread) and
// IoUringReader so that both read methods report a failure the same way.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace gpemu::pipeline::detail {

inline std::string open_error(const std::string& path, int err) {
  return "cannot open '" + path + "': " + std::strerror(err);
}

inline std::string read_error(const std::string& path, std::uint64_t offset, int err) {
  return "cannot read '" + path + "' at offset " + std::to_string(offset) + ": " + std::strerror(err);
}

inline std::string short_file_error(const std::string& path, std::uint64_t offset, std::uint64_t length,
                                    std::uint64_t available) {
  return "cannot read '" + path + "': expected " + std::to_string(length) + " bytes at offset " +
         std::to_string(offset) + " but the file ends after " + std::to_string(available) +
         " (was it truncated after the dataset was opened?)";
}

inline std::string direct_io_refused(const std::string& path, int err) {
  return "O_DIRECT refused for '" + path + "' (" + std::strerror(err) +
         "); this filesystem does not support direct I/O, falling back to buffered reads through the page cache";
}

}  // namespace gpemu::pipeline::detail
