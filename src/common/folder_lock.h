// An advisory lock (flock) on a folder gpemu writes datasets into, so that
// concurrent gpemu runs on one cache or data folder take turns: the second
// waits for the first to finish generating, then finds the dataset complete.
// The lock file "<folder>/.gpemu-lock" stays (removing it would race with a
// process about to lock it); the lock itself goes with the process, even on
// SIGKILL.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace gpemu {

class FolderLock {
 public:
  // Creates `folder` when missing and locks it. When another process holds the
  // lock, `waiting` hears one line and the call waits; an interruption
  // (interrupt.h) ends the wait with gpemu::Interrupted. Throws InputError
  // naming the folder and the OS reason when it cannot be created or locked.
  explicit FolderLock(const std::filesystem::path& folder, const std::function<void(const std::string&)>& waiting = {});
  ~FolderLock();
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&&) = delete;
  FolderLock(const FolderLock&) = delete;

  // The lock when it is free now; nullopt when another holder has it.
  static std::optional<FolderLock> try_lock(const std::filesystem::path& folder);

  static constexpr const char* kFileName = ".gpemu-lock";

 private:
  FolderLock() = default;
  int fd_ = -1;
};

}  // namespace gpemu
