#include "common/socket_wait.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "common/interrupt.h"

namespace gpemu::common {

Deadline deadline_in(int timeout_ms) {
  if (timeout_ms < 0) return std::nullopt;
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

bool wait_ready(int fd, short events, const Deadline& deadline) {
  for (;;) {
    if (interrupt_requested()) return false;
    int slice = 100;
    if (deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      slice = static_cast<int>(std::min<std::int64_t>(slice, left.count()));
    }
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, slice);
    if (r > 0) return true;  // ready, or an error the next call reports
    if (r < 0 && errno != EINTR) return true;
  }
}

bool send_all(int fd, const void* data, std::size_t n, const Deadline& deadline) {
  const auto* c = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = ::send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, POLLOUT, deadline)) return false;
      continue;
    }
    if (put <= 0) return false;
    c += put;
    n -= static_cast<std::size_t>(put);
  }
  return true;
}

}  // namespace gpemu::common
