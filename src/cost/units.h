// Units and argument checks shared by the cost layer's sources.
#pragma once

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "common/checked.h"
#include "gpemu/error.h"

namespace gpemu::cost_detail {

// Profiles count memory in MiB, as PyTorch users divide memory_allocated() by 2^20.
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

// The largest figures a profile may hold, so that every later conversion
// (seconds to the ns clock, MiB to bytes) and sum stays in range. 10^9 MiB is
// about 1 PiB, far past any GPU's memory; a coefficient of variation past 1
// means a step time spread wider than its own mean, which no measured loop
// shows.
inline constexpr double kMaxProfileSeconds = kMaxInputSeconds;
inline constexpr double kMaxProfileMiB = 1e9;
inline constexpr double kMaxProfileCv = 1.0;

inline std::uint64_t mib_to_bytes(double mib) { return static_cast<std::uint64_t>(std::llround(mib * kBytesPerMiB)); }

inline void require_batch_size(int batch_size) {
  if (batch_size < 1)
    throw InputError(fmt::format("batch size {} is invalid: expected a whole number >= 1", batch_size));
}

}  // namespace gpemu::cost_detail
