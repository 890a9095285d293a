// Random step times: a time value given as a number of seconds or as a
// distribution (DLIO's computation_time, preprocess_time and eval_time), and a
// seeded sampler that draws the same sequence on every platform.
//
// Thread safety: a TimeSampler belongs to one thread; TimeSpec is a value.
#pragma once

#include <cstdint>

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
