// Checked durations and sizes (checked.h, time.h): a figure past the clock's
// range or a product past 64 bits is an InputError with the value and the
// limit, never a wrapped number (issue 10: S1).
#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "common/checked.h"
#include "gpemu/error.h"
#include "gpemu/time.h"

namespace gpemu {
namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Checked, FromSecondsRefusesTimesPastTheClock) {
  // 1e300 s used to become INT64_MIN ns: a negative forward time.
  EXPECT_EQ(from_seconds(1.5), 1500000000);
  EXPECT_EQ(from_seconds(9.2e9), 9200000000000000000);
  const std::string err = error_of([] { from_seconds(1e300); });
  EXPECT_NE(err.find("1e+300 s is outside the emulated clock's range"), std::string::npos) << err;
  EXPECT_NE(error_of([] { from_seconds(std::numeric_limits<double>::quiet_NaN()); }), "");
  EXPECT_NE(error_of([] { from_ms(-1e20); }), "");
  EXPECT_NE(error_of([] { from_us(std::numeric_limits<double>::infinity()); }), "");
}

TEST(Checked, CheckedDurationNamesTheInputAndTheLimit) {
  EXPECT_EQ(checked_duration(2.0, "x"), 2 * kSecond);
  EXPECT_EQ(
      error_of([] { checked_duration(2e6, "train.computation_time"); }),
      "train.computation_time = 2e+06 s is beyond the limit; expected a finite number of seconds from 0 to 1e+06");
  EXPECT_NE(error_of([] { checked_duration(-1, "t"); }).find("is negative"), std::string::npos);
  EXPECT_NE(error_of([] { checked_duration(std::nan(""), "t"); }).find("not a finite number"), std::string::npos);
}

TEST(Checked, SizeArithmeticRefusesToWrap) {
  EXPECT_EQ(checked_mul(1u << 20, 1u << 20, "x"), std::uint64_t{1} << 40);
  const std::string err = error_of([] { checked_mul(std::uint64_t{1} << 63, 4096, "shape"); });
  EXPECT_NE(err.find("shape: 9223372036854775808 x 4096 does not fit in 64 bits"), std::string::npos) << err;
  EXPECT_NE(error_of([] { checked_add(std::numeric_limits<std::uint64_t>::max(), 1, "end"); }), "");
}

TEST(Checked, SaturatingAddHoldsAtTheEnds) {
  EXPECT_EQ(saturating_add(kTimeInfinity, kSecond), kTimeInfinity);
  EXPECT_EQ(saturating_add(5, 6), 11);
  EXPECT_EQ(saturating_add(std::numeric_limits<Time>::min(), -1), std::numeric_limits<Time>::min());
}

}  // namespace
}  // namespace gpemu
