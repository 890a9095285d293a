// A validation report's JSON form: what `gpemu validate --json` prints
// (calibration.h, "validation", has the report).
#pragma once

#include <nlohmann/json.hpp>

#include "gpemu/calibration.h"

namespace gpemu {

// The phases, in the order the report's outputs list them.
inline constexpr ValidationPhase kValidationPhases[] = {ValidationPhase::Forward, ValidationPhase::Backward,
                                                        ValidationPhase::Iteration, ValidationPhase::Transfer,
                                                        ValidationPhase::PeakMemory};

// {"n", "median_ape_pct", "mean_ape_pct", "p90_ape_pct", "max_ape_pct", "median_bias_pct"}.
nlohmann::json error_stats_json(const ErrorStats& s);

// {"calibration": ..., "overall": {phase: stats}, "per_gpu": {gpu: {phase:
// stats}}, "per_model": {...}, "oom_agreement_pct": x, "oom_exact_pct": x,
// "oom_within_2_batches": x, "oom_within_2pct": x (percent of pairs),
// "oom_median_error_pct": x, "oom_per_gpu": {gpu: {...}}, "oom_margin_fit":
// {...}, "oom": [...], "worst": {phase: [...]}}; stats are {"n",
// "median_ape_pct", "mean_ape_pct", "p90_ape_pct", "max_ape_pct",
// "median_bias_pct"}.
nlohmann::json validation_json(const ValidationReport& report);

}  // namespace gpemu
