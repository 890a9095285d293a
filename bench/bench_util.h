// Small helpers shared by the benchmarks in bench/: summary statistics of
// samples, a host monotonic clock and thread CPU time, and an aligned text
// table for the print_*_bench functions.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace gpemu::bench {

// Nanoseconds of CLOCK_MONOTONIC (the same clock RealClock reads).
std::int64_t monotonic_ns();
// CPU time consumed so far by the calling thread, in nanoseconds.
std::int64_t thread_cpu_ns();

// The p-th percentile (0..100) of samples, nearest-rank on a sorted copy;
// 0 for an empty vector.
double percentile(std::vector<double> samples, double p);

struct Summary {
  double p50 = 0, p99 = 0, max = 0, mean = 0;
};
Summary summarize(const std::vector<double>& samples);

// An aligned plain-text table: the first `left_columns` columns (text)
// left-aligned, the others (numbers) right-aligned, columns separated by two
// spaces, a rule under the header.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::size_t left_columns = 1);
  void add_row(std::vector<std::string> cells);
  void print(std::ostream& os) const;

 private:
  std::vector<std::vector<std::string>> rows_;  // rows_[0] is the header
  std::size_t left_columns_;
};

// Formats a number with `decimals` decimals, "-" for a missing (NaN) value.
std::string fixed(double v, int decimals);
// A number with `digits` significant digits ("2.3e-06", "10.2"), "-" for NaN.
std::string significant(double v, int digits);
// 1234567 -> "1,234,567".
std::string grouped(double v);

}  // namespace gpemu::bench
