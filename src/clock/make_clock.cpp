#include <fmt/format.h>

#include "gpemu/clock.h"
#include "gpemu/error.h"

namespace gpemu {

std::string_view to_string(ClockKind k) { return k == ClockKind::Real ? "real" : "virtual"; }

ClockKind parse_clock_kind(std::string_view text) {
  if (text == "real") return ClockKind::Real;
  if (text == "virtual") return ClockKind::Virtual;
  throw InputError(fmt::format("unknown clock '{}': accepted values are 'real' and 'virtual'", text));
}

std::unique_ptr<Clock> make_clock(ClockKind kind, RealClockOptions options) {
  return kind == ClockKind::Real ? make_real_clock(options) : make_virtual_clock();
}

std::unique_ptr<Clock> make_clock(std::string_view kind) { return make_clock(parse_clock_kind(kind)); }

}  // namespace gpemu
