// One process per node: the launcher's environment, the rendezvous store and
// the network all-reduce among node groups (here threads on loopback; the
// CLI tests run real processes and kill one).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "dist/launch_env.h"
#include "dist/node_group.h"
#include "dist/tcp_store.h"
#include "gpemu/error.h"
#include "support/dist_loopback.h"

namespace {

using namespace gpemu::dist;
using namespace gpemu::dist::testing;
using namespace std::chrono_literals;

std::optional<LaunchEnv> env_of(const std::map<std::string, std::string>& vars) {
  return read_launch_env([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(LaunchEnv, TorchrunAndMpirunVariables) {
  EXPECT_FALSE(env_of({}).has_value());
  EXPECT_FALSE(env_of({{"WORLD_SIZE", "1"}, {"RANK", "0"}}).has_value());  // one process: nothing to join
  const auto t = env_of({{"WORLD_SIZE", "4"},
                         {"RANK", "2"},
                         {"LOCAL_RANK", "0"},
                         {"MASTER_ADDR", "10.213.0.1"},
                         {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->launcher, "torchrun");
  EXPECT_EQ(t->rank, 2);
  EXPECT_EQ(t->world_size, 4);
  EXPECT_EQ(t->master_addr, "10.213.0.1");
  EXPECT_EQ(t->master_port, 29500);
  const auto m = env_of({{"OMPI_COMM_WORLD_SIZE", "2"},
                         {"OMPI_COMM_WORLD_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                         {"MASTER_ADDR", "h0"},
                         {"MASTER_PORT", "1234"}});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->launcher, "mpirun");
  EXPECT_EQ(m->rank, 1);

  EXPECT_NE(error_of([] {
              env_of({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
            }).find("RANK=2: give a whole number from 0 to 1"),
            std::string::npos);
  // torchrun --master_port: its agent's store holds MASTER_PORT.
  EXPECT_NE(error_of([] {
              env_of({{"WORLD_SIZE", "2"},
                      {"RANK", "0"},
                      {"MASTER_ADDR", "a"},
                      {"MASTER_PORT", "29500"},
                      {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
            }).find("run torchrun with --rdzv_backend c10d --rdzv_endpoint HOST:PORT"),
            std::string::npos);
  EXPECT_TRUE(env_of({{"WORLD_SIZE", "2"},
                      {"RANK", "0"},
                      {"MASTER_ADDR", "a"},
                      {"MASTER_PORT", "29500"},
                      {"TORCHELASTIC_USE_AGENT_STORE", "False"}})
                  .has_value());
  EXPECT_NE(error_of([] {
              env_of({{"WORLD_SIZE", "two"}});
            }).find("WORLD_SIZE=two: give a whole number"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}});
            }).find("mpirun -x MASTER_ADDR="),
            std::string::npos);
  EXPECT_NE(error_of([] {
              env_of({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}});
            }).find("MASTER_PORT=70000"),
            std::string::npos);
}

TEST(TcpStore, KeysWaitAndAClientThatLeavesWithoutGoodbyeIsGone) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStoreClient a("127.0.0.1", server.port(), 0, 5s);
  auto b = std::make_unique<TcpStoreClient>("127.0.0.1", server.port(), 1, 5s);
  auto later = std::async(std::launch::async, [&] { return a.get("k", 5s); });
  b->set("k", {'h', 'i'});
  EXPECT_EQ(later.get(), (std::vector<char>{'h', 'i'}));
  {
    TcpStoreClient impatient("127.0.0.1", server.port(), 4, 5s);
    const std::string e = error_of([&] { impatient.get("never", 100ms); });
    EXPECT_NE(e.find("no answer for 'never' from the store at 127.0.0.1:"), std::string::npos) << e;
  }  // it hung up without its goodbye after the timeout: rank 4 is gone from now on

  TcpStoreClient c("127.0.0.1", server.port(), 2, 5s);
  EXPECT_EQ(c.gone(5s), std::vector<int>{4});
  b.reset();  // a goodbye: not gone
  EXPECT_EQ(c.gone(10ms), std::vector<int>{4});
  a_rank_process_ends(server.port(), '3');  // its connection just closes, as a killed process's does
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (c.gone(10ms).size() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(c.gone(10ms), (std::vector<int>{3, 4}));
}

// Rank 0's own process asks its server which rank went away right after a
// collective failed: the peer's socket reset can reach rank 0 before the
// server's thread has read the end of that peer's store connection, so the
// question waits for an answer instead of reading an empty list.
TEST(TcpStore, TheServerWaitsForARankOtherThanItsOwnToBeSeenGone) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStoreClient own("127.0.0.1", server.port(), 0, 5s);
  EXPECT_TRUE(server.gone(10ms, 0).empty());  // nobody left: it waited and says so
  {
    TcpStoreClient impatient("127.0.0.1", server.port(), 0, 5s);  // rank 0 itself, timing out
    error_of([&] { impatient.get("never", 10ms); });
  }
  EXPECT_EQ(server.gone(5s, -1), std::vector<int>{0});  // any rank: waits for rank 0's end
  auto answer = std::async(std::launch::async, [&] { return server.gone(5s, 0); });
  a_rank_process_ends(server.port(), '2');  // its connection just closes, as a killed process's does
  // Rank 0 counted gone alone does not end the wait; rank 2 does.
  EXPECT_EQ(answer.get(), (std::vector<int>{0, 2}));
}

// A key awaited from a rank that went away may never come: the wait ends
// when the store sees any rank go, not after the timeout, and the client
// stays usable (it names who went with gone()).
TEST(TcpStore, AWaitForAKeyEndsWhenARankGoesAway) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStoreClient a("127.0.0.1", server.port(), 0, 5s);
  const auto t0 = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] { return error_of([&] { a.get("from rank 3", 20s); }); });
  a_rank_process_ends(server.port(), '3');  // its connection just closes, as a killed process's does
  const std::string e = waiting.get();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_NE(e.find("a rank went away before 'from rank 3' came to the store at 127.0.0.1:"), std::string::npos) << e;
  EXPECT_EQ(a.gone(10ms), std::vector<int>{3});
  a.set("k", {'x'});
  EXPECT_EQ(a.get("k", 1s), std::vector<char>{'x'});  // a key that is there still comes
}

TEST(TcpStore, AnAddressThatDoesNotResolveIsNamed) {
  const std::string e = error_of([] { resolve_ipv4("no-such-host.invalid", 1); });
  EXPECT_NE(e.find("MASTER_ADDR no-such-host.invalid: cannot resolve it as an IPv4 address"), std::string::npos) << e;
}

TEST(TcpStore, NoServerIsOneLineNamingTheAddress) {
  int port = 0;
  {
    TcpStoreServer s("127.0.0.1", 0);
    port = s.port();
  }
  const std::string e = error_of([&] { TcpStoreClient("127.0.0.1", port, 1, 200ms); });
  EXPECT_NE(e.find("rank 1: no rank 0 answered at MASTER_ADDR:MASTER_PORT 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << e;
}

TEST(NodeGroup, TwoNodesAllReduceEachStepAndCatchARankOutOfStep) {
  if (!have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  const int port = free_port();
  NodeGroupOptions o;
  o.local_gpus = 2;
  o.gradient_bytes = 1 << 20;
  o.timeout = 10s;
  auto node = [&](int rank, std::uint64_t last_step) {
    LaunchEnv e;
    e.launcher = "torchrun";
    e.rank = rank;
    e.world_size = 2;
    e.master_addr = "localhost";  // a name, as torchrun's --master_addr often is
    e.master_port = port;
    NodeGroup g(e, o);
    EXPECT_EQ(g.rail_bytes(), 512u * 1024);
    std::string error;
    try {
      for (std::uint64_t step = 1; step <= 3; ++step) {
        std::thread other([&] { g.exchange(1, step); });  // the node's second GPU, its own rail
        g.exchange(0, step);
        other.join();
      }
      EXPECT_EQ(g.exchanges(), 6u);
      g.exchange(0, last_step);
    } catch (const gpemu::Error& ex) {
      error = ex.what();
    }
    return error;
  };
  auto zero = std::async(std::launch::async, node, 0, 4);
  auto one = std::async(std::launch::async, node, 1, 5);
  const std::string e0 = zero.get(), e1 = one.get();
  EXPECT_NE(e0.find("rank 0: the ranks are out of step: at step 4 of GPU 0"), std::string::npos) << e0;
  EXPECT_NE(e1.find("rank 1: the ranks are out of step: at step 5 of GPU 0"), std::string::npos) << e1;
}

// A rank that never starts: rank 0, which serves the store, names it after
// the rendezvous times out (not itself, whose own wait ended its client).
TEST(NodeGroup, RankZeroNamesARankThatNeverJoined) {
  if (!have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  NodeGroupOptions o;
  o.timeout = 300ms;
  std::string error;
  try {
    NodeGroup g(loopback_env(0, 3, free_port()), o);
  } catch (const gpemu::Error& ex) {
    error = ex.what();
  }
  EXPECT_NE(error.find("rank 1, rank 2 never joined"), std::string::npos) << error;
  EXPECT_EQ(error.find("rank 0 went away"), std::string::npos) << error;
}

}  // namespace
