// Internal: a pre-flight check that a folder's filesystem can hold what a
// DLIO run is about to write (generated data, a checkpoint), so that a
// mistyped size fails at once with the figures instead of filling the disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

namespace gpemu::dlio::detail {

// InputError naming `what`, the bytes and the free space when `bytes` exceed
// what statvfs reports available to this user under `folder` (the nearest
// existing ancestor is asked when `folder` is not there yet). Nothing is
// checked when the filesystem cannot be asked.
void require_free_space(const std::filesystem::path& folder, std::uint64_t bytes, std::string_view what);

}  // namespace gpemu::dlio::detail
