// `gpemu validate`'s per-op comparison (OpClassPoint): its table and JSON.
#pragma once

#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpemu/calibration.h"

namespace gpemu::cost_detail {

// One line per (GPU, model, batch, phase, kind); nothing without points.
void print_op_classes(const std::vector<OpClassPoint>& points, std::ostream& out);
// [{"gpu", "model", "batch_size", "phase", "kind", "timer", "measured_calls",
// "measured_s", "predicted_ops", "predicted_s"}, ...]
nlohmann::json op_classes_json(const std::vector<OpClassPoint>& points);

}  // namespace gpemu::cost_detail
