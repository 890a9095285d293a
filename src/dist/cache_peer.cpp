#include "dist/cache_peer.h"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "dist/socket_io.h"
#include "dist/tcp_store.h"
#include "gpemu/error.h"

namespace gpemu::dist {
namespace {

constexpr char kHello[8] = {'G', 'P', 'C', 'A', 'C', 'H', 'E', '1'};

bool read_u64(int fd, std::uint64_t& v, const SocketClock::time_point* deadline = nullptr) {
  if (!read_all(fd, &v, sizeof v, deadline)) return false;
  v = be64toh(v);
  return true;
}

bool write_u64(int fd, std::uint64_t v) {
  v = htobe64(v);
  return write_all(fd, &v, sizeof v);
}

}  // namespace

CachePeerServer::CachePeerServer(const std::string& addr, CachePeerLookup lookup, CachePeerLimits limits)
    : lookup_(std::move(lookup)), limits_(limits) {
  sockaddr_in a = resolve_ipv4(addr, 0);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 256) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    throw InputError(fmt::format("the distributed cache's server cannot listen at {}: {}", addr, std::strerror(err)));
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  if (::pipe2(wake_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw InputError(fmt::format("the distributed cache's server: pipe: {}", std::strerror(errno)));
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

CachePeerServer::~CachePeerServer() {
  stopping_ = true;
  (void)!::write(wake_[1], "x", 1);
  acceptor_.join();
  {
    std::lock_guard lock(mu_);
    for (int fd : clients_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void CachePeerServer::accept_loop() {
  accept_until_woken(listen_fd_, wake_[0], [this](int fd) {
    std::lock_guard lock(mu_);
    clients_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  });
}

void CachePeerServer::serve(int fd) {
  // A client that is not one of ours (its first bytes are not the hello) is closed at once.
  char hello[sizeof kHello];
  const auto deadline = SocketClock::now() + limits_.timeout;
  if (read_all(fd, hello, sizeof hello, &deadline) && std::memcmp(hello, kHello, sizeof kHello) == 0 &&
      write_all(fd, kHello, sizeof kHello)) {
    while (!stopping_) {
      char op = 0;
      std::uint64_t index = 0;
      if (!read_all(fd, &op, 1) || op != 'F' || !read_u64(fd, index)) break;
      const std::optional<std::span<const std::byte>> bytes = lookup_(index);
      if (!bytes) {
        ++misses_;
        if (!write_all(fd, "M", 1)) break;
        continue;
      }
      ++hits_;
      bytes_ += bytes->size();
      if (!write_all(fd, "H", 1) || !write_u64(fd, bytes->size()) || !write_all(fd, bytes->data(), bytes->size()))
        break;
    }
  }
  std::lock_guard lock(mu_);
  std::erase(clients_, fd);
  ::close(fd);
}

CachePeerClient::CachePeerClient(int rank, std::string addr, int port, CachePeerLimits limits)
    : rank_(rank), addr_(std::move(addr)), where_(fmt::format("{}:{}", addr_, port)), port_(port), limits_(limits) {}

CachePeerClient::~CachePeerClient() {
  for (int fd : idle_) ::close(fd);
}

int CachePeerClient::connect_one() {
  const sockaddr_in a = resolve_ipv4(addr_, port_);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // Connects within the timeout (non-blocking, then polled), then says hello.
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int err = 0;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, static_cast<int>(limits_.timeout.count()));
      socklen_t len = sizeof err;
      if (r <= 0)
        err = ETIMEDOUT;
      else
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
  }
  ::fcntl(fd, F_SETFL, flags);
  if (err != 0) {
    ::close(fd);
    throw Error(
        fmt::format("rank {}'s distributed cache at {} cannot be reached: {}", rank_, where_, std::strerror(err)));
  }
  no_delay(fd);
  char hello[sizeof kHello];
  const auto deadline = SocketClock::now() + limits_.timeout;
  if (!write_all(fd, kHello, sizeof kHello) || !read_all(fd, hello, sizeof hello, &deadline) ||
      std::memcmp(hello, kHello, sizeof kHello) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(
        fmt::format("rank {}'s distributed cache at {} did not answer as one: {}", rank_, where_, std::strerror(e)));
  }
  return fd;
}

bool CachePeerClient::fetch(std::uint64_t index, std::vector<std::byte>& out) {
  int fd = -1;
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      fd = idle_.back();
      idle_.pop_back();
    }
  }
  if (fd < 0) fd = connect_one();
  auto fail = [&](const std::string& what) -> bool {
    ::close(fd);
    throw Error(fmt::format("rank {} at {}: {} while sample {} was asked of its distributed cache", rank_, where_, what,
                            index));
  };
  const char op = 'F';
  if (!write_all(fd, &op, 1) || !write_u64(fd, index)) return fail("the connection closed (its process ended?)");
  const auto deadline = SocketClock::now() + limits_.timeout;
  char status = 0;
  if (!read_all(fd, &status, 1, &deadline))
    return fail(errno == ETIMEDOUT ? fmt::format("no answer within {} s", limits_.timeout.count() / 1000.0)
                                   : std::string("the connection closed (its process ended?)"));
  bool hit = false;
  if (status == 'H') {
    std::uint64_t n = 0;
    if (!read_u64(fd, n, &deadline)) return fail("the connection closed in the middle of an answer");
    if (n > limits_.max_item_bytes)
      return fail(fmt::format("a bad frame: an answer of {} bytes, above the {} accepted", n, limits_.max_item_bytes));
    out.resize(n);
    if (!read_all(fd, out.data(), n, &deadline)) return fail("the connection closed in the middle of an answer");
    hit = true;
  } else if (status != 'M') {
    return fail(fmt::format("a bad frame: answer kind {} where H (held) or M (not held) is accepted",
                            static_cast<int>(static_cast<unsigned char>(status))));
  }
  std::lock_guard lock(mu_);
  idle_.push_back(fd);
  return hit;
}

CachePeers::CachePeers(std::shared_ptr<NodeGroup> group, CachePeerLookup lookup, std::uint64_t max_item_bytes,
                       const std::string& what)
    : group_(std::move(group)) {
  limits_.max_item_bytes = max_item_bytes;
  limits_.timeout = group_->timeout();
  const int me = group_->node();
  group_->store().set(fmt::format("gpemu/cache/what/{}", me), std::vector<char>(what.begin(), what.end()));
  for (int r = 0; r < group_->nodes(); ++r) {
    std::vector<char> theirs;
    try {
      theirs = group_->store().get(fmt::format("gpemu/cache/what/{}", r), limits_.timeout);
    } catch (const std::exception& e) {
      group_->fail("the start of the distributed cache", e.what());
    }
    if (std::string(theirs.begin(), theirs.end()) != what)
      throw InputError(
          fmt::format("rank {} has {}, rank {} {}: give every rank the same data, --distributed-cache "
                      "and --cache-policy",
                      me, what, r, std::string(theirs.begin(), theirs.end())));
  }
  server_ = std::make_unique<CachePeerServer>(group_->address(), std::move(lookup), limits_);
  const std::string where = fmt::format("{}:{}", group_->address(), server_->port());
  group_->store().set(fmt::format("gpemu/cache/addr/{}", me), std::vector<char>(where.begin(), where.end()));
}

CachePeerClient& CachePeers::client(int node) {
  std::lock_guard lock(mu_);
  std::unique_ptr<CachePeerClient>& c = clients_[node];
  if (!c) {
    std::vector<char> where;
    try {
      where = group_->store().get(fmt::format("gpemu/cache/addr/{}", node), limits_.timeout);
    } catch (const std::exception& e) {
      group_->fail(fmt::format("the look-up of rank {}'s distributed cache", node), e.what());
    }
    const std::string text(where.begin(), where.end());
    const std::size_t colon = text.rfind(':');
    c = std::make_unique<CachePeerClient>(node, text.substr(0, colon), std::stoi(text.substr(colon + 1)), limits_);
  }
  return *c;
}

bool CachePeers::fetch(int node, std::uint64_t index, std::vector<std::byte>& out) {
  CachePeerClient& c = client(node);
  try {
    return c.fetch(index, out);
  } catch (const std::exception& e) {
    group_->fail(fmt::format("the read of sample {} from rank {}'s distributed cache", index, node), e.what());
  }
}

std::vector<std::vector<std::uint64_t>> CachePeers::exchange(std::uint64_t round,
                                                             const std::vector<std::uint64_t>& mine) {
  auto key = [round](int rank) { return fmt::format("gpemu/cache/admitted/{}/{}", round, rank); };
  std::vector<char> bytes(mine.size() * sizeof(std::uint64_t));
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const std::uint64_t v = htobe64(mine[i]);
    std::memcpy(bytes.data() + i * sizeof v, &v, sizeof v);
  }
  group_->store().set(key(group_->node()), bytes);
  std::vector<std::vector<std::uint64_t>> all(static_cast<std::size_t>(group_->nodes()));
  for (int r = 0; r < group_->nodes(); ++r) {
    if (r == group_->node()) {
      all[static_cast<std::size_t>(r)] = mine;
      continue;
    }
    try {
      bytes = group_->store().get(key(r), limits_.timeout);
    } catch (const std::exception& e) {
      group_->fail(fmt::format("the trade of what the nodes cached in epoch {}", round + 1), e.what());
    }
    if (bytes.size() % sizeof(std::uint64_t) != 0)
      throw Error(fmt::format("rank {}: rank {}'s list of what it cached in epoch {} is {} bytes, not whole indices",
                              group_->node(), r, round + 1, bytes.size()));
    std::vector<std::uint64_t>& theirs = all[static_cast<std::size_t>(r)];
    theirs.resize(bytes.size() / sizeof(std::uint64_t));
    for (std::size_t i = 0; i < theirs.size(); ++i) {
      std::uint64_t v = 0;
      std::memcpy(&v, bytes.data() + i * sizeof v, sizeof v);
      theirs[i] = be64toh(v);
    }
  }
  return all;
}

}  // namespace gpemu::dist
