// The calibration file's JSON form (Calibration::load and save read and write
// it; calibration.h has the type).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gpemu/calibration.h"

namespace gpemu {

nlohmann::json calibration_json(const Calibration& calibration);
// Throws InputError naming `where` and the field for malformed input.
Calibration calibration_from_json(const nlohmann::json& j, const std::string& where = "calibration");

}  // namespace gpemu
