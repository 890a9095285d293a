// A prediction as JSON: `gpemu predict --json`'s object (job.h has predict()).
#pragma once

#include <nlohmann/json.hpp>

#include "gpemu/job.h"

namespace gpemu {

// docs/json-keys.md has the keys.
nlohmann::json prediction_json(const Prediction& p);

}  // namespace gpemu
