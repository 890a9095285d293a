#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpemu::common {

double mean(const std::vector<double>& samples) {
  if (samples.empty()) return 0;
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  return n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
}

double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  rank = std::clamp<std::size_t>(rank, 1, samples.size());
  return samples[rank - 1];
}

double stdev(const std::vector<double>& samples) {
  if (samples.empty()) return 0;
  const double m = mean(samples);
  double sq = 0;
  for (double x : samples) sq += (x - m) * (x - m);
  return std::sqrt(sq / static_cast<double>(samples.size()));
}

}  // namespace gpemu::common
