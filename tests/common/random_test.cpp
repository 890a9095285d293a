// The deterministic generators against published reference values, and the
// conversions' intervals at their edges.
#include "common/random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>

namespace gpemu::common {
namespace {

TEST(SplitMix64, MatchesTheReferenceGenerator) {
  // The first outputs of splitmix64 seeded with 0 (Vigna's splitmix64.c).
  std::uint64_t state = 0;
  EXPECT_EQ(next_splitmix64(state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(next_splitmix64(state), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(next_splitmix64(state), 0x06c45d188009454fULL);
  EXPECT_EQ(state, 3 * kGoldenGamma);
}

TEST(SplitMix64, TheMixerIsTheGeneratorsOutput) {
  std::uint64_t state = 12345;
  const std::uint64_t first = splitmix64(12345);
  EXPECT_EQ(next_splitmix64(state), first);
  EXPECT_EQ(next_splitmix64(state), splitmix64(12345 + kGoldenGamma));
}

TEST(MixSeed, DependsOnBothValuesAndTheirOrder) {
  EXPECT_NE(mix_seed(1, 2), mix_seed(2, 1));
  EXPECT_NE(mix_seed(1, 2), mix_seed(1, 3));
  EXPECT_EQ(mix_seed(7, 9), mix_seed(7, 9));
}

TEST(Rng, SameSeedSameStreamOtherSeedOtherStream) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    EXPECT_NE(x, c.next());
  }
}

TEST(Rng, BelowStaysInRangeAndReachesEveryValue) {
  Rng r(1);
  int seen[7] = {};
  for (int i = 0; i < 7000; ++i) {
    const std::uint64_t v = r.below(7);
    ASSERT_LT(v, 7u);
    ++seen[v];
  }
  for (int count : seen) EXPECT_GT(count, 800);  // 1000 expected each
}

TEST(Rng, UniformAndNormalHaveTheirMoments) {
  Rng r(2024);
  const int n = 200000;
  double su = 0, sn = 0, sn2 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    su += u;
    const double z = r.normal();
    sn += z;
    sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.005);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.02);
}

TEST(UnitConversions, CoverTheirIntervalsEdgesIncludedOrNot) {
  const std::uint64_t zero = 0, ones = ~std::uint64_t{0};
  EXPECT_EQ(unit_closed_open(zero), 0.0);
  EXPECT_LT(unit_closed_open(ones), 1.0);
  EXPECT_GT(unit_midpoint(zero), 0.0);
  EXPECT_EQ(unit_midpoint(ones), 1.0);  // 1 - 2^-54 rounds up
  EXPECT_LT(unit_midpoint(ones - (std::uint64_t{1} << 11)), 1.0);
  EXPECT_GT(unit_open_closed(zero), 0.0);
  EXPECT_EQ(unit_open_closed(ones), 1.0);
}

TEST(BoxMuller, IsTheCosineBranch) {
  EXPECT_EQ(box_muller(1.0, 0.3), 0.0);  // log(1) = 0
  EXPECT_DOUBLE_EQ(box_muller(std::exp(-0.5), 0.0), 1.0);
  EXPECT_DOUBLE_EQ(box_muller(std::exp(-0.5), 0.5), -1.0);
  EXPECT_TRUE(std::isfinite(box_muller(unit_open_closed(0), 0.0)));
}

}  // namespace
}  // namespace gpemu::common
