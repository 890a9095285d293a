// Per-iteration variation of GPU times. Draws come from a counter-based
// generator (splitmix64 applied to seed, stream and iteration) and Box-Muller,
// not from <random>'s distributions, whose algorithms differ between standard
// libraries; so a seed gives the same nanoseconds everywhere.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/random.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {

Variation::Variation(VariationOptions options, std::uint64_t stream) : options_(options), stream_(stream) {
  if (!std::isfinite(options.cv) || options.cv < 0)
    throw InputError(fmt::format("variation cv {} is invalid: expected a number >= 0 (0.01 = 1%)", options.cv));
  if (!std::isfinite(options.clip_sigma) || options.clip_sigma <= 0)
    throw InputError(fmt::format("variation clip_sigma {} is invalid: expected a number > 0", options.clip_sigma));
  if (!std::isfinite(options.warmup_factor) || options.warmup_factor <= 0)
    throw InputError(
        fmt::format("variation warmup_factor {} is invalid: expected a number > 0 (1 = no "
                    "warm-up)",
                    options.warmup_factor));
}

double Variation::standard_normal(std::int64_t iteration) const {
  using common::splitmix64;
  std::uint64_t key =
      splitmix64(splitmix64(splitmix64(options_.seed) ^ stream_) ^ static_cast<std::uint64_t>(iteration));
  std::uint64_t a = splitmix64(key);
  std::uint64_t b = splitmix64(a);
  double z = common::box_muller(common::unit_open_closed(a), common::unit_closed_open(b));
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
