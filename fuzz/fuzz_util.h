// Shared by the libFuzzer harnesses: what counts as a finding. A parser may
// reject its input only with gpemu::InputError (a one-line message for the
// user); any other exception, a crash, a sanitizer report, a leak or a hang
// is a bug, which libFuzzer reports by aborting.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "gpemu/error.h"

namespace gpemu::fuzz {

// Runs body(); InputError is the accepted way to refuse an input, and its
// message must be one line, as `gpemu` prints it.
template <typename Body>
void expect_input_errors_only(Body&& body) {
  try {
    body();
  } catch (const InputError& e) {
    const std::string_view what = e.what();
    if (what.find('\n') != std::string_view::npos) {
      std::fprintf(stderr, "multi-line InputError: %s\n", e.what());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not an InputError: %s\n", e.what());
    std::abort();
  }
}

// A folder of its own for the harness process under $TMPDIR (or /tmp),
// removed at exit; harnesses that exercise path-taking readers write the
// input there.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d =
        std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("gpemu-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& file, const std::uint8_t* data, std::size_t size) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::fprintf(stderr, "harness: cannot write %s\n", file.c_str());
    std::abort();
  }
}

}  // namespace gpemu::fuzz
