#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {

namespace fs = std::filesystem;

namespace {

std::string reason(int err) { return std::strerror(err); }

// A name no other process can have guessed: the pid alone is predictable, and
// a name planted in a shared folder must never be opened.
std::string unique_suffix() {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32)};
  std::string s = fmt::format(".tmp-{}-", ::getpid());
  for (int i = 0; i < 8; ++i) s += kChars[rng() % (sizeof kChars - 1)];
  return s;
}

bool has_dot_dot(const fs::path& p) {
  for (const auto& part : p)
    if (part == "..") return true;
  return false;
}

}  // namespace

fs::path follow_output_link(const fs::path& target, const std::string& lead) {
  fs::path cur = target;
  for (int hops = 0;; ++hops) {
    struct stat ls {};
    if (::lstat(cur.c_str(), &ls) != 0 || !S_ISLNK(ls.st_mode)) return cur;
    if (hops == 40) throw InputError(fmt::format("{}: {}; give a path to a file", lead, reason(ELOOP)));
    const fs::path dir = cur.has_parent_path() ? cur.parent_path() : fs::path(".");
    struct stat ds {};
    // What fs.protected_symlinks enforces, also where it is off: a link in a
    // folder others can write to is followed only when it is ours (or the
    // folder owner's). Anyone could have planted it to aim our output at a
    // file of their choosing.
    if (::stat(dir.c_str(), &ds) == 0 && (ds.st_mode & (S_ISVTX | S_IWOTH)) != 0 && ls.st_uid != ::geteuid() &&
        ls.st_uid != ds.st_uid) {
      throw InputError(fmt::format(
          "{}: {} a symbolic link owned by another user (uid {}) in the shared folder '{}' (sticky or writable by "
          "everyone), and gpemu does not follow it; give a path to a regular file, or to a link you own",
          lead, hops == 0 ? std::string("it is") : fmt::format("'{}', a link it leads to, is", cur.string()), ls.st_uid,
          dir.string()));
    }
    std::string text(static_cast<std::size_t>(ls.st_size > 0 ? ls.st_size : 255) + 1, '\0');
    ssize_t n = 0;
    for (;;) {
      n = ::readlink(cur.c_str(), text.data(), text.size());
      if (n < 0) return cur;  // gone meanwhile: the open reports what is there now
      if (static_cast<std::size_t>(n) < text.size()) break;
      text.resize(text.size() * 2);
    }
    text.resize(static_cast<std::size_t>(n));
    fs::path next = text;
    if (next.is_relative()) next = dir / next;
    // The kernel resolves ".." after a linked folder differently from a
    // lexical clean-up, so such a path is kept as the link says.
    cur = has_dot_dot(next) ? next : next.lexically_normal();
  }
}

AtomicFile::AtomicFile(fs::path target, std::string what) : target_(std::move(target)), what_(std::move(what)) {
  // Write through a symlink to the file it names, as a plain open would, one
  // link at a time (never resolved in one go, which would skip the check).
  target_ = follow_output_link(target_, fmt::format("cannot write the {} '{}'", what_, target_.string()));
  struct stat st {};
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  in_place_ = exists && !S_ISREG(st.st_mode);
  if (in_place_ && S_ISDIR(st.st_mode)) {
    throw InputError(fmt::format("cannot write the {} '{}': it is a folder", what_, target_.string()));
  }
  if (in_place_) {
    temporary_ = target_;
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CLOEXEC);
  } else {
    // O_EXCL|O_NOFOLLOW: never open what is already at the name, a planted
    // symlink included. Mode 0666 less the umask, as a plain create gives.
    for (int attempt = 0; attempt < 100; ++attempt) {
      temporary_ = fs::path(target_.string() + unique_suffix());
      fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (fd_ >= 0 || errno != EEXIST) break;
    }
    // A file replaced keeps its permissions, as when it is overwritten.
    if (fd_ >= 0 && exists) ::fchmod(fd_, st.st_mode & 0777);
  }
  if (fd_ < 0) {
    const int err = errno;
    temporary_.clear();
    throw InputError(fmt::format("cannot write the {} '{}': {}", what_, target_.string(), reason(err)));
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
