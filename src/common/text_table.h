// An aligned plain-text table for people: a header row, a rule of dashes
// under it, columns separated by two spaces, no trailing spaces. The CLI's
// summaries and the benchmarks' tables both print through it.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace gpemu::common {

class TextTable {
 public:
  // How cells line up.
  enum class Align {
    // Body cells that read as numbers ("12", "-3.5", "+1") right, others and
    // the header left; the rule has one run of dashes per column.
    ByContent,
    // The first `left_columns` columns (header included) left, the rest
    // right; the rule is one unbroken line.
    ByColumn,
  };

  explicit TextTable(std::vector<std::string> header, Align align = Align::ByContent, std::size_t left_columns = 1);
  void add_row(std::vector<std::string> cells);
  void print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;  // rows_[0] is the header
  Align align_;
  std::size_t left_columns_;
};

}  // namespace gpemu::common
