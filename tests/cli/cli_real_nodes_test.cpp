// `gpemu train` as one node of a job of several processes (torchrun's
// environment), two ranks on loopback: both finish the same epochs, and a
// rank killed mid-run makes the other stop with an error naming it, its
// finished epochs still printed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dist/node_group.h"
#include "netns/netns.h"
#include "support/dlio_test_util.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;

// A port no one listens on now (the kernel's pick, released).
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

struct Rank {
  pid_t pid = -1;
  fs::path out, err;
};

// gpemu with torchrun's (or mpirun's) variables for `rank` of 2, its stdout and stderr to files.
Rank start_rank(int rank, int port, const std::vector<std::string>& args, const fs::path& dir, int err_fd = -1,
                bool mpirun = false, const std::string& netns = "", const std::string& master = "127.0.0.1") {
  Rank r;
  r.out = dir / ("out" + std::to_string(rank));
  r.err = dir / ("err" + std::to_string(rank));
  r.pid = ::fork();
  if (r.pid == 0) {
    if (mpirun) {  // OpenMPI's names; MASTER_* as mpirun -x passes them
      ::setenv("OMPI_COMM_WORLD_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
      ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank).c_str(), 1);
    } else {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("LOCAL_RANK", "0", 1);
    }
    ::setenv("MASTER_ADDR", master.c_str(), 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    const int o = ::open(r.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = err_fd >= 0 ? err_fd : ::open(r.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<std::string> words;
    if (!netns.empty()) words = {"ip", "netns", "exec", netns};
    words.push_back(GPEMU_BINARY);
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  return r;
}

// Its exit status; -2 when it had not ended after `guard` (then it is killed).
int wait_rank(const Rank& r, std::chrono::seconds guard = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + guard;
  int st = 0;
  while (::waitpid(r.pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(r.pid, SIGKILL);
      ::waitpid(r.pid, &st, 0);
      return -2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

const std::vector<std::string> kJob = {"train", "--clock", "real", "--synthetic", "--model", "resnet18", "--gpu",
                                       "v100",  "-b",      "32",   "-n",          "3",       "--json"};

TEST(CliRealNodes, TwoRanksOnLoopbackFinishTheSameEpochs) {
  if (!gpemu::dist::have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  gpemu::testing::TempDir dir;
  const int port = free_port();
  std::vector<std::string> args = kJob;
  args.insert(args.end(), {"--epochs", "2"});
  const Rank zero = start_rank(0, port, args, dir.path()), one = start_rank(1, port, args, dir.path());
  ASSERT_EQ(wait_rank(zero), 0) << slurp(zero.err);
  ASSERT_EQ(wait_rank(one), 0) << slurp(one.err);
  for (const Rank* r : {&zero, &one}) {
    const nlohmann::json j = nlohmann::json::parse(slurp(r->out));
    EXPECT_EQ(j["epoch_times_s"].size(), 2u);
    EXPECT_EQ(j["iterations"], 6);
    EXPECT_EQ(j["real_nodes"]["nodes"], 2);
    EXPECT_EQ(j["real_nodes"]["exchanges"], 6);  // one network all-reduce per step
    // resnet18's 62 gradients: 11.7 M parameters in fp32.
    EXPECT_GT(j["real_nodes"]["bytes_per_exchange"].get<double>(), 40e6);
    EXPECT_GT(j["real_nodes"]["exchange_s"].get<double>(), 0);
  }
  EXPECT_EQ(nlohmann::json::parse(slurp(zero.out))["real_nodes"]["node"], 0);
  EXPECT_EQ(nlohmann::json::parse(slurp(one.out))["real_nodes"]["node"], 1);
}

// Rank 1 is killed once rank 0's progress bar (its stderr is a terminal)
// shows step 6 done: rank 0 has finished two epochs of 3 steps by then.
TEST(CliRealNodes, ARankKilledMidRunIsNamedAndTheOthersEpochsStay) {
  if (!gpemu::dist::have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  gpemu::testing::TempDir dir;
  const int port = free_port();
  std::vector<std::string> args = kJob;
  args.insert(args.end(), {"--epochs", "1000", "--dist-timeout", "20"});
  int master = -1, slave = -1;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  const Rank zero = start_rank(0, port, args, dir.path(), slave);
  ::close(slave);
  const Rank one = start_rank(1, port, args, dir.path());
  std::string terminal;
  bool killed = false;
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < guard) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) {
      char buf[4096];
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) break;  // rank 0 ended
      terminal.append(buf, static_cast<std::size_t>(n));
    }
    if (!killed && terminal.find("(6/3000)") != std::string::npos) {
      ::kill(one.pid, SIGKILL);
      killed = true;
    }
  }
  ::close(master);
  ASSERT_TRUE(killed) << terminal;
  EXPECT_EQ(wait_rank(one), -1);
  EXPECT_EQ(wait_rank(zero), 1);
  EXPECT_NE(terminal.find("gpemu: error: rank 0 of 2 (127.0.0.1): rank 1 went away (its process ended) during the "
                          "all-reduce of step"),
            std::string::npos)
      << terminal;
  const nlohmann::json j = nlohmann::json::parse(slurp(zero.out));
  // Every epoch it finished is there; the one cut short is not.
  EXPECT_GE(j["iterations"].get<int>(), 6);
  EXPECT_EQ(j["epoch_times_s"].size(), j["iterations"].get<std::size_t>() / 3) << j.dump();
}

// DLIO under its own launcher (mpirun -np 2; OpenMPI's variables here): each
// process is one of DLIO's ranks, rank 0 generates the files and rank 1
// waits for them before it reads its half.
TEST(CliRealNodes, DlioRanksUnderMpirunReadTheDataRankZeroGenerated) {
  gpemu::testing::TempDir dir;
  gpemu::dlio::testing::write_tiny_workload(dir / "tiny.yaml", dir / "data");
  const int port = free_port();
  const std::vector<std::string> args = {"train",  "--clock",       "virtual",
                                         "--json", "--dlio-config", (dir / "tiny.yaml").string()};
  const Rank zero = start_rank(0, port, args, dir.path(), -1, true),
             one = start_rank(1, port, args, dir.path(), -1, true);
  ASSERT_EQ(wait_rank(zero), 0) << slurp(zero.err);
  ASSERT_EQ(wait_rank(one), 0) << slurp(one.err);
  for (int r = 0; r < 2; ++r) {
    const nlohmann::json j = nlohmann::json::parse(slurp(r == 0 ? zero.out : one.out));
    EXPECT_EQ(j["gpus"], 2);
    EXPECT_EQ(j["ranks"], nlohmann::json::array({r}));
    EXPECT_EQ(j["generation"].contains("train"), r == 0);  // only rank 0 generated
  }
  // --gpus must agree with the launcher's processes.
  const std::vector<std::string> four = {
      "train", "--clock", "virtual", "--gpus", "4", "--dlio-config", (dir / "tiny.yaml").string()};
  const Rank bad = start_rank(0, free_port(), four, dir.path(), -1, true);
  EXPECT_EQ(wait_rank(bad), 1);
  EXPECT_NE(slurp(bad.err).find("--gpus 4 under mpirun of 2 processes: each process is one of DLIO's ranks"),
            std::string::npos)
      << slurp(bad.err);
}

// Two ranks in namespaces joined by 1 Gbit/s links (gpemu netns): each
// step's network all-reduce moves mobilenet_v2's 14 MB of gradients over the
// shaped link, so it takes at least its bytes over the rate (a ring of two
// sends each node's bytes once), where loopback took a tenth of that.
TEST(CliRealNodes, InNamespacesTheShapedLinkDecidesTheAllReduce) {
  if (!gpemu::dist::have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  const std::string prefix = "gtr" + std::to_string(::getpid() % 100000);
  if (const std::string why = gpemu::netns::netns_refused(prefix); !why.empty()) GTEST_SKIP() << why;
  gpemu::testing::TempDir dir;
  gpemu::netns::NetnsSpec spec;
  spec.prefix = prefix;
  spec.nodes = 2;
  spec.bandwidth_bit_s = 1'000'000'000;
  const gpemu::netns::NetnsLayout l = gpemu::netns::netns_up(spec, dir / "state");
  const std::vector<std::string> args = {"train", "--clock", "real", "--synthetic", "--model", "mobilenet_v2", "--gpu",
                                         "v100",  "-b",      "8",    "-n",          "3",       "--json"};
  const std::string master = l.nodes[0].address;
  const Rank zero = start_rank(0, 29500, args, dir.path(), -1, false, l.nodes[0].netns, master);
  const Rank one = start_rank(1, 29500, args, dir.path(), -1, false, l.nodes[1].netns, master);
  const int s0 = wait_rank(zero), s1 = wait_rank(one);
  gpemu::netns::netns_down(prefix, dir / "state");
  ASSERT_EQ(s0, 0) << slurp(zero.err);
  ASSERT_EQ(s1, 0) << slurp(one.err);
  for (const Rank* r : {&zero, &one}) {
    const nlohmann::json n = nlohmann::json::parse(slurp(r->out))["real_nodes"];
    EXPECT_EQ(n["exchanges"], 3);
    const double per_exchange = n["exchange_s"].get<double>() / 3;
    const double limit = n["bytes_per_exchange"].get<double>() * 8 / 1e9;
    std::cout << "rank " << n["node"] << ": " << per_exchange << " s an all-reduce, " << per_exchange / limit
              << " x bytes / rate\n";
    EXPECT_GT(per_exchange / limit, 0.9);
  }
}

}  // namespace
