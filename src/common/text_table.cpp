#include "common/text_table.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace gpemu::common {

namespace {

bool numeric(const std::string& s) {
  return !s.empty() &&
         (std::isdigit(static_cast<unsigned char>(s[0])) ||
          (s.size() > 1 && (s[0] == '-' || s[0] == '+') && std::isdigit(static_cast<unsigned char>(s[1]))));
}

}  // namespace

TextTable::TextTable(std::vector<std::string> header, Align align, std::size_t left_columns)
    : align_(align), left_columns_(left_columns) {
  rows_.push_back(std::move(header));
}

void TextTable::add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

void TextTable::print(std::ostream& out) const {
  std::size_t ncols = 0;
  for (const auto& r : rows_) ncols = std::max(ncols, r.size());
  std::vector<std::size_t> width(ncols, 0);
  for (const auto& r : rows_)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto right_aligned = [&](std::size_t column, const std::string& cell, bool header) {
    if (align_ == Align::ByColumn) return column >= left_columns_;
    return !header && numeric(cell);
  };
  auto line = [&](const std::vector<std::string>& r, bool header) {
    std::string s;
    for (std::size_t c = 0; c < ncols; ++c) {
      const std::string cell = c < r.size() ? r[c] : std::string();
      if (c > 0) s += "  ";
      s += right_aligned(c, cell, header) ? fmt::format("{:>{}}", cell, width[c])
                                          : fmt::format("{:<{}}", cell, width[c]);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << '\n';
  };
  line(rows_[0], true);
  std::string rule;
  for (std::size_t c = 0; c < ncols; ++c) {
    if (c > 0) rule += align_ == Align::ByColumn ? "--" : "  ";
    rule += std::string(width[c], '-');
  }
  out << rule << '\n';
  for (std::size_t i = 1; i < rows_.size(); ++i) line(rows_[i], false);
}

}  // namespace gpemu::common
