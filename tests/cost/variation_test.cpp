// Variation: seeded per-iteration noise around a mean and a slower first
// iteration.
#include <cmath>

#include <gtest/gtest.h>

#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {
namespace {

constexpr Duration kMean = 100 * kMillisecond;

TEST(Variation, DefaultsAreOnePercentFourSigmaAndOnePointFiveWarmUp) {
  VariationOptions o;
  EXPECT_EQ(o.cv, 0.01);
  EXPECT_EQ(o.clip_sigma, 4.0);
  EXPECT_EQ(o.warmup_factor, 1.5);
}

TEST(Variation, SameSeedGivesTheSameSamples) {
  Variation a({.seed = 42}), b({.seed = 42});
  for (std::int64_t i = 0; i < 1000; ++i) EXPECT_EQ(a.sample(kMean, i), b.sample(kMean, i));
}

TEST(Variation, SamplesArePinnedAcrossPlatforms) {
  // splitmix64 + Box-Muller in plain double arithmetic: these nanoseconds must
  // not change with the compiler or standard library.
  Variation v({.seed = 42});
  EXPECT_EQ(v.sample(kMean, 1), 99133529);
  EXPECT_EQ(v.sample(kMean, 2), 100483467);
  EXPECT_EQ(v.sample(kMean, 3), 102066177);
}

TEST(Variation, SeedsAndStreamsGiveIndependentSamples) {
  Variation a({.seed = 1}), b({.seed = 2}), c({.seed = 1}, /*stream=*/7);
  int same_ab = 0, same_ac = 0;
  for (std::int64_t i = 1; i <= 100; ++i) {
    same_ab += a.sample(kMean, i) == b.sample(kMean, i);
    same_ac += a.sample(kMean, i) == c.sample(kMean, i);
  }
  EXPECT_LT(same_ab, 5);
  EXPECT_LT(same_ac, 5);
}

TEST(Variation, ZeroCvGivesTheMeanExactly) {
  Variation v({.cv = 0, .seed = 9});
  for (std::int64_t i = 1; i < 100; ++i) EXPECT_EQ(v.sample(kMean, i), kMean);
  EXPECT_EQ(v.sample(123456789, 5), 123456789);
}

TEST(Variation, WarmUpAppliesToIterationZeroOnly) {
  Variation v({.cv = 0, .warmup_factor = 1.5});
  EXPECT_EQ(v.sample(kMean, 0), 150 * kMillisecond);
  EXPECT_EQ(v.sample(kMean, 1), kMean);
  EXPECT_EQ(v.sample(kMean, 2), kMean);

  // With noise, iteration 0 is 1.5x the draw it would have had without warm-up.
  Variation warm({.seed = 5}), cold({.warmup_factor = 1.0, .seed = 5});
  EXPECT_NEAR(static_cast<double>(warm.sample(kMean, 0)), 1.5 * cold.sample(kMean, 0), 1.0);
  EXPECT_EQ(warm.sample(kMean, 1), cold.sample(kMean, 1));
}

TEST(Variation, TenThousandDrawsHaveTheRequestedMeanAndSpread) {
  for (double cv : {0.01, 0.05}) {
    Variation v({.cv = cv, .seed = 2024});
    const int n = 10000;
    double sum = 0, sum_sq = 0;
    for (std::int64_t i = 1; i <= n; ++i) {
      double x = static_cast<double>(v.sample(kMean, i));
      sum += x;
      sum_sq += x * x;
    }
    double mean = sum / n;
    double stdev = std::sqrt((sum_sq - n * mean * mean) / (n - 1));
    double sd = cv * kMean;
    // About 4 standard errors each: the standard error of the mean is
    // sd/sqrt(n), that of the standard deviation about sd/sqrt(2n).
    EXPECT_NEAR(mean, kMean, 4 * sd / std::sqrt(n)) << "cv " << cv;
    EXPECT_NEAR(stdev, sd, 4 * sd / std::sqrt(2.0 * n)) << "cv " << cv;
  }
}

TEST(Variation, DrawsAreClippedAtTheConfiguredSigma) {
  Variation v({.cv = 0.01, .clip_sigma = 1.0, .seed = 3});
  double lowest = 0, highest = 0;
  for (std::int64_t i = 1; i <= 10000; ++i) {
    double z = v.standard_normal(i);
    lowest = std::min(lowest, z);
    highest = std::max(highest, z);
    Duration s = v.sample(kMean, i);
    EXPECT_GE(s, kMean - kMean / 100);
    EXPECT_LE(s, kMean + kMean / 100);
  }
  EXPECT_EQ(lowest, -1.0);  // about 16% of draws lie beyond each side
  EXPECT_EQ(highest, 1.0);
}

TEST(Variation, RejectsImpossibleSettings) {
  EXPECT_THROW(Variation({.cv = -0.1}), InputError);
  EXPECT_THROW(Variation({.cv = NAN}), InputError);
  EXPECT_THROW(Variation({.clip_sigma = 0}), InputError);
  EXPECT_THROW(Variation({.warmup_factor = 0}), InputError);
  Variation v;
  EXPECT_THROW(v.sample(kMean, -1), InputError);
  EXPECT_THROW(v.sample(-5, 1), InputError);
}

}  // namespace
}  // namespace gpemu
