// What gpemu serve's server and its clients share of a connection
// (serve_wire.h), and the socket's default path and the "memory" reply's
// allocator figures (serve.h).
#include "share/serve_wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "common/socket_wait.h"
#include "gpemu/error.h"
#include "share/serve.h"
#include "share/serve_request.h"

namespace gpemu {
namespace share_detail {

std::string errno_text(int e) { return std::strerror(e); }

bool hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool write_all(int fd, std::string_view s, int timeout_ms) {
  return common::send_all(fd, s.data(), s.size(), common::deadline_in(timeout_ms));
}

Read read_line(int fd, std::string& buffer, std::string& line, int timeout_ms) {
  const common::Deadline deadline = common::deadline_in(timeout_ms);
  for (;;) {
    const Framed f = take_line(buffer, line);
    if (f == Framed::Line) return Read::Line;
    if (f == Framed::TooLong) return Read::TooLong;
    if (!common::wait_ready(fd, POLLIN, deadline)) return Read::Timeout;
    char chunk[8192];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return Read::Closed;
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
}

nlohmann::json fail(std::string_view kind, std::string error) {
  return {{"ok", false}, {"kind", kind}, {"oom", kind == "oom"}, {"error", std::move(error)}};
}

[[noreturn]] void throw_refusal(const nlohmann::json& reply) {
  const std::string error = reply.value("error", std::string("refused"));
  if (reply.value("oom", false)) throw OutOfMemoryError(error, 0);
  if (reply.value("kind", std::string()) == "input") throw InputError(error);
  throw Error(error);
}

std::string private_folder_problem(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return fmt::format("it cannot be looked at: {}", errno_text(errno));
  if (!S_ISDIR(st.st_mode)) return "it is not a folder";
  if (st.st_uid != ::geteuid()) return fmt::format("it is another user's, uid {}", st.st_uid);
  if ((st.st_mode & 0022) != 0) return fmt::format("it is writable by others, mode {:o}", st.st_mode & 07777);
  return "";
}

std::filesystem::path folder_of(const std::filesystem::path& socket) {
  return socket.parent_path().empty() ? std::filesystem::path(".") : socket.parent_path();
}

}  // namespace share_detail

namespace {

// Every AllocatorStats field with its name on the wire.
constexpr std::pair<const char*, std::uint64_t AllocatorStats::*> kAllocatorFields[] = {
    {"allocated_bytes", &AllocatorStats::allocated_bytes},
    {"reserved_bytes", &AllocatorStats::reserved_bytes},
    {"requested_bytes", &AllocatorStats::requested_bytes},
    {"peak_allocated_bytes", &AllocatorStats::peak_allocated_bytes},
    {"peak_reserved_bytes", &AllocatorStats::peak_reserved_bytes},
    {"peak_requested_bytes", &AllocatorStats::peak_requested_bytes},
    {"active_blocks", &AllocatorStats::active_blocks},
    {"segments", &AllocatorStats::segments},
    {"num_alloc_retries", &AllocatorStats::num_alloc_retries},
    {"num_ooms", &AllocatorStats::num_ooms},
    {"num_device_alloc", &AllocatorStats::num_device_alloc},
    {"num_device_free", &AllocatorStats::num_device_free}};

}  // namespace

nlohmann::json allocator_stats_json(const AllocatorStats& stats) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, field] : kAllocatorFields) j[name] = stats.*field;
  return j;
}

AllocatorStats allocator_stats_from_json(const nlohmann::json& reply) {
  AllocatorStats a;
  for (const auto& [name, field] : kAllocatorFields) a.*field = reply.value(name, std::uint64_t{0});
  return a;
}

std::filesystem::path default_socket_path(const char* xdg_runtime_dir, const std::filesystem::path& tmp,
                                          const char* home) {
  if (xdg_runtime_dir && *xdg_runtime_dir) return std::filesystem::path(xdg_runtime_dir) / "gpemu/serve.sock";
  const std::filesystem::path shared = tmp / fmt::format("gpemu-{}", ::geteuid());
  struct stat st {};
  if (::lstat(shared.c_str(), &st) != 0) return shared / "serve.sock";  // the server makes it, 0700
  const std::string problem = share_detail::private_folder_problem(shared);
  if (problem.empty()) return shared / "serve.sock";
  // Anyone can make the guessable name first; a folder in $HOME only we can.
  if (!home || *home != '/')
    throw InputError(
        fmt::format("the default socket folder {} cannot be used ({}) and HOME is not set for the private one; set "
                    "XDG_RUNTIME_DIR or give the socket's path",
                    shared.string(), problem));
  return std::filesystem::path(home) / ".gpemu/serve.sock";
}

std::filesystem::path default_socket_path() {
  return default_socket_path(std::getenv("XDG_RUNTIME_DIR"), "/tmp", std::getenv("HOME"));
}

}  // namespace gpemu
