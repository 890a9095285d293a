// Whole reads and writes on a TCP socket for the dist layer's small
// protocols (the rendezvous store, the cache peers).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

namespace gpemu::dist {

using SocketClock = std::chrono::steady_clock;

// Reads exactly n bytes before `deadline` (none: no limit); false on EOF
// (errno ECONNRESET), an error or the deadline (errno ETIMEDOUT).
bool read_all(int fd, void* p, std::size_t n, const SocketClock::time_point* deadline = nullptr);
// Writes all n bytes (no SIGPIPE); false when the peer is gone.
bool write_all(int fd, const void* p, std::size_t n);
// Sends small frames at once (TCP_NODELAY).
void no_delay(int fd);
// A server's acceptor: hands each connection made to `listen_fd` (no delay
// set) to `take`, until `wake_fd` is readable.
void accept_until_woken(int listen_fd, int wake_fd, const std::function<void(int fd)>& take);

}  // namespace gpemu::dist
