#include "prep/wire.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/interrupt.h"
#include "common/socket_wait.h"
#include "gpemu/error.h"
#include "gpemu/prep_serve.h"

namespace gpemu::prep::wire {
namespace {

constexpr char kMagic[4] = {'G', 'P', 'E', 'P'};

template <typename T>
void put(std::byte* at, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) at[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

template <typename T>
T get(const std::byte* at) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(std::to_integer<T>(at[i]) << (8 * i));
  return v;
}

// Reads exactly n bytes; each wait for more is at most stall_ms (first_ms
// for the first byte). Got::Frame when all came.
ReadResult read_exact(int fd, std::byte* out, std::size_t n, int first_ms, int stall_ms) {
  std::size_t done = 0;
  while (done < n) {
    if (!common::wait_ready(fd, POLLIN, common::deadline_in(done == 0 ? first_ms : stall_ms))) {
      if (const int sig = interrupt_signal()) return {Got::Timeout, "interrupted by " + signal_name(sig)};
      return {Got::Timeout, ""};
    }
    const ssize_t r = ::recv(fd, out + done, n - done, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (r <= 0) return {Got::Closed, r < 0 ? std::strerror(errno) : ""};
    done += static_cast<std::size_t>(r);
  }
  return {Got::Frame, ""};
}

bool write_all(int fd, const std::byte* data, std::size_t n, int stall_ms) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!common::wait_ready(fd, POLLOUT, common::deadline_in(stall_ms))) return false;
      continue;
    }
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

std::string printable(std::span<const std::byte> bytes) {
  std::string s;
  for (std::byte b : bytes) {
    const auto c = std::to_integer<unsigned char>(b);
    s += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '.';
  }
  return s;
}

addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const int r = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (r != 0) throw InputError(fmt::format("preprocessing service: cannot resolve '{}': {}", host, ::gai_strerror(r)));
  return found;
}

}  // namespace

std::array<std::byte, kHeaderBytes> make_header(std::uint32_t json_bytes, std::uint64_t payload_bytes) {
  std::array<std::byte, kHeaderBytes> h{};
  std::memcpy(h.data(), kMagic, 4);
  put<std::uint16_t>(h.data() + 4, kProtocolVersion);
  put<std::uint32_t>(h.data() + 8, json_bytes);
  put<std::uint64_t>(h.data() + 12, payload_bytes);
  return h;
}

std::string header_problem(std::span<const std::byte, kHeaderBytes> bytes, Header& header) {
  if (std::memcmp(bytes.data(), kMagic, 4) != 0) {
    const std::string start = printable(bytes.first(8));
    const bool http = start.rfind("GET ", 0) == 0 || start.rfind("POST ", 0) == 0 || start.rfind("HEAD ", 0) == 0;
    return fmt::format("it does not start with \"GPEP\" but \"{}\"{}: not a gpemu prep service peer", start,
                       http ? " (an HTTP request)" : "");
  }
  header.version = get<std::uint16_t>(bytes.data() + 4);
  header.json_bytes = get<std::uint32_t>(bytes.data() + 8);
  header.payload_bytes = get<std::uint64_t>(bytes.data() + 12);
  if (header.version != kProtocolVersion)
    return fmt::format("it speaks protocol version {}; this gpemu speaks version {}", header.version, kProtocolVersion);
  if (header.json_bytes == 0 || header.json_bytes > kMaxJsonBytes)
    return fmt::format("its message of {} bytes is outside 1 byte to {} bytes", header.json_bytes, kMaxJsonBytes);
  if (header.payload_bytes > kMaxPayloadBytes)
    return fmt::format("its payload of {} bytes is over the {} bytes a frame may carry", header.payload_bytes,
                       kMaxPayloadBytes);
  return "";
}

ReadResult read_frame(int fd, Frame& frame, int first_ms, int stall_ms) {
  std::array<std::byte, kHeaderBytes> h{};
  ReadResult r = read_exact(fd, h.data(), 1, first_ms, stall_ms);
  if (r.got != Got::Frame) return r;  // nothing of a frame came
  r = read_exact(fd, h.data() + 1, kHeaderBytes - 1, stall_ms, stall_ms);
  if (r.got == Got::Closed) return {Got::Bad, "the connection ended inside a frame's header"};
  if (r.got != Got::Frame) return r;
  Header header;
  if (std::string why = header_problem(h, header); !why.empty()) return {Got::Bad, why};
  std::string json(header.json_bytes, '\0');
  r = read_exact(fd, reinterpret_cast<std::byte*>(json.data()), json.size(), stall_ms, stall_ms);
  if (r.got == Got::Closed) return {Got::Bad, "the connection ended inside a frame"};
  if (r.got != Got::Frame) return r;
  try {
    frame.message = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    return {Got::Bad, fmt::format("its message is not JSON ({})", e.what())};
  }
  if (!frame.message.is_object()) return {Got::Bad, "its message is not a JSON object"};
  // The payload grows as it comes, a piece at a time: a header that claims
  // gigabytes costs memory only once they are sent.
  constexpr std::size_t kPiece = std::size_t{8} << 20;
  frame.payload.clear();
  while (frame.payload.size() < header.payload_bytes) {
    const std::size_t at = frame.payload.size();
    const std::size_t piece = std::min<std::uint64_t>(kPiece, header.payload_bytes - at);
    frame.payload.resize(at + piece);
    r = read_exact(fd, frame.payload.data() + at, piece, stall_ms, stall_ms);
    if (r.got == Got::Closed) return {Got::Bad, "the connection ended inside a frame's payload"};
    if (r.got != Got::Frame) return r;
  }
  return {Got::Frame, ""};
}

bool write_frame(int fd, const nlohmann::json& message, std::span<const std::byte> payload, int stall_ms) {
  const std::string json = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const auto h = make_header(static_cast<std::uint32_t>(json.size()), payload.size());
  return write_all(fd, h.data(), h.size(), stall_ms) &&
         write_all(fd, reinterpret_cast<const std::byte*>(json.data()), json.size(), stall_ms) &&
         write_all(fd, payload.data(), payload.size(), stall_ms);
}

std::string op_of(const nlohmann::json& message) {
  const auto it = message.find("op");
  return it != message.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void send_error(int fd, const std::string& error, int stall_ms) {
  write_frame(fd, {{"ok", false}, {"error", error}}, {}, stall_ms);
}

int listen_tcp(const std::string& host, int port, int& bound) {
  addrinfo* found = resolve(host, port, true);
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      why = std::strerror(errno);
      close_fd(fd);
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw InputError(fmt::format("preprocessing service: cannot listen on {}:{}: {}", host, port, why));
  sockaddr_storage s{};
  socklen_t len = sizeof s;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&s), &len);
  bound = ntohs(s.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&s)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&s)->sin_port);
  return fd;
}

int connect_tcp(const std::string& host, int port, int timeout_ms) {
  addrinfo* found = resolve(host, port, false);
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        why = std::strerror(errno);
        close_fd(fd);
        continue;
      }
      int err = ETIMEDOUT;
      socklen_t len = sizeof err;
      if (common::wait_ready(fd, POLLOUT, common::deadline_in(timeout_ms)))
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        why = interrupt_requested() ? "interrupted" : std::strerror(err);
        close_fd(fd);
        continue;
      }
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw Error(fmt::format("preprocessing service {}:{} cannot be reached: {}", host, port, why));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace gpemu::prep::wire
