// gpemu netns: the values it takes, and, where this machine lets a test make
// network namespaces (root, iproute2), that a shaped link gives a transfer
// the time its size over the rate says, and that down (or the next up after
// a crash) removes exactly what up made.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpemu/error.h"
#include "netns/netns.h"
#include "netns/tool.h"
#include "support/input_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace gpemu::netns;

std::string error_of(const std::function<void()>& f) { return gpemu::testing::input_error_message(f); }

TEST(NetnsValues, BandwidthsAreBitsWithTcsUnits) {
  EXPECT_EQ(parse_bandwidth("10Gbit"), 10'000'000'000u);
  EXPECT_EQ(parse_bandwidth("100mbit"), 100'000'000u);
  EXPECT_EQ(parse_bandwidth("2.5gbit"), 2'500'000'000u);
  EXPECT_EQ(parse_bandwidth("8kbit"), 8'000u);
  EXPECT_EQ(parse_bandwidth("123456bit"), 123'456u);
  // tc reads "bps" as bytes per second; a user who means bits would be 8x off.
  const std::string bps = error_of([] { parse_bandwidth("10Gbps"); });
  EXPECT_NE(bps.find("--bandwidth '10Gbps': unit 'gbps' is not accepted"), std::string::npos) << bps;
  EXPECT_NE(bps.find("bytes per second"), std::string::npos) << bps;
  EXPECT_NE(error_of([] { parse_bandwidth("fast"); }).find("not a bandwidth"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("10"); }).find("unit '' is not accepted"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("1bit"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("1tbit"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([] { parse_bandwidth("1.2.3gbit"); }).find("not a bandwidth"), std::string::npos);
}

TEST(NetnsValues, LatenciesAreWholeMicroseconds) {
  EXPECT_EQ(parse_latency("0"), 0);
  EXPECT_EQ(parse_latency("50us"), 50'000);
  EXPECT_EQ(parse_latency("1.5ms"), 1'500'000);
  EXPECT_EQ(parse_latency("2s"), 2'000'000'000);
  EXPECT_NE(error_of([] { parse_latency("50"); }).find("--latency '50': unit '' is not accepted"), std::string::npos);
  EXPECT_NE(error_of([] { parse_latency("0.5us"); }).find("not whole microseconds"), std::string::npos);
  EXPECT_NE(error_of([] { parse_latency("11s"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([] { parse_latency("-1ms"); }).find("not a latency"), std::string::npos);
}

TEST(NetnsValues, ThePlanNamesEveryObjectUnderThePrefix) {
  NetnsSpec spec;
  spec.prefix = "gpemu";
  spec.nodes = 3;
  const NetnsLayout l = plan_netns(spec);
  EXPECT_EQ(l.bridge, "gpemu-br");
  ASSERT_EQ(l.nodes.size(), 3u);
  EXPECT_EQ(l.nodes[2].netns, "gpemu-2");
  EXPECT_EQ(l.nodes[2].host_veth, "gpemu-h2");
  EXPECT_EQ(l.nodes[2].node_veth, "gpemu-v2");
  EXPECT_EQ(l.nodes[2].address, "10.213.0.3");

  spec.nodes = 0;
  EXPECT_NE(error_of([&] { plan_netns(spec); }).find("--nodes 0: give 1 to 254"), std::string::npos);
  spec.nodes = 100000;
  EXPECT_NE(error_of([&] { plan_netns(spec); }).find("--nodes 100000: give 1 to 254"), std::string::npos);
  spec.nodes = 254;  // the longest names still fit IFNAMSIZ
  spec.prefix = "abcdefghij";
  EXPECT_LE(plan_netns(spec).nodes.back().host_veth.size(), 15u);
  spec.prefix = "abcdefghijk";
  EXPECT_NE(error_of([&] { plan_netns(spec); }).find("--prefix 'abcdefghijk'"), std::string::npos);
  spec.prefix = "Bad;rm";
  EXPECT_NE(error_of([&] { plan_netns(spec); }).find("--prefix"), std::string::npos);
}

// A prefix of this process's own, so that tests running at once never meet.
std::string test_prefix(const char* tag) { return tag + std::to_string(::getpid() % 100000); }

// Puts the calling thread in network namespace `name`.
void enter(const std::string& name) {
  const int fd = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << name;
  ASSERT_EQ(::setns(fd, CLONE_NEWNET), 0) << name;
  ::close(fd);
}

// Sends `bytes` over TCP from namespace `from` to `to`'s address; returns the
// receiver's seconds from accepting the connection to the sender's close.
double transfer_seconds(const NetnsNode& from, const NetnsNode& to, std::size_t bytes) {
  int port = 0, listener = -1;
  double seconds = -1;
  std::thread receiver([&] {
    enter(to.netns);
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, to.address.c_str(), &a.sin_addr);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(listener, 1), 0);
    socklen_t len = sizeof a;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  });
  receiver.join();
  if (port == 0) return -1;
  std::thread sender([&] {
    enter(from.netns);
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, to.address.c_str(), &a.sin_addr);
    ASSERT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const std::vector<char> chunk(1 << 16, 'x');
    for (std::size_t sent = 0; sent < bytes;) {
      const ssize_t n = ::send(s, chunk.data(), std::min(chunk.size(), bytes - sent), MSG_NOSIGNAL);
      ASSERT_GT(n, 0);
      sent += static_cast<std::size_t>(n);
    }
    ::close(s);
  });
  const int c = ::accept(listener, nullptr, nullptr);  // the socket stays in `to`'s namespace
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> buf(1 << 16);
  std::size_t got = 0;
  for (ssize_t n; (n = ::recv(c, buf.data(), buf.size(), 0)) > 0;) got += static_cast<std::size_t>(n);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sender.join();
  ::close(c);
  ::close(listener);
  EXPECT_EQ(got, bytes);
  return seconds;
}

bool anything_named(const std::string& prefix) {
  const ToolResult ns = run_tool({"ip", "netns", "list"}), links = run_tool({"ip", "-o", "link", "show"});
  return ns.out.find(prefix + "-") != std::string::npos || links.out.find(" " + prefix + "-") != std::string::npos;
}

// A transfer between two nodes takes at least its size over the shaped rate
// (TCP/IP and Ethernet headers are 66 bytes of each 1514-byte frame, so the
// payload sees about 4.5 % less), and not many times more: a wrong unit would
// be 8x or 1000x off. How close it comes under no load (within 10 %, the
// issue's target) is printed here and measured by repro/realnodes, not
// asserted: a loaded CI machine only adds time. Down leaves nothing.
TEST(NetnsShaping, ATransferTakesItsSizeOverTheRateAndDownLeavesNothing) {
  const std::string prefix = test_prefix("gts");
  if (const std::string why = netns_refused(prefix); !why.empty()) GTEST_SKIP() << why;
  gpemu::testing::TempDir state;
  NetnsSpec spec;
  spec.prefix = prefix;
  spec.nodes = 2;
  spec.bandwidth_bit_s = 100'000'000;
  const NetnsLayout l = netns_up(spec, state.path());
  EXPECT_TRUE(netns_exists(l.nodes[0].netns) && netns_exists(l.nodes[1].netns));
  EXPECT_TRUE(link_exists(l.bridge));
  ASSERT_TRUE(read_state(prefix, state.path()).has_value());

  const std::size_t bytes = 4'000'000;
  const double seconds = transfer_seconds(l.nodes[0], l.nodes[1], bytes);
  const double limit_s = static_cast<double>(bytes) * 8 / static_cast<double>(spec.bandwidth_bit_s);
  std::cout << "4 MB at 100 Mbit/s: " << seconds << " s, " << seconds / limit_s << " x size / rate\n";
  EXPECT_GT(seconds / limit_s, 0.9) << seconds << " s for " << bytes << " bytes at 100 Mbit/s";
  EXPECT_LT(seconds / limit_s, 3.0) << seconds << " s for " << bytes << " bytes at 100 Mbit/s";

  const std::vector<std::string> removed = netns_down(prefix, state.path());
  for (const std::string& name : {l.nodes[0].netns, l.nodes[1].netns, l.bridge})
    EXPECT_NE(std::find(removed.begin(), removed.end(), name), removed.end()) << name;
  EXPECT_FALSE(anything_named(prefix));
  EXPECT_FALSE(read_state(prefix, state.path()).has_value());
}

// A run that was never taken down (a crash) is cleaned by the next up; a
// namespace of a planned name that gpemu did not make is refused and kept.
TEST(NetnsShaping, UpCleansItsOwnLeftoversAndNothingElse) {
  const std::string prefix = test_prefix("gtc");
  if (const std::string why = netns_refused(prefix); !why.empty()) GTEST_SKIP() << why;
  gpemu::testing::TempDir state;
  NetnsSpec spec;
  spec.prefix = prefix;
  spec.nodes = 1;
  spec.bandwidth_bit_s = 1'000'000'000;
  netns_up(spec, state.path());
  spec.nodes = 2;
  std::vector<std::string> said;
  const NetnsLayout l = netns_up(spec, state.path(), [&](const std::string& s) { said.push_back(s); });
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said.front().find("removed " + prefix + "-0, left by an earlier"), std::string::npos) << said.front();
  EXPECT_EQ(l.nodes.size(), 2u);
  EXPECT_TRUE(netns_exists(prefix + "-1"));
  netns_down(prefix, state.path());
  EXPECT_FALSE(anything_named(prefix));

  // Not ours: refused, and still there afterwards.
  ASSERT_EQ(run_tool({"ip", "netns", "add", prefix + "-1"}).status, 0);
  const std::string e = error_of([&] { netns_up(spec, state.path()); });
  EXPECT_NE(e.find("network namespace '" + prefix + "-1' exists and no gpemu netns state file lists it"),
            std::string::npos)
      << e;
  EXPECT_TRUE(netns_exists(prefix + "-1"));
  EXPECT_FALSE(netns_exists(prefix + "-0"));  // nothing was made
  EXPECT_FALSE(read_state(prefix, state.path()).has_value());
  run_tool({"ip", "netns", "del", prefix + "-1"});
  EXPECT_FALSE(anything_named(prefix));
  EXPECT_NE(error_of([&] { netns_down(prefix, state.path()); }).find("no state file"), std::string::npos);
}

}  // namespace
