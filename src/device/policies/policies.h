// The built-in sharing policies (sharing_policy.h), one file each; a new one
// is a file here and a line in registry.cpp.
#pragma once

#include <memory>

#include "gpemu/sharing_policy.h"

namespace gpemu::policies {

std::shared_ptr<const SharingPolicy> fifo();
std::shared_ptr<const SharingPolicy> timeslice();
std::shared_ptr<const SharingPolicy> priority();
std::shared_ptr<const SharingPolicy> mps();
std::shared_ptr<const SharingPolicy> mig();

}  // namespace gpemu::policies
