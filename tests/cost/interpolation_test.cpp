// lookup(): exact replay at measured batch sizes, linear interpolation between
// them, linear extrapolation beyond them, each flagged with its provenance.
#include <gtest/gtest.h>

#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {
namespace {

TEST(Provenance, HasReadableNames) {
  EXPECT_EQ(to_string(Provenance::Measured), "measured");
  EXPECT_EQ(to_string(Provenance::Interpolated), "interpolated");
  EXPECT_EQ(to_string(Provenance::Extrapolated), "extrapolated");
  EXPECT_EQ(to_string(Provenance::Estimated), "estimated");
}

TEST(Lookup, ReplaysAMeasuredBatchSizeExactly) {
  Series s{{1, 0.010823577642440796}, {2, 0.011455714702606201}, {4, 0.01127612590789795}};
  SeriesValue v = lookup(s, 2);
  EXPECT_EQ(v.value, 0.011455714702606201);
  EXPECT_EQ(v.provenance, Provenance::Measured);
  EXPECT_EQ(lookup(s, 1).value, 0.010823577642440796);
  EXPECT_EQ(lookup(s, 4).value, 0.01127612590789795);
}

TEST(Lookup, InterpolatesLinearlyBetweenMeasuredSizes) {
  Series s{{16, 1.0}, {32, 3.0}, {64, 4.0}};
  SeriesValue mid = lookup(s, 24);
  EXPECT_EQ(mid.value, 2.0);
  EXPECT_EQ(mid.provenance, Provenance::Interpolated);
  EXPECT_EQ(lookup(s, 48).value, 3.5);
  EXPECT_EQ(lookup(s, 40).value, 3.25);
}

TEST(Lookup, ExtrapolatesBeyondTheLastMeasuredSizeAndSaysSo) {
  Series s{{1, 2.0}, {2, 4.0}, {3, 6.0}, {4, 8.0}};
  SeriesValue v = lookup(s, 10);
  EXPECT_DOUBLE_EQ(v.value, 20.0);
  EXPECT_EQ(v.provenance, Provenance::Extrapolated);
}

TEST(Lookup, ExtrapolatedLinePassesThroughTheLastPointWithALeastSquaresSlope) {
  // Slope through (3,5) fitted to (1,1), (2,2): (-2*-4 + -1*-3) / (4 + 1) = 2.2.
  Series s{{1, 1.0}, {2, 2.0}, {3, 5.0}};
  EXPECT_DOUBLE_EQ(lookup(s, 5).value, 5.0 + 2 * 2.2);
}

TEST(Lookup, ExtrapolationUsesOnlyTheNearestPoints) {
  // Rows far from the edge (value 100) must not tilt the line through the last
  // kExtrapolationWindow rows, which lie on y = 3b.
  Series s;
  for (int b = 1; b <= 20; ++b) s.push_back({b, b > 20 - static_cast<int>(kExtrapolationWindow) ? 3.0 * b : 100.0});
  EXPECT_DOUBLE_EQ(lookup(s, 30).value, 90.0);
}

TEST(Lookup, ExtrapolatesBelowTheFirstMeasuredSizeAndClampsAtZero) {
  Series s{{8, 8.0}, {16, 12.0}};
  SeriesValue v = lookup(s, 4);
  EXPECT_DOUBLE_EQ(v.value, 6.0);
  EXPECT_EQ(v.provenance, Provenance::Extrapolated);
  Series steep{{2, 1.0}, {4, 5.0}};
  EXPECT_EQ(lookup(steep, 1).value, 0.0);
}

TEST(Lookup, ASinglePointScalesProportionally) {
  Series s{{10, 5.0}};
  EXPECT_DOUBLE_EQ(lookup(s, 20).value, 10.0);
  EXPECT_DOUBLE_EQ(lookup(s, 5).value, 2.5);
  EXPECT_EQ(lookup(s, 20).provenance, Provenance::Extrapolated);
  EXPECT_EQ(lookup(s, 10).provenance, Provenance::Measured);
}

TEST(Lookup, RejectsBatchSizesBelowOneAndEmptySeries) {
  Series s{{1, 1.0}};
  EXPECT_THROW(lookup(s, 0), InputError);
  EXPECT_THROW(lookup(s, -3), InputError);
  EXPECT_THROW(lookup(Series{}, 1), InputError);
}

}  // namespace
}  // namespace gpemu
