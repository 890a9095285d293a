#include "dist/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "common/message_text.h"
#include "dist/socket_io.h"
#include "gpemu/error.h"

namespace gpemu::dist {
namespace {

using Clock = SocketClock;

// Frames: op (1 byte), key length (u32), key, value length (u32), value;
// replies: length (u32), bytes. Ops: H hello (value: the rank), S set, G get
// (waits; answered kGone instead of a length when a rank went away before the
// key came: it may never come), D gone (value: milliseconds to wait), B goodbye.
constexpr std::uint32_t kGone = 0xffffffff;

// A whole number sent as text; -1 when it is not one (a stray client).
int number(const std::vector<char>& text) {
  int n = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc() && end == text.data() + text.size() && n >= 0 ? n : -1;
}

bool write_block(int fd, std::string_view bytes) {
  const auto n = static_cast<std::uint32_t>(bytes.size());
  return write_all(fd, &n, sizeof n) && write_all(fd, bytes.data(), bytes.size());
}

bool read_block(int fd, std::vector<char>& out, const Clock::time_point* deadline = nullptr) {
  std::uint32_t n = 0;
  if (!read_all(fd, &n, sizeof n, deadline) || n > (1u << 26)) return false;
  out.resize(n);
  return read_all(fd, out.data(), n, deadline);
}

}  // namespace

sockaddr_in resolve_ipv4(const std::string& addr, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (const int rc = ::getaddrinfo(addr.c_str(), nullptr, &hints, &res); rc != 0 || res == nullptr)
    throw InputError(fmt::format("MASTER_ADDR {}: cannot resolve it as an IPv4 address ({})",
                                 printable_excerpt(addr, 64), gai_strerror(rc)));
  sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

TcpStoreServer::TcpStoreServer(const std::string& addr, int port) {
  sockaddr_in a = resolve_ipv4(addr, port);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 64) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    throw InputError(fmt::format("rank 0 cannot listen at MASTER_ADDR:MASTER_PORT {}:{} for the other ranks: {}", addr,
                                 port, std::strerror(err)));
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw InputError(fmt::format("store: pipe: {}", std::strerror(errno)));
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  {
    std::lock_guard lock(mu_);  // a waiter either sees it or is asleep for the notify below
    stopping_ = true;
  }
  (void)!::write(wake_[1], "x", 1);
  acceptor_.join();
  {
    std::lock_guard lock(mu_);
    for (int fd : clients_) ::shutdown(fd, SHUT_RDWR);
  }
  changed_.notify_all();
  for (auto& t : threads_) t.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::vector<int> TcpStoreServer::gone() {
  std::lock_guard lock(mu_);
  return {gone_.begin(), gone_.end()};
}

std::vector<int> TcpStoreServer::gone(std::chrono::milliseconds wait, int except) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, wait, [&] {
    return stopping_ || std::any_of(gone_.begin(), gone_.end(), [except](int r) { return r != except; });
  });
  return {gone_.begin(), gone_.end()};
}

std::vector<int> TcpStoreServer::joined() {
  std::lock_guard lock(mu_);
  return {joined_.begin(), joined_.end()};
}

void TcpStoreServer::accept_loop() {
  accept_until_woken(listen_fd_, wake_[0], [this](int fd) {
    std::lock_guard lock(mu_);
    clients_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  });
}

void TcpStoreServer::serve(int fd) {
  int rank = -1;
  bool bye = false;
  while (!stopping_) {
    char op = 0;
    std::vector<char> key, value;
    if (!read_all(fd, &op, 1) || !read_block(fd, key) || !read_block(fd, value)) break;
    const std::string k(key.begin(), key.end());
    std::unique_lock lock(mu_);
    if (op == 'H') {
      if ((rank = number(value)) < 0) break;
      joined_.insert(rank);
    } else if (op == 'B') {
      bye = true;
    } else if (op == 'S') {
      data_[k] = std::move(value);
      changed_.notify_all();
    } else if (op == 'G') {
      // Waits for the key, and notices meanwhile a client that went away.
      bool closed = false;
      while (!changed_.wait_for(lock, std::chrono::milliseconds(100),
                                [&] { return stopping_ || data_.count(k) > 0 || !gone_.empty(); })) {
        char peek = 0;
        if (::recv(fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
          closed = true;
          break;
        }
      }
      if (stopping_ || closed) break;
      if (data_.count(k) == 0) {
        lock.unlock();
        if (!write_all(fd, &kGone, sizeof kGone)) break;
        continue;
      }
      const std::vector<char>& v = data_[k];
      const std::string copy(v.begin(), v.end());
      lock.unlock();
      if (!write_block(fd, copy)) break;
    } else if (op == 'D') {
      const int ms = number(value);
      if (ms < 0) break;
      const auto wait = std::chrono::milliseconds(ms);
      changed_.wait_for(lock, wait, [&] { return stopping_ || !gone_.empty(); });
      std::string list;
      for (int r : gone_) list += (list.empty() ? "" : ",") + std::to_string(r);
      lock.unlock();
      if (!write_block(fd, list)) break;
    } else {
      break;  // not a client of ours
    }
  }
  std::lock_guard lock(mu_);
  if (rank >= 0 && !bye && !stopping_) gone_.insert(rank);
  changed_.notify_all();
  std::erase(clients_, fd);
  ::close(fd);
}

TcpStoreClient::TcpStoreClient(const std::string& addr, int port, int rank, std::chrono::milliseconds timeout)
    : where_(fmt::format("{}:{}", addr, port)) {
  const sockaddr_in a = resolve_ipv4(addr, port);
  const auto deadline = Clock::now() + timeout;
  int err = 0;
  while (true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) break;
    err = errno;
    ::close(fd_);
    fd_ = -1;
    if (Clock::now() >= deadline)
      throw InputError(fmt::format("rank {}: no rank 0 answered at MASTER_ADDR:MASTER_PORT {} within {} s: {}", rank,
                                   where_, timeout.count() / 1000.0, std::strerror(err)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  no_delay(fd_);
  const std::string r = std::to_string(rank);
  request('H', "", std::vector<char>(r.begin(), r.end()), false, {});
}

TcpStoreClient::~TcpStoreClient() {
  try {
    request('B', "", {}, false, {});
  } catch (const std::exception&) {  // the server is gone already
  }
  ::close(fd_);
}

std::vector<char> TcpStoreClient::request(char op, const std::string& key, const std::vector<char>& value, bool reply,
                                          std::chrono::milliseconds timeout) {
  std::lock_guard lock(mu_);
  if (fd_ < 0) throw Error(fmt::format("the store at {} (rank 0) is gone", where_));
  if (!write_all(fd_, &op, 1) || !write_block(fd_, key) ||
      !write_block(fd_, std::string_view(value.data(), value.size())))
    throw Error(fmt::format("the store at {} (rank 0) is gone", where_));
  std::vector<char> out;
  if (!reply) return out;
  const auto deadline = Clock::now() + timeout;
  std::uint32_t n = 0;
  const bool got_length = read_all(fd_, &n, sizeof n, &deadline);
  if (got_length && n == kGone)
    throw Error(fmt::format("a rank went away before '{}' came to the store at {}", key, where_));
  if (got_length && n <= (1u << 26)) out.resize(n);
  if (!got_length || n > (1u << 26) || !read_all(fd_, out.data(), n, &deadline)) {
    // The reply is owed still (a timeout) or never comes (the server is
    // gone): either way this connection is done.
    const bool late = errno == ETIMEDOUT;
    ::close(fd_);
    fd_ = -1;
    throw Error(
        late ? fmt::format("no answer for '{}' from the store at {} within {} s", key, where_, timeout.count() / 1000.0)
             : fmt::format("the store at {} (rank 0) is gone", where_));
  }
  return out;
}

void TcpStoreClient::set(const std::string& key, const std::vector<char>& value) {
  request('S', key, value, false, {});
}

std::vector<char> TcpStoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  return request('G', key, {}, true, timeout);
}

std::vector<int> TcpStoreClient::gone(std::chrono::milliseconds wait) {
  const std::string w = std::to_string(wait.count());
  const std::vector<char> list =
      request('D', "", std::vector<char>(w.begin(), w.end()), true, wait + std::chrono::seconds(2));
  std::vector<int> ranks;
  std::string s(list.begin(), list.end());
  for (std::size_t at = 0; at < s.size();) {
    const std::size_t comma = s.find(',', at);
    ranks.push_back(std::stoi(s.substr(at, comma - at)));
    at = comma == std::string::npos ? s.size() : comma + 1;
  }
  return ranks;
}

}  // namespace gpemu::dist
