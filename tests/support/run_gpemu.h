// Runs the built `gpemu` binary as a user would and captures what it says.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace gpemu::testing {

struct GpemuRun {
  int status = -1;  // exit status; -1 when killed by a signal
  std::string out;  // stdout
  std::string err;  // stderr
};

// `env` is prepended to the command line (e.g. "GPEMU_DATA_DIR=/x ").
inline GpemuRun run_gpemu(const std::string& args, const std::string& env = "") {
  static std::atomic<int> counter{0};
  const std::string err_file = std::filesystem::temp_directory_path() /
                               ("gpemu_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string cmd = env + std::string(GPEMU_BINARY) + " " + args + " 2>" + err_file;
  GpemuRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::filesystem::remove(err_file);
  return r;
}

}  // namespace gpemu::testing
