#include <fmt/format.h>

#include "gpemu/clock.h"
#include "gpemu/error.h"

namespace gpemu {

std::unique_ptr<Clock> make_clock(std::string_view kind) {
  if (kind == "real") return make_real_clock();
  if (kind == "virtual") return make_virtual_clock();
  throw InputError(fmt::format("unknown clock '{}': accepted values are 'real' and 'virtual'", kind));
}

}  // namespace gpemu
