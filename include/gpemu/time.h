// Emulated time. All times on an emulated timeline are integer nanoseconds
// since the clock's epoch (the moment the clock was created). 64 bits hold 292
// years, and integers keep virtual-clock runs bit-for-bit deterministic.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "gpemu/error.h"

namespace gpemu {

using Time = std::int64_t;      // ns since the clock's epoch
using Duration = std::int64_t;  // ns

inline constexpr Duration kNanosecond = 1;
inline constexpr Duration kMicrosecond = 1000;
inline constexpr Duration kMillisecond = 1000 * kMicrosecond;
inline constexpr Duration kSecond = 1000 * kMillisecond;
inline constexpr Time kTimeInfinity = INT64_MAX;

// A figure that does not fit the clock (non-finite, or past +-2^63 ns) has no
// Duration; converting it used to wrap to a negative time. Inputs are checked
// with a named limit at their boundary (checked.h); this is the last guard.
[[noreturn]] inline void throw_outside_clock(double value, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof text, "%g %s", value, unit);
  throw InputError(std::string(text) + " is outside the emulated clock's range of +-9.22e9 s (292 years)");
}
inline Duration ns_from_double(double ns, double value, const char* unit) {
  if (!(std::fabs(ns) < 9.2233720368547748e18)) throw_outside_clock(value, unit);
  return static_cast<Duration>(std::llround(ns));
}
inline Duration from_seconds(double s) { return ns_from_double(s * 1e9, s, "s"); }
inline Duration from_ms(double ms) { return ns_from_double(ms * 1e6, ms, "ms"); }
inline Duration from_us(double us) { return ns_from_double(us * 1e3, us, "us"); }
inline constexpr double to_seconds(Duration d) { return static_cast<double>(d) * 1e-9; }
inline constexpr double to_ms(Duration d) { return static_cast<double>(d) * 1e-6; }
inline constexpr double to_us(Duration d) { return static_cast<double>(d) * 1e-3; }

}  // namespace gpemu
