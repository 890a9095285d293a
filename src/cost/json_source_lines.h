// Line numbers inside a JSON profile document, for error messages:
// nlohmann::json keeps no positions, so a small scanner walks the text again.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpemu::cost_detail {

// Where the parts of a profile document that messages point at begin: the
// top-level keys, each element of "rows" and of "ops", and each key inside
// one. Lines count from 1; an unknown part falls back to the nearest
// enclosing one.
struct SourceLines {
  std::map<std::string, int> top;
  std::vector<int> rows;
  std::vector<std::map<std::string, int>> row_keys;
  std::vector<int> ops;
  std::vector<std::map<std::string, int>> op_keys;

  int of_top(const std::string& key) const {
    auto it = top.find(key);
    return it == top.end() ? 1 : it->second;
  }
  int of_row(std::size_t i) const { return i < rows.size() ? rows[i] : of_top("rows"); }
  int of_row_key(std::size_t i, const std::string& key) const { return key_line(row_keys, i, key, of_row(i)); }
  int of_op(std::size_t i) const { return i < ops.size() ? ops[i] : of_top("ops"); }
  int of_op_key(std::size_t i, const std::string& key) const { return key_line(op_keys, i, key, of_op(i)); }

 private:
  static int key_line(const std::vector<std::map<std::string, int>>& keys, std::size_t i, const std::string& key,
                      int fallback) {
    if (i < keys.size()) {
      auto it = keys[i].find(key);
      if (it != keys[i].end()) return it->second;
    }
    return fallback;
  }
};

// Scans text that is already known to be valid JSON. Values nested below a
// row or an op are skipped without recursion, so any depth is safe.
SourceLines scan_source_lines(std::string_view text);

// The deepest a profile document needs is 6 (document, ops, op, shapes, a
// tensor list's shapes, a shape); far deeper text is refused before any
// recursive code sees it.
inline constexpr int kMaxJsonNesting = 64;

// The 1-based line where the nesting of arrays and objects first goes past
// `limit`, or 0 when it never does. Brackets inside strings do not count.
int line_past_nesting(std::string_view text, int limit);

// The 1-based line of the first occurrence of `token` outside any string,
// or 1 when it is not found (for errors that give no position).
int line_of_token(std::string_view text, std::string_view token);

}  // namespace gpemu::cost_detail
