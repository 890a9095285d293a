#include "gpemu/loader_choice.h"

#include <fmt/format.h>

#include "gpemu/device.h"

namespace gpemu {

DataSource dataset_source(ClockKind clock) {
  return clock == ClockKind::Virtual ? DataSource::Modelled : DataSource::Loader;
}

std::optional<std::string> lock_pinned_if_allowed(DataSpec& data, int ranks) {
  const std::uint64_t need = pipeline::staging_bytes(data.dataset, data.loader, ranks);
  data.loader.pin_mode = PinMode::Lock;
  if (can_lock_pinned(need)) return std::nullopt;
  data.loader.pin_mode = PinMode::AccountOnly;
  return fmt::format(
      "pinned staging buffers are accounted, not locked: locking {} MiB exceeds RLIMIT_MEMLOCK (raise 'ulimit -l', or "
      "pass --pin-mode account to silence this)",
      need >> 20);
}

}  // namespace gpemu
