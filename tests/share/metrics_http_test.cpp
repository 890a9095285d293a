// The metrics endpoint's HTTP requests (share/metrics_http.h): what each
// head is answered with, and where a head ends.
#include "share/metrics_http.h"

#include <gtest/gtest.h>

#include <string>

namespace gpemu::share_detail {
namespace {

TEST(MetricsHttp, OnlyAGetOfMetricsIsServed) {
  EXPECT_EQ(metrics_request_status("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
  EXPECT_EQ(metrics_request_status("GET /metrics?name[]=x HTTP/1.0\n\n"), 200);
  EXPECT_EQ(metrics_request_status("HEAD /metrics HTTP/1.1\r\n\r\n"), 200);
  EXPECT_EQ(metrics_request_status("GET / HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(metrics_request_status("GET /metricsX HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(metrics_request_status("POST /admin HTTP/1.1\r\n\r\n"), 405);
  EXPECT_EQ(metrics_request_status("DELETE /metrics HTTP/1.1\r\n\r\n"), 405);
  for (const char* bad : {"\r\n\r\n", "GET\r\n\r\n", "GET /metrics\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n",
                          "GET metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/2.0\r\n\r\n", "G(T /metrics HTTP/1.1\n\n",
                          "GET /met\x01rics HTTP/1.1\n\n", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n"})
    EXPECT_EQ(metrics_request_status(bad), 400) << bad;
  EXPECT_EQ(metrics_request_status("GET /metrics HTTP/1.1\r\nX: " + std::string(kMaxMetricsHead, 'a') + "\r\n\r\n"),
            431);
}

TEST(MetricsHttp, AHeadEndsAtItsFirstBlankLine) {
  EXPECT_EQ(metrics_head_end("GET /metrics HTTP/1.1\r\nHost: x\r\n"), 0u);
  EXPECT_EQ(metrics_head_end("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nbody"), 34u);
  EXPECT_EQ(metrics_head_end("GET /metrics HTTP/1.0\n\nrest"), 23u);
  EXPECT_EQ(metrics_head_end("\r\n"), 0u);
  EXPECT_EQ(metrics_head_end(""), 0u);
}

TEST(MetricsHttp, ResponsesSayWhatTheyAreAndARefusalWhatIsServed) {
  const std::string ok = metrics_response(200, "GET /metrics HTTP/1.1\r\n\r\n", "up 1\n");
  EXPECT_EQ(ok.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Length: 5\r\n"), std::string::npos) << ok;
  EXPECT_EQ(ok.substr(ok.size() - 5), "up 1\n");
  const std::string head = metrics_response(200, "HEAD /metrics HTTP/1.1\r\n\r\n", "up 1\n");
  EXPECT_NE(head.find("Content-Length: 5\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");  // no body
  const std::string no = metrics_response(405, "POST /admin HTTP/1.1\r\n\r\n", "secret");
  EXPECT_EQ(no.rfind("HTTP/1.0 405 Method Not Allowed\r\n", 0), 0u) << no;
  EXPECT_NE(no.find("Allow: GET, HEAD\r\n"), std::string::npos) << no;
  EXPECT_NE(no.find("answers GET /metrics"), std::string::npos) << no;
  EXPECT_EQ(no.find("secret"), std::string::npos) << no;
}

}  // namespace
}  // namespace gpemu::share_detail
