// Line numbers inside a JSON profile document, for error messages:
// nlohmann::json keeps no positions, so a small scanner walks the text again.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpemu::cost_detail {

// Where the parts of a profile document that messages point at begin: the
// top-level keys, each element of "rows", and each key inside a row. Lines
// count from 1; an unknown part falls back to the nearest enclosing one.
struct SourceLines {
  std::map<std::string, int> top;
  std::vector<int> rows;
  std::vector<std::map<std::string, int>> row_keys;

  int of_top(const std::string& key) const {
    auto it = top.find(key);
    return it == top.end() ? 1 : it->second;
  }
  int of_row(std::size_t i) const { return i < rows.size() ? rows[i] : of_top("rows"); }
  int of_row_key(std::size_t i, const std::string& key) const {
    if (i < row_keys.size()) {
      auto it = row_keys[i].find(key);
      if (it != row_keys[i].end()) return it->second;
    }
    return of_row(i);
  }
};

// Scans text that is already known to be valid JSON.
SourceLines scan_source_lines(std::string_view text);

}  // namespace gpemu::cost_detail
