// User text as messages and tables quote it. A message names what the user
// gave, and a damaged or fuzzed file can hold newlines, terminal control bytes
// or megabytes on one line; `gpemu` prints each error as one line. Names that
// other processes chose (a serve client's, a jobs file's) are shown on the
// terminal through the same escaping, so that they cannot move the cursor,
// clear the screen, set the window title or forge table rows.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

namespace gpemu {

namespace message_text_detail {

// The length (2 to 4) of the well-formed UTF-8 sequence at text[i], else 0:
// overlong forms, surrogates and code points past U+10FFFF are not.
inline std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = at(0);
  const std::size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((at(k) & 0xc0) != 0x80) return 0;
  if ((c == 0xe0 && at(1) < 0xa0) || (c == 0xed && at(1) >= 0xa0) || (c == 0xf0 && at(1) < 0x90) ||
      (c == 0xf4 && at(1) >= 0x90))
    return 0;
  return n;
}

}  // namespace message_text_detail

// Whether `text` holds a byte or character a terminal takes as a control: C0
// (below 0x20, tab and newline included), DEL, C1 (U+0080 to U+009F, or a
// lone byte 0x80 to 0x9f, which an 8-bit terminal reads as one).
inline bool has_control_characters(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c < 0x80) continue;
    if (const std::size_t n = message_text_detail::utf8_sequence(text, i)) {
      if (c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) return true;
      i += n - 1;
    } else if (c < 0xa0) {
      return true;
    }
  }
  return false;
}

// `text` as printable text of about `max_bytes` at most: newline, CR and tab
// as \n \r \t, other C0 control bytes and DEL as \xNN, C1 controls as \u00NN
// (a lone byte 0x80 to 0x9f as \xNN), the excess cut with "... (N bytes in
// all)". Other bytes from 0x80 up (UTF-8 names) are kept.
inline std::string printable_excerpt(std::string_view text, std::size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const auto escape = [&](const char* prefix, unsigned char c) {
    out += prefix;
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  std::size_t i = 0;
  for (; i < text.size() && out.size() < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      escape("\\x", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (const std::size_t n = message_text_detail::utf8_sequence(text, i)) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (c == 0xc2 && next < 0xa0)
        escape("\\u00", next);
      else
        out.append(text.substr(i, n));
      i += n - 1;
    } else if (c < 0xa0) {
      escape("\\x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < text.size()) out += "... (" + std::to_string(text.size()) + " bytes in all)";
  return out;
}

// A whole message as one line (a generous cap: messages list accepted keys).
inline std::string one_line_message(std::string_view text) { return printable_excerpt(text, 4096); }

// A name or other text another process or file chose, as a table or log line
// shows it on the terminal: whole, with every control character escaped.
inline std::string terminal_text(std::string_view text) {
  return printable_excerpt(text, std::numeric_limits<std::size_t>::max());
}

}  // namespace gpemu
