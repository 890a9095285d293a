// A launcher's environment variable that holds a whole number (torchrun's
// WORLD_SIZE, mpirun's OMPI_COMM_WORLD_RANK, ...), checked at the boundary.
#pragma once

#include <charconv>
#include <string_view>

#include <fmt/format.h>

#include "common/message_text.h"
#include "gpemu/error.h"

namespace gpemu {

// `value` of variable `name` as a whole number in [lo, hi]; InputError
// "NAME=VALUE: give a whole number from LO to HI" otherwise.
inline int env_whole_number(std::string_view name, std::string_view value, int lo, int hi) {
  int n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < lo || n > hi)
    throw InputError(
        fmt::format("{}={}: give a whole number from {} to {}", name, printable_excerpt(value, 64), lo, hi));
  return n;
}

}  // namespace gpemu
