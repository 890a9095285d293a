// Profiles that are hostile rather than merely malformed: nesting that would
// overflow a recursive scanner, numbers past a double or past the clock,
// implausible spreads, floods of text. Each is an InputError naming the file,
// the line or field, the value and what is accepted (issue 10: C1, S1, S3,
// U1, U2, U5, U6).
#include <string>

#include <gtest/gtest.h>

#include "cost/json_source_lines.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "support/cost_test_util.h"

namespace gpemu {
namespace {

using testing::TempDir;

constexpr const char* kForward = "time/compute/forward/Tesla_V100-PCIE-32GB/tinynet/time_by_batch_size.csv";
constexpr const char* kBackward = "time/compute/backward/Tesla_V100-PCIE-32GB/tinynet/time_by_batch_size.csv";

std::string native_error(const std::string& text) {
  try {
    parse_native_profile(text, "p.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string one_row(const std::string& row_fields) {
  return R"({"format": "gpemu-profile/1", "gpu": "v100", "model": "tiny",
  "rows": [
    {"batch_size": 1, )" +
         row_fields + R"(}
  ]})";
}

std::string artifact_error(const TempDir& dir) {
  try {
    read_gpemu_artifact(dir.path());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ProfileLimits, DeepNestingIsRefusedNotAStackOverflow) {
  // 100,000 levels crashed the line scanner (SIGSEGV) before it was bounded.
  const int n = 100000;
  std::string text = R"({"format": "gpemu-profile/1", "comment": )";
  for (int i = 0; i < n; ++i) text += "{\"a\":";
  text += "1";
  text += std::string(n, '}');
  text += "}";
  const std::string err = native_error(text);
  EXPECT_NE(err.find("p.json:1:"), std::string::npos) << err;
  EXPECT_NE(err.find("deeper than 64"), std::string::npos) << err;
}

TEST(ProfileLimits, ModerateNestingInACommentStillReads) {
  // Below the limit the scanner walks nested values without recursing.
  std::string nested;
  for (int i = 0; i < 50; ++i) nested += "[";
  nested += std::string(50, ']');
  const std::string text = R"({"format": "gpemu-profile/1", "gpu": "v100", "model": "tiny",
  "extra": )" + nested + R"(, "rows": []})";
  const std::string err = native_error(text);
  // Reaches the field check, which names the line of the unknown field.
  EXPECT_NE(err.find("p.json:2: unknown field \"extra\""), std::string::npos) << err;
}

TEST(ProfileLimits, NestingScannerIgnoresBracketsInStrings) {
  EXPECT_EQ(cost_detail::line_past_nesting(R"({"a": "[[[[[[[[", "b": [1]})", 2), 0);
  EXPECT_EQ(cost_detail::line_past_nesting("{\n\"a\": [\n[1]]}", 2), 3);
}

TEST(ProfileLimits, ANumberPastADoubleNamesTheFileAndLine) {
  const std::string err = native_error(one_row(R"("forward_s": 0.1},
    {"batch_size": 2, "forward_s": 1e309)"));
  EXPECT_NE(err.find("p.json:4:"), std::string::npos) << err;
  EXPECT_NE(err.find("1e309"), std::string::npos) << err;
  EXPECT_EQ(err.find("json.exception"), std::string::npos) << err;
}

TEST(ProfileLimits, SecondsPastTheLimitAreRefusedInJson) {
  // 1e300 s used to wrap the nanosecond clock to a negative forward time.
  const std::string err = native_error(one_row(R"("forward_s": 1e300)"));
  EXPECT_NE(err.find("p.json:3: rows[0].forward_s is 1e+300"), std::string::npos) << err;
  EXPECT_NE(err.find("from 0 to 1e+06 (seconds)"), std::string::npos) << err;
}

TEST(ProfileLimits, ACoefficientOfVariationAboveOneIsRefused) {
  const std::string err = native_error(one_row(R"("forward_s": 0.1, "forward_cv": 1e9)"));
  EXPECT_NE(err.find("rows[0].forward_cv"), std::string::npos) << err;
  EXPECT_NE(err.find("from 0 to 1 (coefficient of variation)"), std::string::npos) << err;
  EXPECT_EQ(native_error(one_row(R"("forward_s": 0.1, "forward_cv": 0.5)")), "");
}

TEST(ProfileLimits, SecondsPastTheLimitAreRefusedInCsv) {
  TempDir dir;
  dir.write(kForward, "Batch_Size,Time_In_SECONDS\n1,0.01\n5.0,1e300\n");
  dir.write(kBackward, "Batch_Size,Time_In_SECONDS\n1,0.02\n");
  const std::string err = artifact_error(dir);
  EXPECT_NE(err.find("time_by_batch_size.csv:3: Time_In_SECONDS '1e300' is invalid"), std::string::npos) << err;
  EXPECT_NE(err.find("from 0 to 1e+06 (seconds)"), std::string::npos) << err;
}

TEST(ProfileLimits, AHugeLineIsQuotedShort) {
  // The whole 50 MB line used to be echoed; here 1 MB stands for it.
  TempDir dir;
  dir.write(kForward, "Batch_Size,Time_In_SECONDS\n1,0.01\n" + std::string(1000000, '1') + ",1\n");
  dir.write(kBackward, "Batch_Size,Time_In_SECONDS\n1,0.02\n");
  const std::string err = artifact_error(dir);
  EXPECT_NE(err.find(":3: Batch_Size '1111"), std::string::npos) << err;
  EXPECT_NE(err.find("... (1000000 bytes)"), std::string::npos) << err;
  EXPECT_LT(err.size(), 400u) << err;
}

TEST(ProfileLimits, RawBytesAreEscapedInMessages) {
  TempDir dir;
  dir.write(kForward, std::string("Batch\x01\xff_Size,Time_In_SECONDS\n1,0.01\n"));
  dir.write(kBackward, "Batch_Size,Time_In_SECONDS\n1,0.02\n");
  const std::string err = artifact_error(dir);
  EXPECT_NE(err.find("Batch\\x01\\xff_Size"), std::string::npos) << err;
}

TEST(ProfileLimits, ATableThatIsAFolderIsNotCalledMissing) {
  TempDir dir;
  dir.write(kBackward, "Batch_Size,Time_In_SECONDS\n1,0.02\n");
  std::filesystem::create_directories(dir.path() / kForward);
  const std::string err = artifact_error(dir);
  EXPECT_NE(err.find("is a folder, not a regular file"), std::string::npos) << err;
  EXPECT_EQ(err.find("missing file"), std::string::npos) << err;
}

}  // namespace
}  // namespace gpemu
