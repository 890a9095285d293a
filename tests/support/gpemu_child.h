// Runs the built `gpemu` as a child process on a pseudo-terminal (so that it
// prints its progress bar, as for a user at a terminal), optionally under a
// file-size limit, and optionally sends it a signal as soon as a marker shows:
// a text in its output or a file on disk. No sleeps decide the outcome; the
// only time limit is a guard against a hung child.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace gpemu::testing {

struct ChildOptions {
  std::map<std::string, std::string> env;
  long long file_size_limit = -1;     // RLIMIT_FSIZE in bytes (SIGXFSZ ignored: writes fail with EFBIG)
  int signal = 0;                     // sent once the marker shows
  std::function<void()> on_marker;    // called once the marker shows (a fault to inject), before the signal
  std::string marker_text;            // ... in the output
  std::filesystem::path marker_file;  // ... or as a file
  int guard_seconds = 300;            // killed (and reported as status -2) past this
};

struct ChildRun {
  int status = -1;         // exit status; -1 when killed by a signal; -2 when the guard fired
  bool signalled = false;  // the signal was sent
  std::string out;         // stdout and stderr together (one terminal)
};

inline ChildRun run_gpemu_child(const std::vector<std::string>& args, const ChildOptions& o = {}) {
  ChildRun r;
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) return r;
  if (pid == 0) {
    for (const auto& [k, v] : o.env) ::setenv(k.c_str(), v.c_str(), 1);
    if (o.file_size_limit >= 0) {
      ::signal(SIGXFSZ, SIG_IGN);
      rlimit lim{static_cast<rlim_t>(o.file_size_limit), static_cast<rlim_t>(o.file_size_limit)};
      ::setrlimit(RLIMIT_FSIZE, &lim);
    }
    std::vector<char*> argv;
    std::string bin = GPEMU_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.guard_seconds);
  bool guard = false;
  for (;;) {
    if ((o.signal || o.on_marker) && !r.signalled) {
      const bool seen = (!o.marker_text.empty() && r.out.find(o.marker_text) != std::string::npos) ||
                        (!o.marker_file.empty() && std::filesystem::exists(o.marker_file));
      if (seen) {
        if (o.on_marker) o.on_marker();
        if (o.signal) ::kill(pid, o.signal);
        r.signalled = true;
      }
    }
    pollfd p{master, POLLIN, 0};
    const int ready = ::poll(&p, 1, 20);
    if (ready > 0) {
      char buf[4096];
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) break;  // EIO: the child closed the terminal
      r.out.append(buf, static_cast<std::size_t>(n));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      guard = true;
      break;
    }
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  ::close(master);
  r.status = guard ? -2 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace gpemu::testing
