// The fields of gpemu's own profile format, "gpemu-profile/1" (docs/profiles.md),
// shared by its reader and writer so the two cannot drift apart.
#pragma once

#include <string_view>

#include "cost/units.h"
#include "gpemu/cost_model.h"

namespace gpemu::cost_detail {

// A row field and the Profile series it fills, in the order they are written.
struct RowField {
  std::string_view name;
  Series Profile::*series;
  std::string_view unit;
  double max;  // largest accepted value (units.h)
  // Whether a batch that did not fit can have this measured: a copy of the
  // inputs can, a training step or its memory cannot.
  bool possible_past_oom = false;
};

inline constexpr RowField kRowFields[] = {
    {"forward_s", &Profile::forward_s, "seconds", kMaxProfileSeconds},
    {"backward_s", &Profile::backward_s, "seconds", kMaxProfileSeconds},
    {"transfer_s", &Profile::transfer_s, "seconds", kMaxProfileSeconds, true},
    {"peak_allocated_mib", &Profile::peak_allocated_mib, "MiB", kMaxProfileMiB},
    {"peak_reserved_mib", &Profile::peak_reserved_mib, "MiB", kMaxProfileMiB},
    {"persistent_mib", &Profile::persistent_mib, "MiB", kMaxProfileMiB},
    {"forward_cv", &Profile::forward_cv, "coefficient of variation", kMaxProfileCv},
    {"backward_cv", &Profile::backward_cv, "coefficient of variation", kMaxProfileCv},
};

inline constexpr std::string_view kTopFields[] = {
    "format",           "gpu",     "model", "precision", "host_memory", "input_bytes_per_sample", "oom_batch_size",
    "model_transfer_s", "comment", "rows",  "op_timer",  "ops"};

// The fields of one element of "ops" (MeasuredOp), in the order they are written.
inline constexpr std::string_view kOpFields[] = {
    "batch_size", "phase", "op", "class", "shapes", "dtype", "calls_per_step", "seconds_per_call", "kernels"};
inline constexpr std::string_view kOpPhases[] = {"forward", "loss", "backward", "optimizer"};
inline constexpr std::string_view kOpTimers[] = {"cuda", "cpu"};
// Calls of one op per training step: far past any model's op count.
inline constexpr double kMaxOpCallsPerStep = 1e9;

}  // namespace gpemu::cost_detail
