#include "bench_util.h"

#include <time.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gpemu::bench {

std::int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Summary summarize(const std::vector<double>& samples) {
  Summary s;
  if (samples.empty()) return s;
  s.p50 = percentile(samples, 50);
  s.p99 = percentile(samples, 99);
  s.max = *std::max_element(samples.begin(), samples.end());
  s.mean = common::mean(samples);
  return s;
}

std::string fixed(double v, int decimals) {
  if (std::isnan(v)) return "-";
  return fmt::format("{:.{}f}", v, decimals);
}

std::string significant(double v, int digits) {
  if (std::isnan(v)) return "-";
  return fmt::format("{:.{}g}", v, digits);
}

std::string grouped(double v) {
  const long long n = std::llround(v);
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace gpemu::bench
