// The JSON form of a host profile (host.h), for the calibration file too.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gpemu/host.h"

namespace gpemu {

nlohmann::json host_profile_json(const HostProfile& h);
// Throws InputError naming `where` and the field.
HostProfile host_profile_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace gpemu
