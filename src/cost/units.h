// Units and argument checks shared by the cost layer's sources.
#pragma once

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::cost_detail {

// Profiles count memory in MiB, as PyTorch users divide memory_allocated() by 2^20.
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

inline std::uint64_t mib_to_bytes(double mib) {
  return static_cast<std::uint64_t>(std::llround(mib * kBytesPerMiB));
}

inline void require_batch_size(int batch_size) {
  if (batch_size < 1)
    throw InputError(fmt::format("batch size {} is invalid: expected a whole number >= 1", batch_size));
}

}  // namespace gpemu::cost_detail
