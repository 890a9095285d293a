#include "common/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpemu::common {
namespace {

TEST(Stats, EmptySamplesGiveZero) {
  EXPECT_EQ(mean({}), 0);
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(percentile({}, 50), 0);
  EXPECT_EQ(stdev({}), 0);
}

TEST(Stats, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median({5, 1, 3}), 3);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(Stats, PercentileIsNearestRank) {
  const std::vector<double> v{15, 20, 35, 40, 50};  // Wikipedia's nearest-rank example
  EXPECT_EQ(percentile(v, 5), 15);
  EXPECT_EQ(percentile(v, 30), 20);
  EXPECT_EQ(percentile(v, 40), 20);
  EXPECT_EQ(percentile(v, 50), 35);
  EXPECT_EQ(percentile(v, 100), 50);
  EXPECT_EQ(percentile(v, 0), 15);
}

TEST(Stats, MeanAndPopulationStdev) {
  const std::vector<double> v{2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_EQ(mean(v), 5);
  EXPECT_EQ(stdev(v), 2);
}

}  // namespace
}  // namespace gpemu::common
