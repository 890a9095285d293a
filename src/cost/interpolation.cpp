// Replaying a measured series at any batch size: exact where measured, linear
// between measured sizes, and linear beyond them.
#include <algorithm>
#include <cmath>

#include "cost/units.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {

std::string_view to_string(Provenance p) {
  switch (p) {
    case Provenance::Measured: return "measured";
    case Provenance::Interpolated: return "interpolated";
    case Provenance::Extrapolated: return "extrapolated";
    case Provenance::Estimated: return "estimated";
  }
  return "unknown";
}

namespace {

// Least-squares slope of a line forced through `anchor`, over `window`. Forcing
// it through the edge point keeps lookup() continuous where measurement ends;
// fitting the slope to several points keeps one noisy neighbour from tilting it
// (consecutive GPEmu rows differ by +-30% in slope).
double anchored_slope(std::span<const ProfilePoint> window, const ProfilePoint& anchor) {
  double sxy = 0, sxx = 0;
  for (const ProfilePoint& p : window) {
    double dx = static_cast<double>(p.batch_size) - anchor.batch_size;
    sxy += dx * (p.value - anchor.value);
    sxx += dx * dx;
  }
  return sxx > 0 ? sxy / sxx : 0;
}

SeriesValue extrapolate(std::span<const ProfilePoint> window, const ProfilePoint& anchor, int batch_size) {
  double value;
  if (window.size() == 1) {
    // One point gives no slope; time and memory both grow with the batch, and
    // proportional scaling is the assumption that needs no second point.
    value = anchor.value * static_cast<double>(batch_size) / anchor.batch_size;
  } else {
    value = anchor.value + anchored_slope(window, anchor) * (static_cast<double>(batch_size) - anchor.batch_size);
  }
  return {std::max(0.0, value), Provenance::Extrapolated};
}

}  // namespace

SeriesValue lookup(std::span<const ProfilePoint> series, int batch_size) {
  cost_detail::require_batch_size(batch_size);
  if (series.empty()) throw InputError("cannot look up a batch size in an empty profile series");

  auto it = std::lower_bound(series.begin(), series.end(), batch_size,
                             [](const ProfilePoint& p, int b) { return p.batch_size < b; });
  if (it != series.end() && it->batch_size == batch_size) return {it->value, Provenance::Measured};

  std::size_t n = series.size();
  std::size_t k = std::min(n, kExtrapolationWindow);
  if (it == series.end()) return extrapolate(series.subspan(n - k), series.back(), batch_size);
  if (it == series.begin()) return extrapolate(series.first(k), series.front(), batch_size);

  const ProfilePoint& hi = *it;
  const ProfilePoint& lo = *(it - 1);
  double t = static_cast<double>(batch_size - lo.batch_size) / (hi.batch_size - lo.batch_size);
  return {lo.value + t * (hi.value - lo.value), Provenance::Interpolated};
}

}  // namespace gpemu
