#include "dist/socket_io.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "common/socket_wait.h"

namespace gpemu::dist {

bool read_all(int fd, void* p, std::size_t n, const SocketClock::time_point* deadline) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    if (deadline != nullptr) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - SocketClock::now()).count();
      pollfd pfd{fd, POLLIN, 0};
      const int r = left <= 0 ? 0 : ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) errno = ETIMEDOUT;
      if (r <= 0) return false;
    }
    const ssize_t got = ::recv(fd, c, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) errno = ECONNRESET;
    if (got <= 0) return false;
    c += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

bool write_all(int fd, const void* p, std::size_t n) { return common::send_all(fd, p, n, std::nullopt); }

void no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void accept_until_woken(int listen_fd, int wake_fd, const std::function<void(int fd)>& take) {
  while (true) {
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents != 0) return;
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    no_delay(fd);
    take(fd);
  }
}

}  // namespace gpemu::dist
