#include "gpemu/time.h"

#include <cmath>

#include "common/random.h"

namespace gpemu {

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  return common::mix64(seed ^ (a * common::kGoldenGamma) ^ (b * 0xC2B2AE3D27D4EB4Full));
}

double TimeSpec::expected() const {
  switch (distribution) {
    case TimeDistribution::Normal: return mean;
    case TimeDistribution::Uniform: return (min + max) / 2;
    case TimeDistribution::Gamma: return shape * scale;
    case TimeDistribution::Exponential: return scale;
    case TimeDistribution::Poisson: return lam;
  }
  return mean;
}

TimeSpec TimeSpec::constant(double seconds) {
  TimeSpec t;
  t.mean = seconds;
  return t;
}

// --- TimeSampler ---------------------------------------------------------------

TimeSampler::TimeSampler(const TimeSpec& spec, std::uint64_t seed) : spec_(spec), state_(seed) {}

bool TimeSampler::constant() const { return spec_.distribution == TimeDistribution::Normal && spec_.stdev == 0; }

double TimeSampler::uniform01() {
  // 53 random bits in (0, 1] (common::unit_midpoint): never 0, so logarithms are finite.
  return common::unit_midpoint(common::next_splitmix64(state_));
}

double TimeSampler::normal01() {
  const double u1 = uniform01(), u2 = uniform01();
  return common::box_muller(u1, u2);
}

double TimeSampler::next_seconds() {
  double v = 0;
  switch (spec_.distribution) {
    case TimeDistribution::Normal: v = spec_.stdev > 0 ? spec_.mean + spec_.stdev * normal01() : spec_.mean; break;
    case TimeDistribution::Uniform: v = spec_.min + (spec_.max - spec_.min) * uniform01(); break;
    case TimeDistribution::Exponential: v = -spec_.scale * std::log(uniform01()); break;
    case TimeDistribution::Gamma: {
      // Marsaglia and Tsang; shape < 1 through gamma(shape + 1) * U^(1/shape).
      const double k = spec_.shape;
      if (k <= 0 || spec_.scale <= 0) {
        v = 0;
        break;
      }
      const double kk = k < 1 ? k + 1 : k;
      const double d = kk - 1.0 / 3, c = 1.0 / std::sqrt(9 * d);
      double g = 0;
      for (;;) {
        const double x = normal01();
        double t = 1 + c * x;
        if (t <= 0) continue;
        t = t * t * t;
        const double u = uniform01();
        if (std::log(u) < 0.5 * x * x + d - d * t + d * std::log(t)) {
          g = d * t;
          break;
        }
      }
      if (k < 1) g *= std::pow(uniform01(), 1.0 / k);
      v = g * spec_.scale;
      break;
    }
    case TimeDistribution::Poisson: {
      const double lam = spec_.lam;
      if (lam <= 0) {
        v = 0;
      } else if (lam < 30) {
        const double limit = std::exp(-lam);
        double p = uniform01();
        int n = 0;
        while (p > limit) {
          p *= uniform01();
          ++n;
        }
        v = n;
      } else {
        v = std::round(lam + std::sqrt(lam) * normal01());
      }
      break;
    }
  }
  return v > 0 && std::isfinite(v) ? v : 0.0;
}

}  // namespace gpemu
