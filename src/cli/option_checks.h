// Range checks for numeric option values, attached with CLI11's ->check().
// They read the option's text themselves, so a value past the type's range
// ("--seq-len 99999999999999999999") or a NaN is refused with the accepted
// range instead of being clamped, wrapped or taken as "not given".
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "gpemu/checked.h"

namespace gpemu::cli {

// A whole number from min to max, written in decimal digits.
CLI::Validator whole_number_in(std::int64_t min, std::int64_t max);
// Likewise for unsigned values (seeds): no minus sign, up to max.
CLI::Validator unsigned_number_up_to(std::uint64_t max);
// A finite number from min to max.
CLI::Validator finite_number_in(double min, double max);

// The largest byte size an option may give (2^50, 1 PiB).
inline constexpr std::uint64_t kMaxOptionBytes = std::uint64_t{1} << 50;
// "0", "123456", "512K", "256M", "4G" (powers of 1024, an optional B or iB),
// up to kMaxOptionBytes; nullopt for anything else, including a non-zero size
// under one byte ("0.5").
std::optional<std::uint64_t> parse_byte_size(const std::string& text);
CLI::Validator byte_size();

}  // namespace gpemu::cli
