// Whole reads and writes on a TCP socket for the dist layer's small
// protocols (the rendezvous store, the cache peers).
#pragma once

#include <chrono>
#include <cstddef>

namespace gpemu::dist {

using SocketClock = std::chrono::steady_clock;

// Reads exactly n bytes before `deadline` (none: no limit); false on EOF
// (errno ECONNRESET), an error or the deadline (errno ETIMEDOUT).
bool read_all(int fd, void* p, std::size_t n, const SocketClock::time_point* deadline = nullptr);
// Writes all n bytes (no SIGPIPE); false when the peer is gone.
bool write_all(int fd, const void* p, std::size_t n);

}  // namespace gpemu::dist
