// A GPU's specification as JSON (catalog.h has the type).
#pragma once

#include <nlohmann/json.hpp>

#include "gpemu/catalog.h"

namespace gpemu {

// As `gpemu devices --json` and the Python module's gpemu.gpus() give it
// (docs/json-keys.md).
nlohmann::json gpu_json(const GpuSpec& gpu);

}  // namespace gpemu
