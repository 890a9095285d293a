// Strict parsing of the text fields found in gpemu's text inputs (numbers,
// CSV lines, whole files), shared by the profile readers and the loader's
// measured scaling. Each parser returns nullopt instead of throwing so the
// reader can say which file and line.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpemu::text {

std::string_view trim(std::string_view s);
std::string to_lower(std::string_view s);

// A finite decimal number, surrounding blanks allowed ("1.5", "2e-3", " 7 ").
std::optional<double> parse_number(std::string_view s);

// Text from a file as messages quote it: trimmed, bytes outside printable
// ASCII written as \xNN, and cut to about 80 characters ("...", and the full
// length) so that a garbage file does not flood the terminal.
std::string quoted_excerpt(std::string_view s);

// "a, b, c": names joined by a separator, for messages.
template <typename Range>
std::string join(const Range& names, std::string_view separator = ", ") {
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) out += separator;
    out += name;
  }
  return out;
}

// Splits one CSV line at commas (GPEmu's files quote nothing) and trims each field.
std::vector<std::string_view> split_csv(std::string_view line);

// The whole file as text; InputError naming the path when it cannot be read
// or holds more than kMaxTextFileBytes (measured profiles and published tables
// are megabytes; a device that never ends is refused, not read into memory).
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{256} << 20;
std::string read_text_file(const std::string& path);

// The text split into lines ("\n" or "\r\n"); a leading UTF-8 byte-order mark is dropped.
std::vector<std::string_view> split_lines(std::string_view text);

}  // namespace gpemu::text
