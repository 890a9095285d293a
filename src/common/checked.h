// Checked arithmetic for durations and sizes that come from user input
// (profile tables, DLIO time figures, command-line options, file headers).
// The emulated clock is int64 nanoseconds (time.h): a figure past its 292-year
// range, or a size whose product wraps 64 bits, would silently turn into a
// negative time or a tiny allocation check. Here such a figure is an
// InputError naming the input, the value and the limit instead.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/time.h"

namespace gpemu {

// The clock's whole range in seconds (INT64_MAX ns, about 292 years).
inline constexpr double kClockRangeSeconds = 9223372036.854775807;

// The longest single duration an input figure may give: one forward pass, one
// DLIO computation step, one storage latency. 10^6 s is 11.6 days; no step of
// a training loop lasts that long, and figures up to it still leave room to
// sum thousands of them within the clock's range.
inline constexpr double kMaxInputSeconds = 1e6;

// `seconds` as a Duration, or InputError "<what> = <value> s ...; expected a
// finite number of seconds in [0, <limit>]".
inline Duration checked_duration(double seconds, std::string_view what, double limit_s = kMaxInputSeconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > limit_s)
    throw InputError(fmt::format("{} = {:g} s is {}; expected a finite number of seconds from 0 to {:g}", what, seconds,
                                 !std::isfinite(seconds) ? "not a finite number"
                                 : seconds < 0           ? "negative"
                                                         : "beyond the limit",
                                 limit_s));
  return from_seconds(seconds);
}

// a * b for counts and byte sizes; InputError naming `what` when the product
// does not fit in 64 bits.
inline std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw InputError(fmt::format("{}: {} x {} does not fit in 64 bits (limit {})", what, a, b,
                                 std::numeric_limits<std::uint64_t>::max()));
  return out;
}

inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw InputError(fmt::format("{}: {} + {} does not fit in 64 bits (limit {})", what, a, b,
                                 std::numeric_limits<std::uint64_t>::max()));
  return out;
}

// t + d, held at the ends of the clock's range instead of wrapping; for
// deadlines derived from kTimeInfinity or other far-off times.
inline constexpr Time saturating_add(Time t, Duration d) {
  Time out = 0;
  if (__builtin_add_overflow(t, d, &out))
    return d > 0 ? std::numeric_limits<Time>::max() : std::numeric_limits<Time>::min();
  return out;
}

}  // namespace gpemu
