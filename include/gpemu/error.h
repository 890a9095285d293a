// Errors gpemu raises. Every error a user can cause names the input, what was
// wrong with it, and what would have been accepted; the `gpemu` command prints
// what() as one line and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace gpemu {

// Base of all gpemu errors.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input: unknown GPU or model, malformed profile or config file,
// impossible option value.
class InputError : public Error {
 public:
  using Error::Error;
};

// The emulated GPU ran out of memory (see caching_allocator.h). The message
// reads like PyTorch's "CUDA out of memory" error.
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(const std::string& what, unsigned long long requested_bytes)
      : Error(what), requested_bytes_(requested_bytes) {}
  unsigned long long requested_bytes() const { return requested_bytes_; }

 private:
  unsigned long long requested_bytes_;
};

// A host resource the emulator needs could not be had (e.g. locking pinned
// memory beyond RLIMIT_MEMLOCK).
class ResourceError : public Error {
 public:
  using Error::Error;
};

}  // namespace gpemu
