#include "cli/options.h"

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::cli {

HostMemoryKind parse_host_memory(std::string_view s) {
  if (s == "pinned") return HostMemoryKind::Pinned;
  if (s == "pageable") return HostMemoryKind::Pageable;
  throw InputError(fmt::format("unknown host memory '{}': accepted 'pinned' or 'pageable'", s));
}

}  // namespace gpemu::cli
