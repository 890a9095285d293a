// The metrics endpoint's HTTP (gpemu serve --metrics): what it answers a
// request, from the request's head alone. Kept apart from the server so that
// a fuzz harness reaches it without sockets (fuzz/metrics_http_fuzz.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpemu::share_detail {

// A request's head (request line and headers, up to the blank line) is at
// most this long; a longer one is refused (431) and the connection closed.
inline constexpr std::size_t kMaxMetricsHead = 8192;

// Where the head of a request ends in `received` (the index just past its
// blank line, "\r\n\r\n" or "\n\n"), or 0 when it has not come whole yet.
std::size_t metrics_head_end(std::string_view received);

// The status the endpoint answers `head` with: 200 for GET or HEAD of
// /metrics (a query string allowed), 404 for another path, 405 for another
// method, 400 for what is not an HTTP/1.x request line, 431 for a head over
// kMaxMetricsHead.
int metrics_request_status(std::string_view head);

// The whole response: status line, headers and (but for HEAD) the body; a
// refusal's body says what is served.
std::string metrics_response(int status, std::string_view head, std::string_view body);

}  // namespace gpemu::share_detail
