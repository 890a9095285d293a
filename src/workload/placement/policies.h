// The built-in placement policies (session.h), one file each; a new one is a
// file here and a line in registry.cpp (from a program:
// register_placement_policy, session.h).
#pragma once

#include <memory>

#include "gpemu/session.h"

namespace gpemu {

std::shared_ptr<const PlacementPolicy> make_pinned_placement();
std::shared_ptr<const PlacementPolicy> make_first_fit_placement();

}  // namespace gpemu
