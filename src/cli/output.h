// Output helpers shared by the subcommands: aligned tables for people, a
// progress bar drawn only on a terminal, and common formatting.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gpemu/timeline.h"
#include "gpemu/trace.h"

namespace gpemu::cli {

// A table with a header row; columns are aligned, numbers right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Two-column "key  value" listing.
void print_summary(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& rows);

// A progress bar on stderr, drawn only when stderr is a terminal.
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
};

double mib(std::uint64_t bytes);

// Output files named on the command line (--trace, --report; empty strings
// skipped), checked before a run starts: the folder exists and is writable
// and the path is not a folder. InputError with the path and the OS reason.
void check_output_paths(const std::vector<std::string>& paths);

// Writes the timeline's Chrome trace to `path` through a temporary file in the
// same folder, renamed into place only when every byte was written; an
// Error with the path and the OS reason otherwise.
void write_trace_file(const std::string& path, Timeline& timeline, const std::vector<TraceDeviceName>& devices);
std::string fixed(double v, int decimals);

}  // namespace gpemu::cli
