#include "common/output_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "gpemu/error.h"

namespace gpemu {

namespace fs = std::filesystem;

void check_output_path(const fs::path& given, const std::string& what) {
  if (given.empty()) throw InputError(fmt::format("{}: the path is empty; give a file name", what));
  // The output goes where a symlink points (AtomicFile); a planted one is
  // refused here, before the run.
  const fs::path path = follow_output_link(given, fmt::format("{} '{}'", what, given.string()));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      throw InputError(fmt::format("{} '{}' is a folder; give a file name", what, path.string()));
    if (!S_ISREG(st.st_mode)) {
      // A device or FIFO is written in place.
      if (::access(path.c_str(), W_OK) != 0)
        throw InputError(fmt::format("{} '{}' cannot be written: {}", what, path.string(), std::strerror(errno)));
      return;
    }
  }
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    throw InputError(fmt::format("{} '{}': the folder '{}' cannot be used: {}; create it first", what, path.string(),
                                 dir.string(), std::strerror(err)));
  }
  if (!S_ISDIR(st.st_mode))
    throw InputError(fmt::format("{} '{}': '{}' is not a folder", what, path.string(), dir.string()));
  // The file is written as a temporary next to the target, then renamed: the
  // folder itself must be writable.
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    throw InputError(fmt::format("{} '{}': the folder '{}' is not writable: {}", what, path.string(), dir.string(),
                                 std::strerror(err)));
  }
}

}  // namespace gpemu
