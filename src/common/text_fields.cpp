#include "common/text_fields.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "common/fs_errors.h"
#include "gpemu/error.h"

namespace gpemu::text {

std::string_view trim(std::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string quoted_excerpt(std::string_view s) {
  constexpr std::size_t kMaxShown = 80;
  s = trim(s);
  std::string out;
  std::size_t i = 0;
  for (; i < s.size() && out.size() < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (i < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

std::optional<double> parse_number(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  // from_chars also reads "nan" and "inf", which no profile may contain.
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields.push_back(trim(line.substr(start)));
      return fields;
    }
    fields.push_back(trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

std::string read_text_file(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  // std::ifstream keeps the OS reason in errno (libstdc++ opens with fopen).
  if (!in)
    throw InputError(
        fmt::format("{}: cannot open file for reading: {}", shown_path(path), std::strerror(errno ? errno : EIO)));
  // Read in chunks up to the limit, so that a device or a pipe that never
  // ends (/dev/zero) is refused instead of filling memory.
  std::string text;
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxTextFileBytes)
      throw InputError(fmt::format("{}: more than {} MiB; a gpemu text input (CSV, JSON) is at most that large",
                                   shown_path(path), kMaxTextFileBytes >> 20));
  }
  if (in.bad()) throw InputError(fmt::format("{}: read error", shown_path(path)));
  return text;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = nl + 1;
  }
  return lines;
}

}  // namespace gpemu::text
