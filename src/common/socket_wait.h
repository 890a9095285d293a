// Waiting on a socket with a deadline that a signal cuts short: gpemu's
// SIGINT/SIGTERM handlers only set a flag (common/interrupt.h), so a wait
// polls in slices and looks at the flag between them. gpemu serve and the
// preprocessing service (src/prep/) wait this way.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

namespace gpemu::common {

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// now + timeout_ms; none for a negative timeout (no limit).
Deadline deadline_in(int timeout_ms);

// Waits for fd to be ready for `events` (poll's) until `deadline`: true when
// ready (or in error: the next call on it reports it), false when the time
// ran out or a signal came.
bool wait_ready(int fd, short events, const Deadline& deadline);

// Sends all n bytes (no SIGPIPE), waiting with wait_ready while the socket's
// buffer is full: false when the connection failed, the deadline passed (a
// peer that does not read) or a signal came. gpemu serve's replies and the
// dist layer's frames go out this way.
bool send_all(int fd, const void* data, std::size_t n, const Deadline& deadline);

}  // namespace gpemu::common
