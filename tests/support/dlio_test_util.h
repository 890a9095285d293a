// Test helpers: a temporary directory removed at the end of the test, and a
// substring assertion with a readable failure message.
#pragma once

#include "support/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace gpemu::dlio::testing {

using TempDir = gpemu::testing::TempDir;

inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected to find\n  " << part << "\nin\n  " << text;
}

// A tiny DLIO workload (8 npy files of 4 samples of 4 KiB, batch 4, one
// epoch of 10 ms steps) generated into `data_folder`, written to `path`.
inline void write_tiny_workload(const std::filesystem::path& path, const std::filesystem::path& data_folder) {
  std::ofstream(path) << "model:\n  name: tiny\n"
                         "workflow:\n  generate_data: True\n  train: True\n"
                         "dataset:\n  data_folder: "
                      << data_folder.string()
                      << "\n  format: npy\n"
                         "  num_files_train: 8\n  num_samples_per_file: 4\n  record_length: 4096\n"
                         "reader:\n  batch_size: 4\n  read_threads: 1\n"
                         "train:\n  epochs: 1\n  computation_time: 0.01\n"
                         "metric:\n  au: 0.90\n";
}

}  // namespace gpemu::dlio::testing

#define EXPECT_CONTAINS(text, part) EXPECT_TRUE(::gpemu::dlio::testing::Contains((text), (part)))
