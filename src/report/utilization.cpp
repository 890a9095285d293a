// Busy intervals -> bucketed utilization series.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/report.h"

namespace gpemu {

UtilizationSeries utilization_from_intervals(std::string gpu, std::span<const BusyInterval> busy, Duration bucket,
                                             Time begin, std::optional<Time> end) {
  if (bucket <= 0) {
    throw InputError(
        fmt::format("utilization bucket width for '{}' must be a positive number of ns, got {}", gpu, bucket));
  }
  Time stop = begin;
  if (end) {
    stop = *end;
  } else {
    for (const BusyInterval& iv : busy) {
      if (iv.end > iv.start) stop = std::max(stop, iv.end);
    }
  }
  if (stop < begin) {
    throw InputError(
        fmt::format("utilization window for '{}' ends ({} ns) before it begins ({} ns)", gpu, stop, begin));
  }

  // Clip to [begin, stop), drop empty ones, sort and merge overlaps so that
  // time covered by two intervals counts once.
  std::vector<BusyInterval> merged;
  merged.reserve(busy.size());
  for (const BusyInterval& iv : busy) {
    Time s = std::max(iv.start, begin);
    Time e = std::min(iv.end, stop);
    if (e > s) merged.push_back({s, e});
  }
  std::sort(merged.begin(), merged.end(),
            [](const BusyInterval& a, const BusyInterval& b) { return a.start < b.start; });
  std::size_t n = 0;
  for (const BusyInterval& iv : merged) {
    if (n > 0 && iv.start <= merged[n - 1].end) {
      merged[n - 1].end = std::max(merged[n - 1].end, iv.end);
    } else {
      merged[n++] = iv;
    }
  }
  merged.resize(n);

  UtilizationSeries series;
  series.gpu = std::move(gpu);
  series.end_s = to_seconds(stop);
  const Duration span = stop - begin;
  const std::int64_t buckets = span / bucket + (span % bucket != 0 ? 1 : 0);
  series.samples.reserve(static_cast<std::size_t>(buckets));

  // One sweep: intervals are disjoint and sorted, buckets are visited in order.
  std::size_t i = 0;
  for (std::int64_t k = 0; k < buckets; ++k) {
    const Time b0 = begin + k * bucket;
    const Time b1 = std::min(b0 + bucket, stop);
    Duration busy_ns = 0;
    while (i < merged.size() && merged[i].end <= b0) ++i;
    for (std::size_t j = i; j < merged.size() && merged[j].start < b1; ++j) {
      busy_ns += std::min(merged[j].end, b1) - std::max(merged[j].start, b0);
    }
    series.samples.push_back({to_seconds(b0), static_cast<double>(busy_ns) / static_cast<double>(b1 - b0)});
  }
  return series;
}

}  // namespace gpemu
