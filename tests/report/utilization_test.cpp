// utilization_from_intervals: exact fractions on hand examples.
#include <gtest/gtest.h>

#include <vector>

#include "gpemu/error.h"
#include "gpemu/report.h"

namespace gpemu {
namespace {

std::vector<double> fractions(const UtilizationSeries& s) {
  std::vector<double> f;
  for (const UtilizationSample& u : s.samples) f.push_back(u.busy_fraction);
  return f;
}

std::vector<double> times(const UtilizationSeries& s) {
  std::vector<double> t;
  for (const UtilizationSample& u : s.samples) t.push_back(u.time_s);
  return t;
}

TEST(Utilization, IntervalStraddlingBucketsSplitsExactly) {
  std::vector<BusyInterval> busy = {{500, 2500}};
  UtilizationSeries s = utilization_from_intervals("GPU 0", busy, 1000, 0, 3000);
  EXPECT_EQ(s.gpu, "GPU 0");
  EXPECT_EQ(fractions(s), (std::vector<double>{0.5, 1.0, 0.5}));
  EXPECT_EQ(times(s), (std::vector<double>{to_seconds(0), to_seconds(1000), to_seconds(2000)}));
  EXPECT_EQ(s.end_s, to_seconds(3000));
}

TEST(Utilization, SeveralIntervalsInOneBucketAdd) {
  std::vector<BusyInterval> busy = {{100, 200}, {300, 400}, {900, 1300}};
  UtilizationSeries s = utilization_from_intervals("g", busy, 1000, 0, 2000);
  EXPECT_EQ(fractions(s), (std::vector<double>{0.3, 0.3}));
}

TEST(Utilization, OverlapsCountOnce) {
  // Two streams busy at once are one busy GPU.
  std::vector<BusyInterval> busy = {{0, 600}, {400, 1000}, {1200, 1400}, {1250, 1300}};
  UtilizationSeries s = utilization_from_intervals("g", busy, 1000, 0, 2000);
  EXPECT_EQ(fractions(s), (std::vector<double>{1.0, 0.2}));
}

TEST(Utilization, UnsortedEmptyAndReversedIntervals) {
  std::vector<BusyInterval> busy = {{1500, 1750}, {200, 200}, {900, 100}, {0, 250}};
  UtilizationSeries s = utilization_from_intervals("g", busy, 1000, 0, 2000);
  EXPECT_EQ(fractions(s), (std::vector<double>{0.25, 0.25}));
}

TEST(Utilization, LastBucketIsCutAtEnd) {
  // Buckets [0,1000) [1000,2000) [2000,2500): the last is 500 ns long.
  std::vector<BusyInterval> busy = {{0, 1000}, {2000, 2250}};
  UtilizationSeries s = utilization_from_intervals("g", busy, 1000, 0, 2500);
  EXPECT_EQ(fractions(s), (std::vector<double>{1.0, 0.0, 0.5}));
  EXPECT_EQ(s.end_s, to_seconds(2500));
}

TEST(Utilization, EndDefaultsToLatestIntervalEnd) {
  std::vector<BusyInterval> busy = {{0, 500}, {1500, 3000}};
  UtilizationSeries s = utilization_from_intervals("g", busy, 1000);
  EXPECT_EQ(fractions(s), (std::vector<double>{0.5, 0.5, 1.0}));
  EXPECT_EQ(s.end_s, to_seconds(3000));
}

TEST(Utilization, WindowClipsIntervals) {
  std::vector<BusyInterval> busy = {{0, 1500}, {2800, 5000}};
  UtilizationSeries s = utilization_from_intervals("g", busy, 1000, 1000, 3000);
  EXPECT_EQ(fractions(s), (std::vector<double>{0.5, 0.2}));
  EXPECT_EQ(times(s), (std::vector<double>{to_seconds(1000), to_seconds(2000)}));
}

TEST(Utilization, SecondBucketsOverMillisecondIntervals) {
  // A training loop: 30 ms of compute every 40 ms for 2 s; 1 s buckets.
  std::vector<BusyInterval> busy;
  for (Time t = 0; t < 2 * kSecond; t += 40 * kMillisecond) busy.push_back({t, t + 30 * kMillisecond});
  UtilizationSeries s = utilization_from_intervals("g", busy, kSecond, 0, 2 * kSecond);
  EXPECT_EQ(fractions(s), (std::vector<double>{0.75, 0.75}));
  EXPECT_EQ(times(s), (std::vector<double>{0.0, to_seconds(kSecond)}));
}

TEST(Utilization, BusyTimeIsConserved) {
  // Irregular intervals, bucket width not dividing anything: the per-bucket
  // busy ns add back up to the total busy ns.
  std::vector<BusyInterval> busy;
  Time t = 7;
  Duration total = 0;
  for (int i = 0; i < 200; ++i) {
    Duration len = 13 + (i * 37) % 101;
    busy.push_back({t, t + len});
    total += len;
    t += len + (i * 53) % 29;
  }
  UtilizationSeries s = utilization_from_intervals("g", busy, 97, 0, t);
  Duration sum = 0;
  for (std::size_t k = 0; k < s.samples.size(); ++k) {
    Time b0 = static_cast<Time>(k) * 97;
    Time b1 = std::min<Time>(b0 + 97, t);
    double ns = s.samples[k].busy_fraction * static_cast<double>(b1 - b0);
    sum += std::llround(ns);
    EXPECT_GE(s.samples[k].busy_fraction, 0.0);
    EXPECT_LE(s.samples[k].busy_fraction, 1.0);
  }
  EXPECT_EQ(sum, total);
}

TEST(Utilization, NoIntervalsGivesEmptySeries) {
  UtilizationSeries s = utilization_from_intervals("g", {}, 1000);
  EXPECT_TRUE(s.samples.empty());
  EXPECT_EQ(s.end_s, 0.0);
  // With an explicit window, the GPU was idle throughout.
  UtilizationSeries idle = utilization_from_intervals("g", {}, 1000, 0, 2000);
  EXPECT_EQ(fractions(idle), (std::vector<double>{0.0, 0.0}));
}

TEST(Utilization, BadArgumentsThrow) {
  std::vector<BusyInterval> busy = {{0, 10}};
  EXPECT_THROW(utilization_from_intervals("g", busy, 0), InputError);
  EXPECT_THROW(utilization_from_intervals("g", busy, -5), InputError);
  EXPECT_THROW(utilization_from_intervals("g", busy, 10, 100, 50), InputError);
}

}  // namespace
}  // namespace gpemu
