// Output helpers shared by the subcommands: aligned tables for people, a
// progress bar drawn only on a terminal, and common formatting.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/text_table.h"

namespace gpemu::cli {

// The CLI's tables: numbers right-aligned, text left (common::TextTable).
class Table : public common::TextTable {
 public:
  explicit Table(std::vector<std::string> header) : TextTable(std::move(header), Align::ByContent) {}
  void add(std::vector<std::string> row) { add_row(std::move(row)); }
};

// Two-column "key  value" listing.
void print_summary(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& rows);

// A progress bar on stderr, drawn only when stderr is a terminal.
// One progress line: label, bar, percent, done/total and, once something is
// done, the time left at the rate so far ("~3.2 h left"), so a run that
// would take years says so at once (QA H3).
std::string progress_text(const std::string& label, std::int64_t done, std::int64_t total, double elapsed_s);

class ProgressBar {
 public:
  ProgressBar(std::string label, std::int64_t total);
  ~ProgressBar();
  void update(std::int64_t done);
  void finish();

 private:
  std::string label_;
  std::int64_t total_;
  bool enabled_;
  int last_permille_ = -1;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

double mib(std::uint64_t bytes);

// "gpemu: warning: <line>" on stderr for each line (what a loader skipped).
void print_warnings(const std::vector<std::string>& lines);

std::string fixed(double v, int decimals);

}  // namespace gpemu::cli
