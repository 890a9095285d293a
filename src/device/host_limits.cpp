// What pinned host memory the process may lock, and byte sizes as people
// write them (--cache-bytes 512M).
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "gpemu/device.h"
#include "gpemu/error.h"

namespace gpemu {

bool can_lock_pinned(std::uint64_t bytes) {
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return false;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= bytes + pinned_host_bytes()) return true;
  try {
    HostBuffer probe(static_cast<std::size_t>(lim.rlim_cur) + 4096, HostMemoryKind::Pinned, PinMode::Lock);
    return true;
  } catch (const ResourceError&) {
    return false;
  }
}

std::uint64_t parse_byte_size(std::string_view text, std::string_view what) {
  std::string s(text);
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }), s.end());
  auto bad = [&] {
    return InputError(
        fmt::format("{} '{}' is not a size: give bytes, or a number with K, M or G (powers of 1024)", what, text));
  };
  if (s.empty()) throw bad();
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string unit = s.substr(pos);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB"))
    unit.resize(unit.size() - 2);
  else if (unit.ends_with("B"))
    unit.pop_back();
  double mult = 1;
  if (unit == "K")
    mult = 1024.0;
  else if (unit == "M")
    mult = 1024.0 * 1024;
  else if (unit == "G")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    throw bad();
  if (!(v >= 0) || !std::isfinite(v)) throw bad();
  const double bytes = v * mult;
  if (bytes > static_cast<double>(kMaxByteSize))
    throw InputError(fmt::format("{} '{}' is too large: at most {} bytes (1 PiB)", what, text, kMaxByteSize));
  if (bytes > 0 && bytes < 1)
    throw InputError(fmt::format("{} '{}' is less than one byte: give 0 or at least 1", what, text));
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace gpemu
