#include "cli/option_checks.h"

#include "gpemu/device.h"
#include "gpemu/error.h"

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

CLI::Validator byte_size() {
  const std::string accepted =
      fmt::format("a size from 1 byte to {} bytes (1 PiB), or 0: bytes, or a number with K, M or G", kMaxByteSize);
  return CLI::Validator(
      [accepted](std::string& text) -> std::string {
        try {
          gpemu::parse_byte_size(text, "size");
          return {};
        } catch (const InputError&) {
        }
        return fmt::format("'{}' is not accepted; expected {}", shown(text), accepted);
      },
      accepted);
}

}  // namespace gpemu::cli
