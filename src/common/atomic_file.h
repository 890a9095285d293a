// Files gpemu writes appear whole or not at all: the bytes go to a temporary
// file next to the target (same folder, so the final rename is atomic), created
// under a name no one can guess and never through a symlink, every
// write and the close are checked, and only commit() puts the file in place.
// An AtomicFile destroyed without commit() (an error, an interruption) removes
// its temporary, so a failed run leaves no partial output behind.
//
// Targets that are not regular files (/dev/null, /dev/full, a FIFO) are written
// in place: renaming over them would replace the device node. A target that is
// a symlink is written through (follow_output_link).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace gpemu {

class AtomicFile {
 public:
  // `what` names the output in messages, e.g. "trace file" or "--report".
  // Throws gpemu::InputError naming the path and the OS reason when the temporary
  // cannot be created.
  AtomicFile(std::filesystem::path target, std::string what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends; throws gpemu::InputError with the byte offset and the OS reason
  // (ENOSPC, EFBIG, EIO...) when the write fails.
  void write(const void* data, std::size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }

  // Flushes (fsync when `durable`), closes and renames the temporary onto the
  // target. Throws gpemu::InputError on any failure, leaving the target untouched.
  void commit(bool durable = false);

  // Removes the temporary now (what the destructor does when not committed).
  void discard() noexcept;

  const std::filesystem::path& target() const { return target_; }
  // Where the bytes go until commit(): "<target>.tmp-<pid>-<random>" (created
  // with O_EXCL|O_NOFOLLOW, mode 0666 less the umask, or the mode of the file
  // it replaces), or the target itself when it is not a regular file.
  const std::filesystem::path& temporary() const { return temporary_; }
  std::uint64_t bytes_written() const { return written_; }

 private:
  std::filesystem::path target_, temporary_;
  std::string what_;
  int fd_ = -1;
  bool in_place_ = false;
  bool committed_ = false;
  std::uint64_t written_ = 0;
};

// Follows `target` while it is a symlink, one link at a time, and returns the
// path the output goes to. Throws InputError, starting with `lead` (e.g.
// "--trace '/tmp/t.json'"), for a link owned by another user in a folder that
// is sticky or writable by everyone (/tmp, a shared drop folder) unless the
// folder's owner made it: anyone can plant such a link to aim the output at a
// file of theirs. Intermediate folders are left to the kernel.
std::filesystem::path follow_output_link(const std::filesystem::path& target, const std::string& lead);

// Writes `content` to `path` through an AtomicFile.
void write_file_atomically(const std::filesystem::path& path, std::string_view content, const std::string& what,
                           bool durable = false);

}  // namespace gpemu
