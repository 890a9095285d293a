// The union of busy intervals kept in bounded memory (report/busy_union.h):
// exact against the sorted union of report.h while its intervals fit, and
// still exact, in bounded memory, when they arrive in time order past that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gpemu/report.h"
#include "report/busy_union.h"

namespace gpemu {
namespace {

// Busy ns per window from report.h's sorted union (the reference).
std::vector<Duration> reference(const std::vector<BusyInterval>& spans, Time end, Duration window) {
  std::vector<Duration> out;
  for (const UtilizationSample& u : utilization_from_intervals("GPU", spans, window, 0, end).samples) {
    const Time w0 = from_seconds(u.time_s);
    out.push_back(std::llround(u.busy_fraction * static_cast<double>(std::min(w0 + window, end) - w0)));
  }
  return out;
}

// Two jobs' kernels, each job's in time order, every 30 ns one of each that
// may overlap, touch or leave a gap; sent job by job, a step apart.
std::vector<BusyInterval> two_jobs(int n) {
  std::mt19937_64 rng(7);
  auto draw = [&](Time n) { return static_cast<Time>(rng() % static_cast<std::uint64_t>(n + 1)); };
  std::vector<BusyInterval> out;
  for (Time base = 0; base < 30 * static_cast<Time>(n); base += 30) {
    const Time a = base + draw(5), b = base + draw(20);
    out.push_back({a, a + 5 + draw(10)});
    out.push_back({b, b + 1 + draw(6)});
  }
  return out;
}

TEST(BusyUnion, IsTheSortedUnionWhileItsIntervalsFit) {
  const std::vector<BusyInterval> spans = two_jobs(2000);
  BusyUnion u(7);
  Time end = 0;
  for (const BusyInterval& s : spans) u.add(s.start, s.end), end = std::max(end, s.end);
  for (const Duration w : {7, 70, 7000}) EXPECT_EQ(u.busy(end, w), reference(spans, end, w)) << w;
  EXPECT_TRUE(u.busy(0, 7).empty());
}

TEST(BusyUnion, FoldsIntoBinsInBoundedMemoryAndStaysExactForIntervalsInTimeOrder) {
  const std::vector<BusyInterval> spans = two_jobs(20000);
  BusyUnion u(5, /*max_intervals=*/64, /*max_bins=*/1000);
  Time end = 0;
  std::size_t most = 0;
  for (const BusyInterval& s : spans) {
    u.add(s.start, s.end);
    end = std::max(end, s.end);
    most = std::max(most, u.stored());
  }
  EXPECT_LE(most, 64u + 1000u + 1);
  // Bins were doubled (end / 5 > 1000 windows of 5); a window of whole bins is exact.
  const Duration window = 5 * 1024;
  ASSERT_GT(end / 5, 1000);
  EXPECT_EQ(u.busy(end, window), reference(spans, end, window));
  // The total over any window is the union's.
  Duration total = 0, ref = 0;
  for (const Duration d : u.busy(end, 15)) total += d;
  for (const Duration d : reference(spans, end, end)) ref += d;
  EXPECT_EQ(total, ref);
}

}  // namespace
}  // namespace gpemu
