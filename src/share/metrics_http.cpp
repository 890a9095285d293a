#include "share/metrics_http.h"

#include <algorithm>

#include <fmt/format.h>

namespace gpemu::share_detail {

namespace {

// RFC 9110's token characters (a method).
bool token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string_view first_line(std::string_view head) {
  std::string_view line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

std::string_view reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    default: return "Error";
  }
}

}  // namespace

std::size_t metrics_head_end(std::string_view received) {
  // The first blank line: "\n\n" or "\n\r\n" (a CR before either newline is optional).
  for (std::size_t at = received.find('\n'); at != std::string_view::npos; at = received.find('\n', at + 1)) {
    if (at + 1 < received.size() && received[at + 1] == '\n') return at + 2;
    if (at + 2 < received.size() && received[at + 1] == '\r' && received[at + 2] == '\n') return at + 3;
  }
  return 0;
}

int metrics_request_status(std::string_view head) {
  if (head.size() > kMaxMetricsHead) return 431;
  const std::string_view line = first_line(head);
  // METHOD SP TARGET SP HTTP/1.x
  const std::size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return 400;
  const std::size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return 400;
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!std::all_of(method.begin(), method.end(), token_char)) return 400;
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '0' || version[7] > '9') return 400;
  if (target.front() != '/' || std::any_of(target.begin(), target.end(),
                                           [](char c) { return static_cast<unsigned char>(c) <= ' ' || c == 0x7f; }))
    return 400;
  if (method != "GET" && method != "HEAD") return 405;
  const std::string_view path = target.substr(0, target.find('?'));
  return path == "/metrics" ? 200 : 404;
}

std::string metrics_response(int status, std::string_view head, std::string_view body) {
  std::string text;
  if (status != 200)
    text = fmt::format("{} {}: gpemu serve answers GET /metrics (Prometheus text) only\n", status, reason(status));
  const std::string_view content = status == 200 ? body : std::string_view(text);
  const bool head_only = status == 200 && first_line(head).substr(0, 5) == "HEAD ";
  return fmt::format("HTTP/1.0 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n{}",
                     status, reason(status), status == 200 ? "text/plain; version=0.0.4" : "text/plain; charset=utf-8",
                     content.size(), status == 405 ? "Allow: GET, HEAD\r\n" : "", head_only ? "" : content);
}

}  // namespace gpemu::share_detail
