// User text as messages quote it. A message names what the user gave, and a
// damaged or fuzzed file can hold newlines, terminal control bytes or
// megabytes on one line; `gpemu` prints each error as one line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpemu {

// `text` as printable text of about `max_bytes` at most: newline, CR and tab
// as \n \r \t, other control bytes as \xNN, the excess cut with
// "... (N bytes in all)". Bytes from 0x80 up (UTF-8 names) are kept.
inline std::string printable_excerpt(std::string_view text, std::size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  std::size_t i = 0;
  for (; i < text.size() && out.size() < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < text.size()) out += "... (" + std::to_string(text.size()) + " bytes in all)";
  return out;
}

// A whole message as one line (a generous cap: messages list accepted keys).
inline std::string one_line_message(std::string_view text) { return printable_excerpt(text, 4096); }

}  // namespace gpemu
