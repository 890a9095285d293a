// Helpers for the cost layer's tests: scratch folders and the shared
// reference data.
#pragma once

#include "support/temp_dir.h"

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
using TempDir = gpemu::testing::TempDir;

// ../shared/reference/gpemu-profiles, or empty when the shared folder is absent.
inline std::filesystem::path shared_profiles() {
  std::filesystem::path p = std::filesystem::path(GPEMU_SHARED_DIR) / "reference" / "gpemu-profiles";
  return std::filesystem::is_directory(p) ? p : std::filesystem::path();
}

}  // namespace gpemu::testing

#define GPEMU_REQUIRE_SHARED_PROFILES(var)                                                      \
  const std::filesystem::path var = ::gpemu::testing::shared_profiles();                        \
  if (var.empty())                                                                              \
  GTEST_SKIP() << "shared reference data absent: " GPEMU_SHARED_DIR                             \
                  "/reference/gpemu-profiles not found (GPEmu's measured profiles live there; " \
                  "see shared/README.md)"
