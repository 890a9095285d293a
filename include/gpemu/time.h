// Time on gpemu's two clocks (integer nanoseconds) and random step times.
//
// Sections: time, time distribution.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "gpemu/error.h"

// ==== time ====
//
// Emulated time. All times on an emulated timeline are integer nanoseconds
// since the clock's epoch (the moment the clock was created). 64 bits hold 292
// years, and integers keep virtual-clock runs bit-for-bit deterministic.

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

// ==== time distribution ====
//
// Random step times: a time value given as a number of seconds or as a
// distribution (DLIO's computation_time, preprocess_time and eval_time), and a
// seeded sampler that draws the same sequence on every platform.
//
// Thread safety: a TimeSampler belongs to one thread; TimeSpec is a value.

namespace gpemu {

enum class TimeDistribution { Normal, Uniform, Gamma, Exponential, Poisson };

// A DLIO time value (computation_time, preprocess_time, eval_time): a number of
// seconds, or a distribution given as a map (`{mean, stdev}`, `{type: uniform,
// min, max}`, `{type: gamma, shape, scale}`, `{type: exponential, scale}`,
// `{type: poisson, lam}`). A plain number is a normal distribution with
// stdev 0; the `*_stdev` sibling keys set `stdev`.
struct TimeSpec {
  TimeDistribution distribution = TimeDistribution::Normal;
  double mean = 0;
  double stdev = 0;
  double min = 0, max = 0;      // uniform
  double shape = 0, scale = 0;  // gamma (shape, scale), exponential (scale)
  double lam = 0;               // poisson
  // The expected value in seconds.
  double expected() const;
  static TimeSpec constant(double seconds);
  bool operator==(const TimeSpec&) const = default;
};

// Draws of a TimeSpec, seeded: the same (spec, seed) gives the same sequence
// on every platform. Negative draws are clipped to 0.
class TimeSampler {
 public:
  TimeSampler(const TimeSpec& spec, std::uint64_t seed);
  double next_seconds();
  bool constant() const;  // always the same value (normal with stdev 0)

 private:
  double uniform01();
  double normal01();
  TimeSpec spec_;
  std::uint64_t state_;
};

// A seed for stream (a, b) of a run seeded `seed` (splitmix64 finaliser).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b);

}  // namespace gpemu
