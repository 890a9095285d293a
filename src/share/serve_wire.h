// What gpemu serve's server and its clients share of a connection: where the
// socket is and whose its folder must be, lines over the socket, and a
// refusal as a reply and back as the exception it stands for
// (serve_request.h has the protocol's parsing, which needs no socket).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpemu::share_detail {

// strerror's text for an errno value.
std::string errno_text(int e);

// True when the peer of fd closed its end (its process may have died);
// requests it sent before are still readable.
bool hung_up(int fd);

// Writes all of s; the peer has timeout_ms in all to take it (-1: no limit).
// False when the connection failed, the time ran out (a peer that does not
// read its replies) or a signal came.
bool write_all(int fd, std::string_view s, int timeout_ms = -1);

enum class Read { Line, Closed, Timeout, TooLong };

// One '\n'-terminated line from fd into `line` (without the newline);
// `buffer` keeps what came after it. Waits at most timeout_ms in all (-1: no
// limit): a peer that trickles bytes without ending a line times out too.
// A signal ends the wait as a timeout does.
Read read_line(int fd, std::string& buffer, std::string& line, int timeout_ms);

// A refusal's reply: {"ok": false, "kind", "oom", "error"}.
nlohmann::json fail(std::string_view kind, std::string error);

// A refused request's reply as the exception it stands for.
[[noreturn]] void throw_refusal(const nlohmann::json& reply);

// Why `dir` is not a folder of this user's that others cannot write to
// (lstat: a link to one does not count); empty when it is. Server and
// clients check the socket's folder alike: a socket in a folder another
// user can write to may be that user's server.
std::string private_folder_problem(const std::filesystem::path& dir);

// The socket's folder ("." for a bare name).
std::filesystem::path folder_of(const std::filesystem::path& socket);

}  // namespace gpemu::share_detail
