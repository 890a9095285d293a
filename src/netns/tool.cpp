#include "netns/tool.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

extern char** environ;

namespace gpemu::netns {
namespace {

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string command_line(const std::vector<std::string>& argv) { return fmt::format("{}", fmt::join(argv, " ")); }

bool on_path(std::string_view name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string_view rest(path);
  while (true) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    if (!dir.empty()) {
      const std::string file = std::string(dir) + "/" + std::string(name);
      if (::access(file.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(file)) return true;
    }
    if (colon == std::string_view::npos) return false;
    rest.remove_prefix(colon + 1);
  }
}

ToolResult run_tool(const std::vector<std::string>& argv) {
  ToolResult r;
  if (argv.empty()) return r;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.err = std::strerror(errno);
    return r;
  }
  Fd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.err = std::strerror(errno);
    return r;
  }
  Fd err_r{err_pipe[0]}, err_w{err_pipe[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_w.fd);
  out_w.fd = -1;
  ::close(err_w.fd);
  err_w.fd = -1;
  if (spawned != 0) {
    r.status = 127;
    r.err = argv[0] + ": " + std::strerror(spawned);
    return r;
  }
  // Both pipes are read together so that a program that fills one while we
  // wait on the other cannot stall.
  pollfd fds[2] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace gpemu::netns
