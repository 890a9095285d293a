#include "dlio/free_space.h"

#include <sys/statvfs.h>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::dlio::detail {

namespace fs = std::filesystem;

void require_free_space(const fs::path& folder, std::uint64_t bytes, std::string_view what) {
  fs::path probe = folder;
  std::error_code ec;
  while (!probe.empty() && !fs::exists(probe, ec)) {
    if (probe == probe.parent_path()) break;
    probe = probe.parent_path();
  }
  struct statvfs st {};
  if (probe.empty() || ::statvfs(probe.c_str(), &st) != 0) return;
  const unsigned __int128 available = static_cast<unsigned __int128>(st.f_bavail) * st.f_frsize;
  if (bytes <= available) return;
  constexpr double kGB = 1e9;
  throw InputError(
      fmt::format("{}: needs {} bytes ({:.3g} GB) under '{}', but its filesystem has {} bytes ({:.3g} GB) "
                  "free; expected sizes that fit (or free some space)",
                  what, bytes, static_cast<double>(bytes) / kGB, folder.string(), static_cast<std::uint64_t>(available),
                  static_cast<double>(available) / kGB));
}

}  // namespace gpemu::dlio::detail
