// Helpers for pipeline tests: a temporary folder removed at scope exit, and
// small generated datasets.
#pragma once

#include "support/temp_dir.h"

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gpemu::pipeline::testing {

using TempDir = gpemu::testing::TempDir;

inline std::vector<char> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_all(const std::filesystem::path& p, const std::vector<char>& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// The same as bytes, the file's folder made first.
inline void write_bytes(const std::filesystem::path& p, const std::vector<std::byte>& b) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline std::vector<std::byte> read_bytes(const std::filesystem::path& p) {
  const std::vector<char> c = read_all(p);
  std::vector<std::byte> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) out[i] = static_cast<std::byte>(c[i]);
  return out;
}

}  // namespace gpemu::pipeline::testing
