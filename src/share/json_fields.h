// Checked values of the share layer's JSON inputs (a jobs file's keys, a
// serve request's fields): each refusal names where the value is, shows it
// and says what is accepted, as InputError.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/message_text.h"
#include "gpemu/error.h"

namespace gpemu::share_detail {

// "<where> is <value>: expected <expected>", the value cut at 60 characters.
[[noreturn]] inline void bad_field(std::string_view where, const nlohmann::json& v, std::string_view expected) {
  std::string shown = v.dump();
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  throw InputError(fmt::format("{} is {}: expected {}", where, shown, expected));
}

// An integer in [lo, hi] (a JSON integer: 2.0 is refused).
inline std::int64_t integer_field(std::string_view where, const nlohmann::json& v, std::int64_t lo, std::int64_t hi) {
  const std::string expected = fmt::format("an integer from {} to {}", lo, hi);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)))
    bad_field(where, v, expected);
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi) bad_field(where, v, expected);
  return x;
}

// A finite number in [lo, hi], or (lo, hi] with lo_open.
inline double number_field(std::string_view where, const nlohmann::json& v, double lo, double hi,
                           bool lo_open = false) {
  const std::string expected = fmt::format("a number {} {} and at most {}", lo_open ? "above" : "from", lo, hi);
  if (!v.is_number()) bad_field(where, v, expected);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > hi || x < lo || (lo_open && x == lo)) bad_field(where, v, expected);
  return x;
}

// A string of at most 200 characters without control characters (names end
// up in tables on a terminal: an escape sequence there could clear the screen
// or forge a row); empty only when allowed.
inline std::string text_field(std::string_view where, const nlohmann::json& v, bool allow_empty = false) {
  if (!v.is_string() || (!allow_empty && v.get<std::string>().empty()) || v.get<std::string>().size() > 200 ||
      has_control_characters(v.get<std::string>()))
    bad_field(where, v,
              allow_empty ? "a string of at most 200 characters, without control characters"
                          : "a non-empty string of at most 200 characters, without control characters");
  return v.get<std::string>();
}

}  // namespace gpemu::share_detail
