#include "cost/json_source_lines.h"

#include <cctype>

namespace gpemu::cost_detail {

namespace {

class LineScanner {
 public:
  explicit LineScanner(std::string_view text) : s_(text) {}

  SourceLines scan() {
    SourceLines out;
    blank();
    if (peek() == '{') object(0, &out, nullptr);
    return out;
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }

  void blank() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) {
      if (s_[i_] == '\n') ++line_;
      ++i_;
    }
  }

  // JSON strings hold no raw newlines, so no line counting is needed inside.
  std::string string() {
    std::string out;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) ++i_;
      out += s_[i_++];
    }
    ++i_;
    return out;
  }

  // depth 0 is the document; out != nullptr records its top-level keys;
  // keys != nullptr records the keys of an element of "rows" or "ops".
  void object(int depth, SourceLines* out, std::map<std::string, int>* keys) {
    ++i_;
    blank();
    while (peek() != '}' && peek() != '\0') {
      blank();
      int key_line = line_;
      std::string key = string();
      blank();
      ++i_;  // ':'
      blank();
      if (out && depth == 0) out->top[key] = key_line;
      if (keys) (*keys)[key] = key_line;
      if (out && depth == 0 && key == "rows" && peek() == '[')
        elements(out->rows, out->row_keys);
      else if (out && depth == 0 && key == "ops" && peek() == '[')
        elements(out->ops, out->op_keys);
      else
        value(depth + 1);
      blank();
      if (peek() == ',') ++i_;
      blank();
    }
    ++i_;
  }

  // The elements of a top-level array: where each begins, and its keys.
  void elements(std::vector<int>& lines, std::vector<std::map<std::string, int>>& keys) {
    ++i_;
    blank();
    while (peek() != ']' && peek() != '\0') {
      lines.push_back(line_);
      keys.emplace_back();
      if (peek() == '{')
        object(2, nullptr, &keys.back());
      else
        value(2);
      blank();
      if (peek() == ',') ++i_;
      blank();
    }
    ++i_;
  }

  void array(int depth) {
    ++i_;
    blank();
    while (peek() != ']' && peek() != '\0') {
      value(depth + 1);
      blank();
      if (peek() == ',') ++i_;
      blank();
    }
    ++i_;
  }

  // Skips a whole array or object by counting brackets: no line of interest
  // lies below depth 2, and skipping keeps the stack flat.
  void skip_nested() {
    int open = 0;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '"') {
        string();
        continue;
      }
      if (c == '\n') ++line_;
      if (c == '{' || c == '[') ++open;
      if (c == '}' || c == ']') {
        --open;
        if (open == 0) {
          ++i_;
          return;
        }
      }
      ++i_;
    }
  }

  void value(int depth) {
    blank();
    char c = peek();
    if ((c == '{' || c == '[') && depth >= 2) {
      skip_nested();
    } else if (c == '{') {
      object(depth, nullptr, nullptr);
    } else if (c == '[') {
      array(depth);
    } else if (c == '"') {
      string();
    } else {
      while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' &&
             !std::isspace(static_cast<unsigned char>(s_[i_])))
        ++i_;
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
  int line_ = 1;
};

}  // namespace

SourceLines scan_source_lines(std::string_view text) { return LineScanner(text).scan(); }

int line_past_nesting(std::string_view text, int limit) {
  int depth = 0, line = 1;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > limit) return line;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return 0;
}

int line_of_token(std::string_view text, std::string_view token) {
  if (token.empty()) return 1;
  int line = 1;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (text.substr(i, token.size()) == token)
      return line;
  }
  return 1;
}

}  // namespace gpemu::cost_detail
