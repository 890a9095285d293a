// The preprocessing service's wire protocol (prep_serve.h): frames of a
// 24-byte header, a JSON object and a binary payload, over TCP; and the
// sockets it runs on. The header's check needs no socket (tests, fuzzing).
//
// Header, little-endian: "GPEP", u16 version, u16 reserved (0), u32 JSON
// bytes (at most kMaxJsonBytes), u64 payload bytes (at most
// kMaxPayloadBytes), 4 bytes reserved (0).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpemu::prep::wire {

inline constexpr std::size_t kHeaderBytes = 24;
inline constexpr std::uint32_t kMaxJsonBytes = 1 << 20;
inline constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{4} << 30;

struct Header {
  std::uint16_t version = 0;
  std::uint32_t json_bytes = 0;
  std::uint64_t payload_bytes = 0;
};

std::array<std::byte, kHeaderBytes> make_header(std::uint32_t json_bytes, std::uint64_t payload_bytes);
// Why these bytes are not a version-1 header ("" when they are): not the
// magic (not a gpemu prep service peer: an HTTP request's first bytes are
// named as such), another version, a JSON or payload length over the limit.
std::string header_problem(std::span<const std::byte, kHeaderBytes> bytes, Header& header);

struct Frame {
  nlohmann::json message;  // an object
  std::vector<std::byte> payload;
};

enum class Got { Frame, Closed, Timeout, Bad };
struct ReadResult {
  Got got = Got::Closed;
  std::string why;  // Bad: what was wrong; Timeout: "interrupted by SIGTERM" when a signal ended it
};
// One frame: waits up to `first_ms` for its first byte (-1: no limit), then
// up to `stall_ms` for each further piece (a peer that stops halfway is bad).
ReadResult read_frame(int fd, Frame& frame, int first_ms, int stall_ms);
// False when the peer is gone, took nothing for `stall_ms`, or a signal came.
bool write_frame(int fd, const nlohmann::json& message, std::span<const std::byte> payload = {}, int stall_ms = 30000);
// A message's "op" ("" when it has none or it is not a string).
std::string op_of(const nlohmann::json& message);
// {"ok": false, "error": error}, best effort (the peer may be gone).
void send_error(int fd, const std::string& error, int stall_ms = 1000);

// A listening TCP socket on host:port (IPv4 or IPv6 literal, or a name);
// `bound` gets the port. InputError naming the address otherwise.
int listen_tcp(const std::string& host, int port, int& bound);
// A connected socket to host:port; Error naming it when nothing answers
// within timeout_ms.
int connect_tcp(const std::string& host, int port, int timeout_ms);
// Closes fd (ignores -1).
void close_fd(int& fd);

}  // namespace gpemu::prep::wire
