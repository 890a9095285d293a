// Per-iteration variation of GPU times. Draws come from a counter-based
// generator (splitmix64 applied to seed, stream and iteration) and Box-Muller,
// not from <random>'s distributions, whose algorithms differ between standard
// libraries; so a seed gives the same nanoseconds everywhere.
#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {

namespace {

// splitmix64's output function (Steele, Lea, Flood 2014): a bijective mixer,
// so distinct inputs never collide.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;

}  // namespace

Variation::Variation(VariationOptions options, std::uint64_t stream)
    : options_(options), stream_(stream) {
  if (!std::isfinite(options.cv) || options.cv < 0)
    throw InputError(fmt::format("variation cv {} is invalid: expected a number >= 0 (0.01 = 1%)", options.cv));
  if (!std::isfinite(options.clip_sigma) || options.clip_sigma <= 0)
    throw InputError(fmt::format("variation clip_sigma {} is invalid: expected a number > 0",
                                 options.clip_sigma));
  if (!std::isfinite(options.warmup_factor) || options.warmup_factor <= 0)
    throw InputError(fmt::format("variation warmup_factor {} is invalid: expected a number > 0 (1 = no "
                                 "warm-up)",
                                 options.warmup_factor));
}

double Variation::standard_normal(std::int64_t iteration) const {
  std::uint64_t key = mix(mix(mix(options_.seed) ^ stream_) ^ static_cast<std::uint64_t>(iteration));
  std::uint64_t a = mix(key);
  std::uint64_t b = mix(a);
  double u1 = static_cast<double>((a >> 11) + 1) * kTwoToMinus53;  // (0, 1]: log stays finite
  double u2 = static_cast<double>(b >> 11) * kTwoToMinus53;        // [0, 1)
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  return std::clamp(z, -options_.clip_sigma, options_.clip_sigma);
}

Duration Variation::sample(Duration mean, std::int64_t iteration) const {
  if (mean < 0) throw InputError(fmt::format("mean duration {} ns is invalid: expected >= 0", mean));
  if (iteration < 0) throw InputError(fmt::format("iteration {} is invalid: expected >= 0", iteration));
  double factor = iteration == 0 ? options_.warmup_factor : 1.0;
  if (options_.cv == 0) return static_cast<Duration>(std::llround(static_cast<double>(mean) * factor));
  double value = static_cast<double>(mean) * factor * (1.0 + options_.cv * standard_normal(iteration));
  return std::max<Duration>(0, static_cast<Duration>(std::llround(value)));
}

}  // namespace gpemu
