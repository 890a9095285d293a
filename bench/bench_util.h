// Small helpers shared by the benchmarks in bench/: summary statistics of
// samples, a host monotonic clock and thread CPU time, and an aligned text
// table for the print_*_bench functions.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/stats.h"
#include "common/text_table.h"

namespace gpemu::bench {

// Nanoseconds of CLOCK_MONOTONIC (the same clock RealClock reads).
std::int64_t monotonic_ns();
// CPU time consumed so far by the calling thread, in nanoseconds.
std::int64_t thread_cpu_ns();

// The p-th percentile (0..100) of samples, nearest rank; 0 for an empty vector.
using common::percentile;

struct Summary {
  double p50 = 0, p99 = 0, max = 0, mean = 0;
};
Summary summarize(const std::vector<double>& samples);

// The benchmarks' tables: the first `left_columns` columns (text) left-aligned,
// the others (numbers) right-aligned, an unbroken rule under the header
// (common::TextTable).
class Table : public common::TextTable {
 public:
  explicit Table(std::vector<std::string> header, std::size_t left_columns = 1)
      : TextTable(std::move(header), Align::ByColumn, left_columns) {}
};

// Formats a number with `decimals` decimals, "-" for a missing (NaN) value.
std::string fixed(double v, int decimals);
// A number with `digits` significant digits ("2.3e-06", "10.2"), "-" for NaN.
std::string significant(double v, int digits);
// 1234567 -> "1,234,567".
std::string grouped(double v);

// `s` quoted for the shell ('it'\''s').
std::string shell_quote(const std::string& s);

// A command run through the shell (popen) by a benchmark that drives another
// program (torch's DataLoader, `gpemu torch`): its wait status and the last
// line of its standard output that starts with '{' (the JSON result the
// scripts print last). started is false when the shell could not be started.
struct CommandOutput {
  bool started = false;
  int status = -1;
  std::string last_json_line;
  bool succeeded() const;  // exited with status 0
};
CommandOutput run_command(const std::string& command);

}  // namespace gpemu::bench
