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

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dist/node_group.h"
#include "gpemu/pipeline.h"
#include "netns/netns.h"
#include "support/dlio_test_util.h"
#include "support/run_gpemu.h"
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

// Rank 0 (its stderr a terminal, whose progress bar is read) and rank 1; rank
// 1 is killed once `kill_when` holds for what rank 0's terminal shows.
struct KilledRun {
  Rank zero, one;
  std::string terminal;  // what rank 0's terminal showed until it ended
  bool killed = false;
};
KilledRun run_and_kill_rank_one(int port, const std::vector<std::string>& args, const fs::path& dir,
                                const std::function<bool(const std::string&)>& kill_when) {
  KilledRun k;
  int master = -1, slave = -1;
  EXPECT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  // Only the test holds the terminal's other end: a rank holding it too would
  // block on a full terminal once the test stops reading.
  ::fcntl(master, F_SETFD, FD_CLOEXEC);
  k.zero = start_rank(0, port, args, dir, slave);
  ::close(slave);
  k.one = start_rank(1, port, args, dir);
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < guard) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) {
      char buf[4096];
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) break;  // rank 0 ended
      k.terminal.append(buf, static_cast<std::size_t>(n));
    }
    if (!k.killed && kill_when(k.terminal)) {
      ::kill(k.one.pid, SIGKILL);
      k.killed = true;
    }
  }
  ::close(master);
  if (!k.killed)  // the test fails; no rank is left running after it
    for (const Rank* r : {&k.zero, &k.one}) {
      ::kill(r->pid, SIGKILL);
      ::waitpid(r->pid, nullptr, 0);
    }
  return k;
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
  const KilledRun k = run_and_kill_rank_one(port, args, dir.path(), [](const std::string& t) {
    return t.find("(6/3000)") != std::string::npos;
  });
  const Rank &zero = k.zero, &one = k.one;
  const std::string& terminal = k.terminal;
  ASSERT_TRUE(k.killed) << terminal;
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

// The distributed cache across real nodes: two ranks (one GPU each) train 3
// epochs of 64 small JPEGs with loader caches that hold everything. What
// each rank reads follows the directory's rule, computed here from the
// sampler's shards: in epoch 1 everything comes from storage (and is
// cached); later, a sample of the rank's epoch-1 shard is a local hit and
// any other was cached by the other rank, so it comes over TCP, its file's
// bytes crossing the network.
struct CacheRun {
  gpemu::testing::TempDir dir;
  gpemu::pipeline::Dataset data;
  CacheRun() {
    gpemu::pipeline::generate_image_dataset(dir / "data", 2, 64, 5, 2.0);
    data = gpemu::pipeline::open_dataset_folder(dir / "data");
  }
  std::vector<std::string> args(const std::string& kind, int epochs, int batch = 8) const {
    return {"train",
            "--clock",
            "real",
            "--data",
            (dir / "data").string(),
            "--model",
            "resnet18",
            "--gpu",
            "v100",
            "-b",
            std::to_string(batch),
            "--workers",
            "2",
            "--cache-bytes",
            "64M",
            "--seed",
            "3",
            "--json",
            "--distributed-cache",
            kind,
            "--epochs",
            std::to_string(epochs)};
  }
  // Rank `rank`'s shard of epoch `epoch` (0-based), as its loader draws it.
  std::vector<std::size_t> shard(int rank, std::uint64_t epoch) const {
    gpemu::pipeline::LoaderOptions lo;
    lo.shuffle = true;
    lo.seed = 3;
    lo.rank = rank;
    lo.world_size = 2;
    return gpemu::pipeline::Sampler(data.size(), gpemu::pipeline::sampler_options(lo)).indices(epoch);
  }
};

// Each rank's reads in `out` (`epochs` epochs) are what the directory's rule predicts.
void expect_partitioned_reads(const CacheRun& run, int rank, const std::string& out, std::uint64_t epochs = 3) {
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["reads"]["distributed_cache"], "partitioned");
  const nlohmann::json& per_epoch = j["reads"]["per_node_epoch"];
  ASSERT_EQ(per_epoch.size(), epochs) << j.dump();
  const std::vector<std::size_t> first = run.shard(rank, 0);
  const std::set<std::size_t> cached(first.begin(), first.end());
  for (std::uint64_t e = 0; e < epochs; ++e) {
    const nlohmann::json& n = per_epoch[e];
    EXPECT_EQ(n["node"], rank);
    EXPECT_EQ(n["epoch"], e);
    std::uint64_t remote = 0, remote_bytes = 0, local = 0, storage = 0, storage_bytes = 0;
    for (const std::size_t i : run.shard(rank, e)) {
      if (e == 0) {
        ++storage;
        storage_bytes += run.data.samples[i].length;
      } else if (cached.count(i) != 0) {
        ++local;
      } else {
        ++remote;
        remote_bytes += run.data.samples[i].length;
      }
    }
    if (e > 0) {
      EXPECT_GT(remote, 0u);  // the shards move between epochs
    }
    EXPECT_EQ(n["cache_hits"], local) << n.dump();
    EXPECT_EQ(n["remote_hits"], remote) << n.dump();
    EXPECT_EQ(n["network_bytes"], remote_bytes) << n.dump();
    EXPECT_EQ(n["storage_reads"], storage) << n.dump();
    EXPECT_EQ(n["storage_bytes"], storage_bytes) << n.dump();
  }
}

TEST(CliRealNodes, APartitionedCacheReadsWhatTheOtherRankCachedOverTcp) {
  if (!gpemu::dist::have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  CacheRun run;
  const int port = free_port();
  const auto args = run.args("partitioned", 3);
  const Rank zero = start_rank(0, port, args, run.dir.path()), one = start_rank(1, port, args, run.dir.path());
  ASSERT_EQ(wait_rank(zero), 0) << slurp(zero.err);
  ASSERT_EQ(wait_rank(one), 0) << slurp(one.err);
  expect_partitioned_reads(run, 0, slurp(zero.out));
  expect_partitioned_reads(run, 1, slurp(one.out));
}

// The same across two namespaces joined by shaped 10 Gbit/s links (gpemu
// netns): the samples cross real veth pairs between the ranks' addresses.
// (Each step's all-reduce moves resnet18's 46.8 MB: a slower link would make
// the test long, not the cache's reads different.)
TEST(CliRealNodes, APartitionedCacheAcrossNamespaces) {
  if (!gpemu::dist::have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  const std::string prefix = "gtc" + std::to_string(::getpid() % 100000);
  if (const std::string why = gpemu::netns::netns_refused(prefix); !why.empty()) GTEST_SKIP() << why;
  CacheRun run;
  gpemu::netns::NetnsSpec spec;
  spec.prefix = prefix;
  spec.nodes = 2;
  spec.bandwidth_bit_s = 10'000'000'000;
  const gpemu::netns::NetnsLayout l = gpemu::netns::netns_up(spec, run.dir / "state");
  const auto args = run.args("partitioned", 2);
  const std::string master = l.nodes[0].address;
  const Rank zero = start_rank(0, 29500, args, run.dir.path(), -1, false, l.nodes[0].netns, master);
  const Rank one = start_rank(1, 29500, args, run.dir.path(), -1, false, l.nodes[1].netns, master);
  const int s0 = wait_rank(zero), s1 = wait_rank(one);
  gpemu::netns::netns_down(prefix, run.dir / "state");
  ASSERT_EQ(s0, 0) << slurp(zero.err);
  ASSERT_EQ(s1, 0) << slurp(one.err);
  expect_partitioned_reads(run, 0, slurp(zero.out), 2);
  expect_partitioned_reads(run, 1, slurp(one.out), 2);
  EXPECT_EQ(nlohmann::json::parse(slurp(one.out))["real_nodes"]["address"], l.nodes[1].address);
}

// Locality-aware: each rank visits its epoch-1 shard every epoch, so it
// reads only what it cached itself. Two GPUs a node here: the node's two
// loaders share its cache and wait for each other when an epoch begins.
TEST(CliRealNodes, ALocalityAwareCacheHasNoRemoteHits) {
  if (!gpemu::dist::have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  CacheRun run;
  const int port = free_port();
  std::vector<std::string> args = run.args("locality-aware", 2);
  args.insert(args.end(), {"--gpus", "2"});
  const Rank zero = start_rank(0, port, args, run.dir.path()), one = start_rank(1, port, args, run.dir.path());
  ASSERT_EQ(wait_rank(zero), 0) << slurp(zero.err);
  ASSERT_EQ(wait_rank(one), 0) << slurp(one.err);
  for (const Rank* r : {&zero, &one}) {
    const nlohmann::json epochs = nlohmann::json::parse(slurp(r->out))["reads"]["per_node_epoch"];
    ASSERT_EQ(epochs.size(), 2u) << epochs.dump();
    EXPECT_EQ(epochs[0]["storage_reads"], 32);
    EXPECT_EQ(epochs[1]["cache_hits"], 32);
    EXPECT_EQ(epochs[1]["storage_reads"], 0);
    for (const auto& n : epochs) {
      EXPECT_EQ(n["remote_hits"], 0);
      EXPECT_EQ(n["network_bytes"], 0);
    }
  }
}

// Rank 1 is killed in the middle of the second epoch (8 steps of 4 samples
// an epoch), when rank 0's samples come from its cache: rank 0 stops with an
// error naming it (its read of a sample or the step's all-reduce, whichever
// notices first), its finished epoch printed.
TEST(CliRealNodes, APartitionedCachesPeerKilledMidEpochIsNamed) {
  if (!gpemu::dist::have_gloo()) GTEST_SKIP() << "built without gloo (libgloo-dev)";
  CacheRun run;
  const int port = free_port();
  std::vector<std::string> args = run.args("partitioned", 1000, 4);
  args.insert(args.end(), {"--dist-timeout", "20"});
  // The progress bar's last "(step/8000)": past the middle of the second epoch, rank 1 goes.
  const KilledRun k = run_and_kill_rank_one(port, args, run.dir.path(), [](const std::string& t) {
    const std::size_t at = t.rfind('(');
    return at != std::string::npos && t.find("/8000)", at) != std::string::npos && std::atoi(t.c_str() + at + 1) >= 12;
  });
  const Rank &zero = k.zero, &one = k.one;
  const std::string& terminal = k.terminal;
  ASSERT_TRUE(k.killed) << terminal;
  EXPECT_EQ(wait_rank(one), -1);
  EXPECT_EQ(wait_rank(zero), 1);
  EXPECT_NE(terminal.find("gpemu: error: rank 0 of 2 (127.0.0.1): rank 1 went away (its process ended) during the "),
            std::string::npos)
      << terminal;
  const nlohmann::json j = nlohmann::json::parse(slurp(zero.out));
  EXPECT_GE(j["epoch_times_s"].size(), 1u) << j.dump();
  EXPECT_EQ(j["epoch_times_s"].size(), j["iterations"].get<std::size_t>() / 8) << j.dump();
}

// One process is one node: under the real clock without a launcher there is
// nothing to share, and with one the cache is made of the nodes' loader caches.
TEST(CliRealNodes, ADistributedCacheWithNothingToShareIsRefused) {
  CacheRun run;
  std::vector<std::string> args = run.args("partitioned", 1);
  std::string line;
  for (const std::string& a : args) line += (line.empty() ? "" : " ") + a;
  const auto alone = gpemu::testing::run_gpemu(line);
  EXPECT_EQ(alone.status, 1);
  EXPECT_NE(alone.err.find("--distributed-cache partitioned under the real clock shares the loader caches of the "
                           "nodes of a job of several processes (torchrun or mpirun, one per node); this process is "
                           "the only node"),
            std::string::npos)
      << alone.err;
  args.erase(std::find(args.begin(), args.end(), "--cache-bytes"), std::find(args.begin(), args.end(), "--seed"));
  const Rank no_cache = start_rank(0, free_port(), args, run.dir.path());
  EXPECT_EQ(wait_rank(no_cache), 1);
  EXPECT_NE(slurp(no_cache.err)
                .find("--distributed-cache partitioned is made of the nodes' loader caches: give each "
                      "node's (--cache-bytes)"),
            std::string::npos)
      << slurp(no_cache.err);
}

}  // namespace
