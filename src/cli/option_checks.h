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

#include "common/checked.h"

namespace gpemu::cli {

// A whole number from min to max, written in decimal digits.
CLI::Validator whole_number_in(std::int64_t min, std::int64_t max);
// Likewise for unsigned values (seeds): no minus sign, up to max.
CLI::Validator unsigned_number_up_to(std::uint64_t max);
// A finite number from min to max.
CLI::Validator finite_number_in(double min, double max);

// A byte size as gpemu::parse_byte_size reads it (host_memory.h).
CLI::Validator byte_size();

}  // namespace gpemu::cli
