// Parsing of option values shared by several subcommands.
#pragma once

#include <string_view>

#include "gpemu/host_memory.h"

namespace gpemu::cli {

// "pinned" or "pageable"; InputError otherwise.
HostMemoryKind parse_host_memory(std::string_view s);

}  // namespace gpemu::cli
