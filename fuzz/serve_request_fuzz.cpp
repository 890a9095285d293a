// libFuzzer harness: gpemu serve's wire protocol without a socket
// (share/serve_request.h): the input is what a peer sends, cut into lines as
// the server cuts them; each line is read as a request and every field the
// server reads is read with the server's ranges. A line that is not JSON is
// the server's "protocol" reply, a bad field its "input" reply; the reply
// echoing it must be writable whatever bytes it holds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "gpemu/error.h"
#include "share/serve_request.h"

namespace sd = gpemu::share_detail;

namespace {

// Every field of the protocol (docs/sharing.md), as serve_ops.cpp reads it.
void read_fields(const nlohmann::json& m) {
  (void)sd::request_op(m);
  (void)sd::request_int(m, "gpu", 0, 63, 0);
  (void)sd::request_int(m, "priority", -1000, 1000, 0);
  (void)sd::request_string(m, "mig", "");
  (void)sd::request_string(m, "name", "client");
  (void)sd::request_string(m, "dir", "h2d");
  (void)sd::request_int(m, "stream", 0, 1024, 0);
  (void)sd::request_int(m, "ns", 0, INT64_C(3600000000000), 0);
  (void)sd::request_demand(m, "sm");
  (void)sd::request_demand(m, "bw");
  (void)sd::request_int(m, "bytes", 0, INT64_C(1) << 50, 0);
  (void)sd::request_int(m, "ptr", 0, INT64_MAX, 0);
  (void)sd::request_int(m, "event", 1, INT64_C(1) << 53, 1);
  (void)sd::request_int(m, "start", 1, INT64_C(1) << 53, 1);
  (void)sd::request_int(m, "end", 1, INT64_C(1) << 53, 1, /*required=*/false);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string buffer(reinterpret_cast<const char*>(data), size);
  buffer += '\n';  // the last line ends too
  std::string line;
  for (int lines = 0; lines < 64; ++lines) {
    const sd::Framed f = sd::take_line(buffer, line);
    if (f != sd::Framed::Line) break;
    std::string error;
    gpemu::fuzz::expect_input_errors_only([&] {
      try {
        nlohmann::json request;
        try {
          request = sd::parse_request(line);
        } catch (const nlohmann::json::exception& e) {
          error = e.what();  // not JSON: the server's "protocol" reply
          return;
        }
        read_fields(request);
      } catch (const gpemu::InputError& e) {
        error = e.what();  // the server's "input" reply
        throw;
      }
    });
    // The reply echoes the error, whatever bytes it quotes.
    const std::string reply = sd::reply_line({{"ok", false}, {"kind", "input"}, {"error", error}});
    if (reply.empty() || reply.back() != '\n' || reply.find('\n') != reply.size() - 1) std::abort();
  }
  return 0;
}
