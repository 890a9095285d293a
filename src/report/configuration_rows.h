// A run's configuration, given as a JSON value, as the report's rows
// (RunReport::configuration, report.h).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "gpemu/report.h"

namespace gpemu {

// Dotted keys ("model.batch_size", "jobs[0].name"; an array of scalars is one
// row) and printed values (strings as they are, the rest as compact JSON).
// Null, or an empty object or array: no rows. A scalar: one row with an
// empty key (the page prints "(value)").
std::vector<SummaryRow> configuration_rows(const nlohmann::json& configuration);

}  // namespace gpemu
