// Filesystem errors as gpemu messages. std::filesystem's throwing calls give
// "filesystem error: status: Too many levels of symbolic links [a/up/a/up/…]"
// as the whole message (QA finding U1); the folder walkers use the
// error_code overloads through these helpers instead, so every failure is an
// InputError naming the path, the OS reason and, for a link loop, what to do.
#pragma once

#include <cerrno>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/message_text.h"
#include "gpemu/error.h"

namespace gpemu {

// A path as messages show it: one line, at most about 300 bytes (a link loop
// walked by a recursive iterator gives paths of kilobytes).
inline std::string shown_path(const std::filesystem::path& p) { return printable_excerpt(p.string(), 300); }

// The OS reason worded for a user; a link loop says so and what to do.
inline std::string fs_reason(const std::error_code& ec) {
  if (ec == std::errc::too_many_symbolic_link_levels) {
    return "it is a symbolic link loop (" + ec.message() +
           "); remove the link or point it at a file or folder that exists";
  }
  if (ec == std::errc::filename_too_long) {
    return "the path is too long (" + ec.message() +
           "), as a symbolic link to a folder above it makes it; remove "
           "such a link";
  }
  return ec.message();
}

// Throws "<what>: cannot <action> '<path>': <reason>".
[[noreturn]] inline void throw_fs_error(std::string_view what, std::string_view action, const std::filesystem::path& p,
                                        const std::error_code& ec) {
  throw InputError(std::string(what) + ": cannot " + std::string(action) + " '" + shown_path(p) +
                   "': " + fs_reason(ec));
}

// The status of `p`, links followed. Not found is a status (file_type::not_found),
// not an error; any other failure (a link loop, no permission) throws.
inline std::filesystem::file_status status_or_throw(const std::filesystem::path& p, std::string_view what) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(p, ec);
  if (ec && st.type() != std::filesystem::file_type::not_found) throw_fs_error(what, "read", p, ec);
  return st;
}

// The same for a directory entry (uses the entry's cached type when it has one).
inline std::filesystem::file_status status_or_throw(const std::filesystem::directory_entry& e, std::string_view what) {
  std::error_code ec;
  const std::filesystem::file_status st = e.status(ec);
  if (ec && st.type() != std::filesystem::file_type::not_found) throw_fs_error(what, "read", e.path(), ec);
  return st;
}

inline bool is_folder(const std::filesystem::path& p, std::string_view what) {
  return std::filesystem::is_directory(status_or_throw(p, what));
}
inline bool is_folder(const std::filesystem::directory_entry& e, std::string_view what) {
  return std::filesystem::is_directory(status_or_throw(e, what));
}
inline bool is_file(const std::filesystem::path& p, std::string_view what) {
  return std::filesystem::is_regular_file(status_or_throw(p, what));
}
inline bool is_file(const std::filesystem::directory_entry& e, std::string_view what) {
  return std::filesystem::is_regular_file(status_or_throw(e, what));
}
inline bool exists_or_throw(const std::filesystem::path& p, std::string_view what) {
  return std::filesystem::exists(status_or_throw(p, what));
}

// The entries of folder `p` (not sorted); a folder that cannot be listed throws.
inline std::vector<std::filesystem::directory_entry> list_folder(const std::filesystem::path& p,
                                                                 std::string_view what) {
  std::vector<std::filesystem::directory_entry> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(p, ec), end;
  for (; !ec && it != end; it.increment(ec)) out.push_back(*it);
  if (ec) throw_fs_error(what, "list", p, ec);
  return out;
}

}  // namespace gpemu
