#include "cli/option_checks.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace gpemu::cli {
namespace {

std::string shown(const std::string& text) { return text.size() > 40 ? text.substr(0, 40) + "..." : text; }

}  // namespace

CLI::Validator whole_number_in(std::int64_t min, std::int64_t max) {
  const std::string accepted = fmt::format("a whole number from {} to {}", min, max);
  return CLI::Validator(
      [min, max, accepted](std::string& text) -> std::string {
        std::int64_t v = 0;
        const char* end = text.data() + text.size();
        auto [p, ec] = std::from_chars(text.data(), end, v);
        if (ec == std::errc::result_out_of_range)
          return fmt::format("'{}' is out of range; expected {}", shown(text), accepted);
        if (ec != std::errc() || p != end || v < min || v > max)
          return fmt::format("'{}' is not accepted; expected {}", shown(text), accepted);
        return {};
      },
      accepted);
}

CLI::Validator unsigned_number_up_to(std::uint64_t max) {
  const std::string accepted = fmt::format("a whole number from 0 to {}", max);
  return CLI::Validator(
      [max, accepted](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const char* end = text.data() + text.size();
        auto [p, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc() || p != end || v > max)
          return fmt::format("'{}' is not accepted; expected {}", shown(text), accepted);
        return {};
      },
      accepted);
}

CLI::Validator finite_number_in(double min, double max) {
  const std::string accepted = fmt::format("a finite number from {:g} to {:g}", min, max);
  return CLI::Validator(
      [min, max, accepted](std::string& text) -> std::string {
        double v = 0;
        const char* end = text.data() + text.size();
        auto [p, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc() || p != end || !std::isfinite(v) || v < min || v > max)
          return fmt::format("'{}' is not accepted; expected {}", shown(text), accepted);
        return {};
      },
      accepted);
}

std::optional<std::uint64_t> parse_byte_size(const std::string& text) {
  std::string s = text;
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }), s.end());
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || !std::isfinite(v) || v < 0) return std::nullopt;
  std::string unit(p, static_cast<std::size_t>(s.data() + s.size() - p));
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB")) unit.resize(unit.size() - 2);
  else if (unit.ends_with("B")) unit.pop_back();
  double mult = 1;
  if (unit == "K") mult = 1024.0;
  else if (unit == "M") mult = 1024.0 * 1024;
  else if (unit == "G") mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) return std::nullopt;
  const double bytes = v * mult;
  if (bytes > static_cast<double>(kMaxOptionBytes) || (bytes > 0 && bytes < 1)) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

CLI::Validator byte_size() {
  const std::string accepted =
      fmt::format("a size from 1 byte to {} bytes (1 PiB), or 0: bytes, or a number with K, M or G", kMaxOptionBytes);
  return CLI::Validator(
      [accepted](std::string& text) -> std::string {
        if (parse_byte_size(text)) return {};
        return fmt::format("'{}' is not accepted; expected {}", shown(text), accepted);
      },
      accepted);
}

}  // namespace gpemu::cli
