// gpemu serve's wire protocol, the part that needs no socket and no GPU:
// cutting lines out of what a peer sent, reading a request line as JSON and
// its fields as the server checks them, and writing a reply line. The server
// (serve_server.cpp, serve_ops.cpp) and its clients use these; so does the fuzz harness
// (fuzz/serve_request_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpemu::share_detail {

// A request (or reply) longer than this ends the connection.
inline constexpr std::size_t kMaxServeLine = 1 << 20;

enum class Framed { Line, More, TooLong };
// Takes the first '\n'-terminated line out of `buffer` into `line` (without
// the newline): Line; More when none has ended yet; TooLong when none has
// ended within kMaxServeLine bytes.
Framed take_line(std::string& buffer, std::string& line);

// A request line as a JSON object. nlohmann::json::exception for what is not
// JSON (the server's "protocol" reply), InputError for JSON that is not an
// object.
nlohmann::json parse_request(std::string_view line);

// The request's op ("" when it has none or it is not a string).
std::string request_op(const nlohmann::json& request);

// A field of a request, checked (json_fields.h): InputError naming it
// otherwise. Absent: `def`, or InputError when required.
std::int64_t request_int(const nlohmann::json& request, const char* key, std::int64_t lo, std::int64_t hi,
                         std::int64_t def, bool required = false);
// A kernel's demand, 0 to 1 (absent: 1).
float request_demand(const nlohmann::json& request, const char* key);
// A string of at most 200 bytes without control characters (absent: def).
std::string request_string(const nlohmann::json& request, const char* key, std::string def);

// A message as one line of JSON. Text that came from a peer (echoed in an
// error) may not be UTF-8: its bad bytes become U+FFFD, never an exception.
std::string reply_line(const nlohmann::json& message);

}  // namespace gpemu::share_detail
