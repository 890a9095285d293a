// Finding the rows GPEmu extrapolated past the batch sizes that ran out of
// memory. They lie exactly on a straight line (float64 rounding apart), while
// consecutive real measurements never agree in slope to better than ~1e-5;
// three equal slopes in a row inside real data do occur (a few in 60,000
// triples, from timer quantisation) but not at the end of a shared table.
#include <algorithm>
#include <cmath>

#include "gpemu/cost_model.h"

namespace gpemu {

namespace {

double slope(const ProfilePoint& a, const ProfilePoint& b) {
  return (b.value - a.value) / static_cast<double>(b.batch_size - a.batch_size);
}

bool same_slope(double s, double reference, double rel_tolerance) {
  return std::abs(s - reference) <= rel_tolerance * std::max(std::abs(s), std::abs(reference));
}

}  // namespace

std::size_t extrapolated_tail_start(std::span<const ProfilePoint> rows, double rel_tolerance) {
  std::size_t n = rows.size();
  // A tail needs 3 rows (two slopes to compare) and one measured row before it.
  if (n < 4) return n;
  // Every slope of the suffix is compared with the last one, so a slow drift
  // through many almost-equal slopes cannot pass for a line.
  const double reference = slope(rows[n - 2], rows[n - 1]);
  std::size_t start = n - 2;  // rows[start..n-1] are collinear
  while (start > 0 && same_slope(slope(rows[start - 1], rows[start]), reference, rel_tolerance)) --start;
  std::size_t length = n - start;
  if (length < 3 || start == 0) return n;
  return start;
}

}  // namespace gpemu
