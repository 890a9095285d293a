// The distributed cache across real nodes, its transport: a node's cache
// server and a client of it on loopback (hits, misses, bad frames, a server
// that went away), and two node groups trading what they cached and reading
// each other's samples.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "dist/cache_peer.h"
#include "dist/node_group.h"
#include "dist/tcp_store.h"
#include "gpemu/error.h"
#include "support/dist_loopback.h"

namespace {

using namespace gpemu::dist;
using namespace gpemu::dist::testing;
using namespace std::chrono_literals;

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// A cache of samples 3 ("three") and 7 (1000 bytes of 'x').
struct FakeCache {
  std::map<std::uint64_t, std::vector<std::byte>> held = {{3, bytes_of("three")},
                                                          {7, bytes_of(std::string(1000, 'x'))}};
  CachePeerLookup lookup() {
    return [this](std::uint64_t i) -> std::optional<std::span<const std::byte>> {
      const auto it = held.find(i);
      if (it == held.end()) return std::nullopt;
      return std::span<const std::byte>(it->second);
    };
  }
};

TEST(CachePeer, HitsMissesAndSeveralFetchesAtOnce) {
  FakeCache cache;
  CachePeerServer server("127.0.0.1", cache.lookup());
  CachePeerClient client(1, "127.0.0.1", server.port());
  std::vector<std::byte> out;
  ASSERT_TRUE(client.fetch(3, out));
  EXPECT_EQ(out, bytes_of("three"));
  EXPECT_FALSE(client.fetch(4, out));
  // Eight threads at once: each its own connection, every answer its own sample's.
  std::vector<std::future<bool>> all;
  for (int t = 0; t < 8; ++t)
    all.push_back(std::async(std::launch::async, [&] {
      std::vector<std::byte> mine;
      bool ok = true;
      for (int k = 0; k < 20; ++k) ok = ok && client.fetch(7, mine) && mine == cache.held[7] && !client.fetch(8, mine);
      return ok;
    }));
  for (auto& f : all) EXPECT_TRUE(f.get());
  EXPECT_EQ(server.hits_served(), 1u + 8 * 20);
  EXPECT_EQ(server.misses_served(), 1u + 8 * 20);
  EXPECT_EQ(server.bytes_served(), 5u + 8 * 20 * 1000);
}

TEST(CachePeer, BadFramesAreRefusedBothWays) {
  FakeCache cache;
  CachePeerServer server("127.0.0.1", cache.lookup());
  {
    // A client that is not one of ours: no hello, so the server closes the connection.
    const int fd = connect_to(server.port());
    ASSERT_EQ(::send(fd, "GET / HTTP/1.0\r\n\r\n", 18, 0), 18);
    timeval limit{5, 0};  // a server that kept it open would fail here, not hang
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    char c = 0;
    const ssize_t r = ::recv(fd, &c, 1, 0);
    EXPECT_TRUE(r == 0 || (r < 0 && errno == ECONNRESET))
        << r << " " << std::strerror(errno);  // closed, unread bytes and all
    ::close(fd);
  }
  // A sample larger than the client accepts is a bad frame, not an allocation.
  CachePeerLimits small;
  small.max_item_bytes = 100;
  CachePeerClient client(2, "127.0.0.1", server.port(), small);
  std::vector<std::byte> out;
  EXPECT_TRUE(client.fetch(3, out));
  const std::string e = error_of([&] { client.fetch(7, out); });
  EXPECT_NE(e.find("rank 2 at 127.0.0.1:" + std::to_string(server.port()) +
                   ": a bad frame: an answer of 1000 bytes, above the 100 accepted while sample 7 was asked"),
            std::string::npos)
      << e;

  // A server that answers with something else: the client says what came.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread fake([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    char buf[17];
    ::recv(fd, buf, 8, MSG_WAITALL);
    ::send(fd, "GPCACHE1", 8, 0);
    ::recv(fd, buf, 9, MSG_WAITALL);
    ::send(fd, "Z", 1, 0);
    ::close(fd);
  });
  CachePeerClient odd(3, "127.0.0.1", ntohs(a.sin_port));
  const std::string z = error_of([&] { odd.fetch(1, out); });
  fake.join();
  ::close(listener);
  EXPECT_NE(z.find("a bad frame: answer kind 90 where H (held) or M (not held) is accepted"), std::string::npos) << z;
}

TEST(CachePeer, AServerThatWentAwayIsNamedByItsRank) {
  FakeCache cache;
  auto server = std::make_unique<CachePeerServer>("127.0.0.1", cache.lookup());
  const int port = server->port();
  CachePeerClient client(1, "127.0.0.1", port);
  std::vector<std::byte> out;
  ASSERT_TRUE(client.fetch(3, out));  // a connection kept for the next fetch
  server.reset();
  const std::string e = error_of([&] { client.fetch(3, out); });
  EXPECT_NE(e.find("rank 1 at 127.0.0.1:" + std::to_string(port) + ": the connection closed"), std::string::npos) << e;
  const std::string again = error_of([&] { client.fetch(3, out); });  // nothing listens there now
  EXPECT_NE(again.find("rank 1's distributed cache at 127.0.0.1:" + std::to_string(port) + " cannot be reached"),
            std::string::npos)
      << again;
}

// Two nodes (threads) trade the lists of what each cached in an epoch and
// read a sample from the other's cache.
TEST(CachePeers, TwoNodesTradeTheirListsAndReadEachOthersSamples) {
  if (!have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  const int port = free_port();
  std::promise<void> done[2];
  std::shared_future<void> done_f[2] = {done[0].get_future().share(), done[1].get_future().share()};
  auto node = [&](int rank) {
    NodeGroupOptions o;
    o.timeout = 5s;
    auto group = std::make_shared<NodeGroup>(loopback_env(rank, 2, port), o);
    FakeCache cache;
    cache.held = {{static_cast<std::uint64_t>(10 + rank), bytes_of("sample of node " + std::to_string(rank))}};
    CachePeers peers(group, cache.lookup(), 1 << 20, "a test cache");
    const auto all = peers.exchange(0, {static_cast<std::uint64_t>(10 + rank), 100});
    EXPECT_EQ(all, (std::vector<std::vector<std::uint64_t>>{{10, 100}, {11, 100}}));
    EXPECT_EQ(peers.exchange(1, {}), (std::vector<std::vector<std::uint64_t>>{{}, {}}));
    std::vector<std::byte> out;
    const int other = 1 - rank;
    EXPECT_TRUE(peers.fetch(other, static_cast<std::uint64_t>(10 + other), out));
    EXPECT_EQ(out, bytes_of("sample of node " + std::to_string(other)));
    EXPECT_FALSE(peers.fetch(other, 12, out));
    // Each keeps serving (and rank 0 its store) until both have read.
    done[rank].set_value();
    done_f[other].wait();
    return peers.server().hits_served();
  };
  auto zero = std::async(std::launch::async, node, 0);
  auto one = std::async(std::launch::async, node, 1);
  EXPECT_EQ(zero.get(), 1u);
  EXPECT_EQ(one.get(), 1u);
}

// Ranks whose caches or datasets differ would name different samples by one
// index: each refuses the other at the start, naming both.
TEST(CachePeers, RanksThatServeDifferentDataAreRefused) {
  if (!have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  const int port = free_port();
  std::promise<void> done[2];
  std::shared_future<void> done_f[2] = {done[0].get_future().share(), done[1].get_future().share()};
  auto node = [&](int rank) {
    NodeGroupOptions o;
    o.timeout = 5s;
    auto group = std::make_shared<NodeGroup>(loopback_env(rank, 2, port), o);
    FakeCache cache;
    const std::string error =
        error_of([&] { CachePeers peers(group, cache.lookup(), 1 << 20, rank == 0 ? "64 samples" : "65 samples"); });
    done[rank].set_value();  // rank 0's store stays until both have compared
    done_f[1 - rank].wait();
    return error;
  };
  auto zero = std::async(std::launch::async, node, 0);
  auto one = std::async(std::launch::async, node, 1);
  const std::string e0 = zero.get(), e1 = one.get();
  EXPECT_NE(e0.find("rank 0 has 64 samples, rank 1 65 samples: give every rank the same data, --distributed-cache "
                    "and --cache-policy"),
            std::string::npos)
      << e0;
  EXPECT_NE(e1.find("rank 1 has 65 samples, rank 0 64 samples"), std::string::npos) << e1;
}

// Rank 1 is a process of its own here, killed once rank 0 has read from it:
// rank 0's next read fails at once and names it, as a failed all-reduce does.
TEST(CachePeers, AReadFromARankKilledMidRunNamesIt) {
  if (!have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  const int port = free_port();
  auto env = [port](int rank) { return loopback_env(rank, 2, port); };
  NodeGroupOptions o;
  o.timeout = 5s;
  const pid_t child = ::fork();
  if (child == 0) {  // rank 1: serves sample 11 until it is killed
    try {
      auto group = std::make_shared<NodeGroup>(env(1), o);
      FakeCache cache;
      cache.held = {{11, bytes_of("eleven")}};
      CachePeers peers(group, cache.lookup(), 1 << 20, "a test cache");
      peers.exchange(0, {11});
      std::this_thread::sleep_for(30s);
    } catch (...) {
    }
    ::_exit(0);
  }
  std::string error;
  {
    auto group = std::make_shared<NodeGroup>(env(0), o);
    FakeCache cache;
    CachePeers peers(group, cache.lookup(), 1 << 20, "a test cache");
    EXPECT_EQ(peers.exchange(0, {}), (std::vector<std::vector<std::uint64_t>>{{}, {11}}));
    std::vector<std::byte> out;
    EXPECT_TRUE(peers.fetch(1, 11, out));
    EXPECT_EQ(out, bytes_of("eleven"));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    const auto t0 = std::chrono::steady_clock::now();
    error = error_of([&] { peers.fetch(1, 11, out); });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);  // not a timeout
  }
  EXPECT_NE(error.find("rank 0 of 2 (127.0.0.1): rank 1 went away (its process ended) during the read of sample 11 "
                       "from rank 1's distributed cache: rank 1 at 127.0.0.1:"),
            std::string::npos)
      << error;
}

}  // namespace
