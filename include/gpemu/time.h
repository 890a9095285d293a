// Emulated time. All times on an emulated timeline are integer nanoseconds
// since the clock's epoch (the moment the clock was created). 64 bits hold 292
// years, and integers keep virtual-clock runs bit-for-bit deterministic.
#pragma once

#include <cmath>
#include <cstdint>

namespace gpemu {

using Time = std::int64_t;      // ns since the clock's epoch
using Duration = std::int64_t;  // ns

inline constexpr Duration kNanosecond = 1;
inline constexpr Duration kMicrosecond = 1000;
inline constexpr Duration kMillisecond = 1000 * kMicrosecond;
inline constexpr Duration kSecond = 1000 * kMillisecond;
inline constexpr Time kTimeInfinity = INT64_MAX;

inline Duration from_seconds(double s) { return static_cast<Duration>(std::llround(s * 1e9)); }
inline Duration from_ms(double ms) { return static_cast<Duration>(std::llround(ms * 1e6)); }
inline Duration from_us(double us) { return static_cast<Duration>(std::llround(us * 1e3)); }
inline constexpr double to_seconds(Duration d) { return static_cast<double>(d) * 1e-9; }
inline constexpr double to_ms(Duration d) { return static_cast<double>(d) * 1e-6; }
inline constexpr double to_us(Duration d) { return static_cast<double>(d) * 1e-3; }

}  // namespace gpemu
