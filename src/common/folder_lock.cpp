#include "common/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "common/interrupt.h"
#include "gpemu/error.h"

namespace gpemu {

namespace fs = std::filesystem;

namespace {

int open_lock_file(const fs::path& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw InputError(fmt::format("cannot create the folder '{}': {}", folder.string(), ec.message()));
  const fs::path file = folder / FolderLock::kFileName;
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw InputError(fmt::format("cannot lock the folder '{}': cannot open '{}': {}", folder.string(), file.string(),
                                 std::strerror(err)));
  }
  return fd;
}

}  // namespace

FolderLock::FolderLock(const fs::path& folder, const std::function<void(const std::string&)>& waiting) {
  fd_ = open_lock_file(folder);
  bool told = false;
  // Polled rather than a blocking flock(), so that ^C ends the wait.
  for (;;) {
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    const int err = errno;
    if (err != EWOULDBLOCK && err != EINTR) {
      ::close(fd_);
      fd_ = -1;
      throw InputError(fmt::format("cannot lock the folder '{}': {}", folder.string(), std::strerror(err)));
    }
    if (!told && waiting) {
      waiting(fmt::format("waiting for another gpemu process that is writing in '{}'", folder.string()));
    }
    told = true;
    if (interrupt_requested()) {
      ::close(fd_);
      fd_ = -1;
      throw_if_interrupted();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::optional<FolderLock> FolderLock::try_lock(const fs::path& folder) {
  FolderLock l;
  l.fd_ = open_lock_file(folder);
  if (::flock(l.fd_, LOCK_EX | LOCK_NB) != 0) return std::nullopt;
  return std::optional<FolderLock>(std::move(l));
}

FolderLock::FolderLock(FolderLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace gpemu
