#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {

namespace fs = std::filesystem;

namespace {

std::string reason(int err) { return std::strerror(err); }

}  // namespace

AtomicFile::AtomicFile(fs::path target, std::string what) : target_(std::move(target)), what_(std::move(what)) {
  struct stat st {};
  // Write through a symlink to the file it names, as a plain open would.
  if (::lstat(target_.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(target_, ec);
    if (!ec) target_ = resolved;
  }
  in_place_ = ::stat(target_.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  if (in_place_ && S_ISDIR(st.st_mode)) {
    throw InputError(fmt::format("cannot write the {} '{}': it is a folder", what_, target_.string()));
  }
  temporary_ = in_place_ ? target_ : fs::path(target_.string() + fmt::format(".tmp-{}", ::getpid()));
  const int flags = in_place_ ? O_WRONLY | O_CLOEXEC : O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  fd_ = ::open(temporary_.c_str(), flags, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw InputError(fmt::format("cannot write the {} '{}': {}", what_,
                                 in_place_ ? target_.string() : temporary_.string(), reason(err)));
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!committed_ && !in_place_ && !temporary_.empty()) {
    ::unlink(temporary_.c_str());
    temporary_.clear();
  }
}

void AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) throw InputError(fmt::format("the {} '{}' is already closed", what_, target_.string()));
  const auto* p = static_cast<const char*>(data);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd_, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      throw InputError(fmt::format("cannot write the {} '{}' at byte {}: {}", what_, target_.string(), written_ + done,
                                   reason(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  written_ += size;
}

void AtomicFile::commit(bool durable) {
  if (committed_) return;
  if (fd_ < 0) throw InputError(fmt::format("the {} '{}' is already closed", what_, target_.string()));
  if (durable && !in_place_ && ::fsync(fd_) != 0) {
    const int err = errno;
    throw InputError(fmt::format("cannot write the {} '{}': fsync failed: {}", what_, target_.string(), reason(err)));
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    throw InputError(fmt::format("cannot write the {} '{}': close failed: {}", what_, target_.string(), reason(err)));
  }
  if (!in_place_ && ::rename(temporary_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    throw InputError(fmt::format("cannot write the {} '{}': {}", what_, target_.string(), reason(err)));
  }
  committed_ = true;
  if (durable && !in_place_) {
    // The rename itself is durable once the folder is synced.
    const fs::path dir = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
    const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0) {
      ::fsync(d);
      ::close(d);
    }
  }
}

void write_file_atomically(const fs::path& path, std::string_view content, const std::string& what, bool durable) {
  AtomicFile f(path, what);
  f.write(content);
  f.commit(durable);
}

}  // namespace gpemu
