// Helpers for the cost layer's tests: scratch folders and the shared
// reference data.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <unistd.h>

namespace gpemu::testing {

// A fresh folder under the system temp folder, removed with its contents.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            ("gpemu-cost-test-" + std::to_string(::getpid()) + "-" + std::to_string(stamp) + "-" +
             std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `text` to path()/relative, creating folders; returns the full path.
  std::filesystem::path write(const std::filesystem::path& relative, std::string_view text) const {
    std::filesystem::path file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary);
    out << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

// ../shared/reference/gpemu-profiles, or empty when the shared folder is absent.
inline std::filesystem::path shared_profiles() {
  std::filesystem::path p = std::filesystem::path(GPEMU_SHARED_DIR) / "reference" / "gpemu-profiles";
  return std::filesystem::is_directory(p) ? p : std::filesystem::path();
}

}  // namespace gpemu::testing

#define GPEMU_REQUIRE_SHARED_PROFILES(var)                                                       \
  const std::filesystem::path var = ::gpemu::testing::shared_profiles();                         \
  if (var.empty())                                                                               \
  GTEST_SKIP() << "shared reference data absent: " GPEMU_SHARED_DIR                              \
                  "/reference/gpemu-profiles not found (GPEmu's measured profiles live there; " \
                  "see shared/README.md)"
