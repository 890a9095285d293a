// gpemu serve's client library (ServeClient, serve.h): a process's
// connection to the server, its requests and their replies.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "common/interrupt.h"
#include "common/message_text.h"
#include "common/socket_wait.h"
#include "gpemu/error.h"
#include "share/serve.h"
#include "share/serve_request.h"
#include "share/serve_wire.h"

namespace gpemu {

using common::Deadline;
using common::deadline_in;
using share_detail::errno_text;
using share_detail::folder_of;
using share_detail::kMaxServeLine;
using share_detail::private_folder_problem;
using share_detail::Read;
using share_detail::read_line;
using share_detail::reply_line;
using share_detail::throw_refusal;
using share_detail::write_all;

namespace {

constexpr int kMaxPosted = 256;  // replies a client leaves unread at most (well within a socket's buffers)

}  // namespace

ServeClient::ServeClient(const std::filesystem::path& socket, const ClientHello& hello)
    : ServeClient(socket, hello.reply_timeout) {
  nlohmann::json m = {{"op", "hello"}, {"name", hello.name}, {"gpu", hello.gpu}, {"priority", hello.priority}};
  if (!hello.mig.empty()) m["mig"] = hello.mig;
  hello_ = request(m);
  if (!hello_.value("ok", false)) {
    const std::string error = hello_.value("error", std::string("refused"));
    ::close(fd_);
    fd_ = -1;
    if (hello_.value("kind", std::string()) == "oom") throw OutOfMemoryError(error, 0);
    if (hello_.value("kind", std::string()) == "input") throw InputError(error);
    throw Error(error);
  }
}

ServeClient::ServeClient(const std::filesystem::path& socket, Duration reply_timeout)
    : socket_(socket), reply_timeout_(reply_timeout) {
  if (reply_timeout <= 0) throw InputError("gpemu serve: a client's reply timeout must be positive");
  const std::string p = socket.string();
  sockaddr_un addr{};
  if (p.size() >= sizeof addr.sun_path) throw InputError(fmt::format("socket path {} is too long", p));
  // The server's own check, from this side: a socket in a folder another
  // user can write to may be that user's server, which would see every
  // request and could answer anything.
  const std::filesystem::path dir = folder_of(socket);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0)
    if (const std::string problem = private_folder_problem(dir); !problem.empty())
      throw InputError(fmt::format(
          "refusing the socket {}: its folder {} must be a folder of this user's that others cannot write to "
          "({}), as gpemu serve makes it",
          p, dir.string(), problem));
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw Error("cannot make a socket: " + errno_text(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  // A server whose backlog is full (it stopped accepting) refuses at once
  // without blocking: tried again until the reply timeout, or a signal.
  const Deadline deadline = deadline_in(timeout_ms());
  int e = 0;
  while (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    e = errno;
    if (e == EINTR) continue;
    if (e != EAGAIN || interrupt_requested() || std::chrono::steady_clock::now() >= *deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    e = 0;
  }
  if (e != 0) {
    ::close(fd_);
    fd_ = -1;
    throw_if_interrupted();
    if (e == EAGAIN)
      throw Error(fmt::format("gpemu serve at {} did not accept the connection in {}", p, timeout_text()));
    throw Error(fmt::format("nothing serves {} ({}); start 'gpemu serve' or give its --socket", p, errno_text(e)));
  }
  // The server's user, as the server checks ours: this user or root.
  ucred cred{};
  socklen_t len = sizeof cred;
  const bool known = ::getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
  const int cred_errno = errno;
  if (!known || (cred.uid != ::geteuid() && cred.uid != 0)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(
        known ? fmt::format("refusing the server at {}: it runs as uid {}, not as this user ({}) or root", p, cred.uid,
                            ::geteuid())
              : fmt::format("refusing the server at {}: its user cannot be known ({})", p, errno_text(cred_errno)));
  }
}

ServeClient::~ServeClient() {
  if (fd_ < 0) return;
  try {
    if (!interrupt_requested()) request({{"op", "bye"}});
  } catch (...) {  // NOLINT: the server is gone (or does not answer); nothing to say goodbye to
  }
  ::close(fd_);
}

int ServeClient::timeout_ms() const {
  return static_cast<int>(std::clamp<std::int64_t>(reply_timeout_ / kMillisecond, 1, INT32_MAX));
}

std::string ServeClient::timeout_text() const { return fmt::format("{:g} s", to_seconds(reply_timeout_)); }

void ServeClient::send_line(const nlohmann::json& message) {
  if (write_all(fd_, reply_line(message))) return;
  throw_if_interrupted();
  throw Error("gpemu serve: the connection is closed");
}

std::string ServeClient::reply(bool bounded) {
  std::string line;
  const Read got = read_line(fd_, buffer_, line, bounded ? timeout_ms() : -1);
  if (got == Read::Line) return line;
  // The connection is out of step (or gone): closed now, so that nothing
  // else (the destructor's bye) waits on it again.
  ::close(fd_);
  fd_ = -1;
  posted_ = 0;
  if (got == Read::Timeout) {
    throw_if_interrupted();
    throw Error(fmt::format("gpemu serve at {} did not answer in {}", socket_.string(), timeout_text()));
  }
  if (got == Read::TooLong) throw Error(fmt::format("gpemu serve: a reply longer than {} bytes", kMaxServeLine));
  throw Error("gpemu serve: the server closed the connection");
}

void ServeClient::post(const nlohmann::json& message) {
  if (fd_ < 0) throw Error("gpemu serve: not connected");
  if (posted_ >= kMaxPosted) drain();
  send_line(message);
  ++posted_;
}

void ServeClient::drain() {
  nlohmann::json first_refusal;  // every reply is read; the first refusal is thrown
  for (; posted_ > 0; --posted_) {
    std::string line;
    try {
      line = reply(/*bounded=*/false);  // a posted launch may wait for the GPU to reach it
    } catch (...) {
      posted_ = 0;
      throw;
    }
    nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded()) r = {{"ok", false}, {"error", "gpemu serve: a reply that is not JSON"}};
    if (first_refusal.is_null() && !r.value("ok", false)) first_refusal = std::move(r);
  }
  if (!first_refusal.is_null()) throw_refusal(first_refusal);
}

nlohmann::json ServeClient::request(const nlohmann::json& message) {
  if (fd_ < 0) throw Error("gpemu serve: not connected");
  drain();
  send_line(message);
  // What answers at once has the reply timeout; the rest may wait for
  // emulated work (an hour-long kernel), and ends on a signal only.
  const std::string op = message.is_object() ? message.value("op", std::string()) : std::string();
  const std::string line = reply(op == "hello" || op == "smi" || op == "bye");
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("gpemu serve: a reply that is not JSON ({})", e.what()));
  }
}

nlohmann::json ServeClient::checked(const nlohmann::json& message) {
  nlohmann::json r = request(message);
  if (r.value("ok", false)) return r;
  throw_refusal(r);
}

std::uint64_t ServeClient::malloc(std::uint64_t bytes) {
  return checked({{"op", "malloc"}, {"bytes", bytes}})["ptr"].get<std::uint64_t>();
}
void ServeClient::free(std::uint64_t ptr) { checked({{"op", "free"}, {"ptr", ptr}}); }
void ServeClient::kernel(Duration ns, KernelDemand d) {
  checked({{"op", "kernel"}, {"ns", ns}, {"sm", d.sm}, {"bw", d.bw}});
}
Time ServeClient::sync() { return default_stream_end(checked({{"op", "sync"}})); }
Time ServeClient::batch(Duration ns, KernelDemand d) {
  return default_stream_end(checked({{"op", "batch"}, {"ns", ns}, {"sm", d.sm}, {"bw", d.bw}}));
}

Time ServeClient::default_stream_end(const nlohmann::json& reply) {
  // A stream's work ends in order: an end before the last one (or none) is
  // not a reply of gpemu serve's.
  const auto end = reply.find("end_ns");
  if (end == reply.end() || !end->is_number_integer() || end->get<Time>() < last_end_)
    throw Error(fmt::format("gpemu serve: a reply whose end_ns ({}) is not a time at or after this stream's last ({})",
                            end == reply.end() ? "none" : one_line_message(end->dump()), last_end_));
  last_end_ = end->get<Time>();
  return last_end_;
}

nlohmann::json served_gpus(const std::filesystem::path& socket, Duration reply_timeout) {
  ServeClient monitor(socket, reply_timeout);
  const nlohmann::json s = monitor.request({{"op", "smi"}});
  if (!s.value("ok", false) || !s.contains("gpus") || !s["gpus"].is_array() || s["gpus"].empty())
    throw Error(fmt::format("gpemu serve at {} did not describe its GPUs", socket.string()));
  for (const nlohmann::json& g : s["gpus"])
    if (!g.is_object() || !g.contains("id") || !g["id"].is_string() || !g.contains("policy") ||
        !g["policy"].is_string())
      throw Error(
          fmt::format("gpemu serve at {} described a GPU without a text id and policy ({}): not a reply of "
                      "gpemu serve's",
                      socket.string(), one_line_message(g.dump()).substr(0, 200)));
  return s["gpus"];
}

}  // namespace gpemu