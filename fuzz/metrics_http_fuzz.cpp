// libFuzzer harness: the metrics endpoint's HTTP requests (gpemu serve
// --metrics, share/metrics_http.h): where a head ends, its status, and the
// response, for any bytes a peer on the network sends.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "share/metrics_http.h"

namespace sd = gpemu::share_detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view received(reinterpret_cast<const char*>(data), size);
  const std::size_t end = sd::metrics_head_end(received);
  if (end > received.size()) std::abort();
  const std::string_view head = end == 0 ? received : received.substr(0, end);
  const int status = sd::metrics_request_status(head);
  if (status != 200 && status != 400 && status != 404 && status != 405 && status != 431) std::abort();
  if (head.size() > sd::kMaxMetricsHead && status != 431) std::abort();
  const std::string response = sd::metrics_response(status, head, "up 1\n");
  // A status line of its own and the headers' end, whatever came in.
  if (response.rfind("HTTP/1.0 " + std::to_string(status) + " ", 0) != 0) std::abort();
  if (response.find("\r\n\r\n") == std::string::npos) std::abort();
  // Only a GET of /metrics gets the body.
  if ((response.find("up 1\n") != std::string::npos) != (status == 200 && head.substr(0, 4) == "GET ")) std::abort();
  return 0;
}
