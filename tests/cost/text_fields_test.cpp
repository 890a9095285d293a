#include "cost/text_fields.h"

#include <gtest/gtest.h>

#include "gpemu/error.h"

namespace gpemu {
namespace {

// U4 of the reliability findings: "cannot open file for reading" without
// saying why (it was Permission denied).
TEST(ReadTextFile, AFileThatCannotBeOpenedNamesTheOsReason) {
  try {
    cost_detail::read_text_file("/nonexistent/gpemu/time_by_batch_size.csv");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open file for reading: No such file or directory"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpemu
