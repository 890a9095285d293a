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

}  // namespace gpemu::dlio::testing

#define EXPECT_CONTAINS(text, part) EXPECT_TRUE(::gpemu::dlio::testing::Contains((text), (part)))
