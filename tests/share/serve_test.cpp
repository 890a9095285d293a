// `gpemu serve` (share.h, "serve"): real processes' requests meeting on one
// emulated GPU: the protocol, memory shared and reclaimed, isolation.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/interrupt.h"
#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/share.h"
#include "share/serve.h"
#include "support/temp_dir.h"

namespace gpemu {
namespace {

using gpemu::testing::TempDir;

// A server on its own thread for one test.
struct Served {
  explicit Served(ServeOptions o) : server(std::move(o)), thread([this] { server.run(); }) {}
  ~Served() {
    server.stop();
    thread.join();
  }
  ShareServer server;
  std::thread thread;
};

ServeOptions options(const TempDir& dir, const char* gpu = "V100-PCIE-16GB", SharePolicy p = SharePolicy::Mps) {
  ServeOptions o;
  o.gpu = &find_gpu(gpu);
  o.share.policy = p;
  o.socket = dir.path() / "s.sock";
  return o;
}

// Polls the server's process list until `name` is gone (its thread reclaims
// it after the connection closes); false if it is still there after 10 s.
bool gone(ServeClient& monitor, const std::string& name) {
  for (int i = 0; i < 1000; ++i) {
    bool found = false;
    const nlohmann::json smi = monitor.request({{"op", "smi"}});
    for (const auto& p : smi["gpus"][0]["processes"]) found |= p["name"] == name;
    if (!found) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The socket is bound under a temporary name and renamed once it listens, so
// a client that waits for the path to appear is never refused; nothing of
// the temporary name is left.
TEST(Serve, TheSocketsPathAppearsOnlyOnceItListens) {
  TempDir dir;
  Served s(options(dir));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"s.sock"});
  ServeClient c(s.server.socket_path(), {"early", 0, 0, ""});
  EXPECT_EQ(c.hello_reply()["gpu"]["id"], "V100-PCIE-16GB");
}

TEST(Serve, AClientAllocatesLaunchesAndSynchronizes) {
  TempDir dir;
  Served s(options(dir));
  ServeClient c(s.server.socket_path(), {"job", 0, 0, ""});
  EXPECT_EQ(c.hello_reply()["gpu"]["id"], "V100-PCIE-16GB");
  EXPECT_EQ(c.hello_reply()["gpu"]["policy"], "mps");
  const std::uint64_t p = c.malloc(100 << 20);
  EXPECT_NE(p, 0u);
  const auto mem = c.request({{"op", "memory"}});
  EXPECT_EQ(mem["allocated_bytes"], 100 << 20);
  c.free(p);
  const Time before = c.sync();
  const Time end = c.batch(5 * kMillisecond);
  EXPECT_GE(end - before, 5 * kMillisecond);
  c.kernel(kMillisecond, {1.0F, 0.5F});
  EXPECT_GE(c.sync(), end + kMillisecond);
}

// What a PyTorch script's process needs beyond one stream: streams of its
// own, events recorded, waited for and timed, per-stream and whole-device
// syncs (gpemu torch --connect).
TEST(Serve, StreamsAndEventsOrderAClientsWork) {
  TempDir dir;
  Served s(options(dir));
  ServeClient c(s.server.socket_path(), {"torch", 0, 0, ""});
  const auto s1 = c.call({{"op", "stream"}})["stream"].get<int>();
  const auto s2 = c.call({{"op", "stream"}})["stream"].get<int>();
  EXPECT_EQ(s1, 1);
  EXPECT_EQ(s2, 2);
  // A long kernel on stream 1, an event after it; stream 2 waits for the
  // event, so its short kernel cannot end before the long one has.
  c.call({{"op", "kernel"}, {"ns", 300 * kMillisecond}, {"stream", s1}});
  c.call({{"op", "record"}, {"event", 7}, {"stream", s1}});
  c.call({{"op", "wait"}, {"event", 7}, {"stream", s2}});
  c.call({{"op", "kernel"}, {"ns", kMillisecond}, {"stream", s2}});
  const Time event_end = c.call({{"op", "event_sync"}, {"event", 7}})["end_ns"].get<Time>();
  const Time s2_end = c.call({{"op", "sync"}, {"stream", s2}})["end_ns"].get<Time>();
  EXPECT_GE(s2_end, event_end + kMillisecond);
  EXPECT_TRUE(c.call({{"op", "query"}, {"event", 7}})["done"].get<bool>());
  EXPECT_TRUE(c.call({{"op", "query"}, {"stream", s1}})["done"].get<bool>());
  // Timing events: at least the kernel between them.
  c.call({{"op", "record"}, {"event", 8}, {"stream", s1}});
  c.call({{"op", "kernel"}, {"ns", 20 * kMillisecond}, {"stream", s1}});
  c.call({{"op", "record"}, {"event", 9}, {"stream", s1}});
  EXPECT_GE(c.call({{"op", "elapsed"}, {"start", 8}, {"end", 9}})["ms"].get<double>(), 20.0);
  // A device-wide sync waits for every stream.
  c.call({{"op", "kernel"}, {"ns", 5 * kMillisecond}, {"stream", s2}});
  const Time all = c.call({{"op", "sync"}, {"device", true}})["end_ns"].get<Time>();
  EXPECT_GE(all, c.call({{"op", "sync"}, {"stream", s2}})["end_ns"].get<Time>());
  // Allocations name their stream; the reply has the block's size.
  const auto m = c.call({{"op", "malloc"}, {"bytes", 1000}, {"stream", s1}});
  EXPECT_EQ(m["size"], 1024);
  c.call({{"op", "event_free"}, {"event", 7}});
  // Bad streams and events are errors to this client, named.
  for (const nlohmann::json& bad :
       {nlohmann::json{{"op", "kernel"}, {"ns", 1}, {"stream", 3}}, nlohmann::json{{"op", "wait"}, {"event", 7}},
        nlohmann::json{{"op", "record"}, {"event", 0}}, nlohmann::json{{"op", "elapsed"}, {"start", 8}, {"end", 70}},
        nlohmann::json{{"op", "sync"}, {"device", "yes"}}}) {
    const auto r = c.request(bad);
    EXPECT_FALSE(r["ok"].get<bool>()) << bad.dump();
    EXPECT_EQ(r["kind"], "input") << bad.dump() << " -> " << r.dump();
  }
  EXPECT_THROW(c.call({{"op", "query"}, {"event", 12345}}), InputError);
}

// Posted requests (a launch returns at once): their replies are read before
// the next call's, and a refused one surfaces there.
TEST(Serve, PostedRequestsAreCheckedAtTheNextCall) {
  TempDir dir;
  Served s(options(dir));
  ServeClient c(s.server.socket_path(), {"poster", 0, 0, ""});
  for (int i = 0; i < 600; ++i) c.post({{"op", "kernel"}, {"ns", 1000}});  // past the unread-reply bound
  const Time end = c.sync();
  EXPECT_GE(end, 600 * 1000);
  c.post({{"op", "kernel"}, {"ns", -5}});
  c.post({{"op", "kernel"}, {"ns", 1000}});
  EXPECT_THROW(c.sync(), InputError);
  EXPECT_GE(c.sync(), end + 1000);  // the good one after the bad one ran; the connection goes on
}

TEST(Serve, ABadRequestIsAnErrorToThatClientOnly) {
  TempDir dir;
  Served s(options(dir));
  ServeClient c(s.server.socket_path(), {"a", 0, 0, ""});
  for (const auto& [request, kind] :
       std::vector<std::pair<nlohmann::json, std::string>>{{{{"op", "launch"}}, "input"},
                                                           {{{"op", "free"}, {"ptr", 12345}}, "input"},
                                                           {{{"op", "kernel"}, {"ns", -1}}, "input"},
                                                           {{{"op", "kernel"}, {"ns", 10}, {"sm", 2}}, "input"},
                                                           {{{"op", "malloc"}, {"bytes", "lots"}}, "input"},
                                                           {{{"op", "hello"}}, "protocol"},
                                                           {{1, 2, 3}, "input"}}) {
    const auto r = c.request(request);
    EXPECT_FALSE(r["ok"].get<bool>()) << request.dump();
    EXPECT_EQ(r["kind"], kind) << request.dump() << " -> " << r.dump();
  }
  EXPECT_GT(c.malloc(1 << 20), 0u);  // still served
  // Nothing said before hello; and a line that is not JSON.
  ServeClient raw(s.server.socket_path());
  EXPECT_EQ(raw.request({{"op", "malloc"}, {"bytes", 10}})["kind"], "protocol");
  EXPECT_EQ(raw.request({{"op", "smi"}})["ok"], true);
}

// N12: a client's name is printed by `gpemu smi`; one with escape sequences
// could take over the terminal of whoever runs it.
TEST(Serve, AHelloWithControlCharactersInTheNameIsRefused) {
  TempDir dir;
  Served s(options(dir));
  ServeClient raw(s.server.socket_path());
  const auto r = raw.request({{"op", "hello"}, {"name", "\x1b]0;owned\x07\x1b[2J\r\nGPU  0  fake-line"}});
  EXPECT_FALSE(r.value("ok", true)) << r.dump();
  EXPECT_EQ(r.value("kind", ""), "input") << r.dump();
  EXPECT_NE(r.value("error", "").find("'name'"), std::string::npos) << r.dump();
  EXPECT_NE(r.value("error", "").find("without control characters"), std::string::npos) << r.dump();
  EXPECT_TRUE(s.server.smi()["gpus"][0]["processes"].empty());
  ServeClient ok(s.server.socket_path(), {"train.py (rank 0)", 0, 0, ""});
  EXPECT_EQ(s.server.smi()["gpus"][0]["processes"][0]["name"], "train.py (rank 0)");
}

TEST(Serve, GarbageLinesGetErrorsAndTheConnectionStaysUsable) {
  TempDir dir;
  Served s(options(dir));
  const std::string path = s.server.socket_path().string();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  // Seeded garbage: random bytes (no newline inside), JSON of the wrong
  // shapes, huge numbers, deep nesting.
  std::vector<std::string> lines = {
      "",
      "{",
      "null",
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
      R"({"op": 7})",
      R"({"op": "hello", "gpu": 99})",
      R"({"op": "hello", "gpu": 0, "priority": 1e308})",
      R"({"op": "malloc", "bytes": 1e400})",
      R"({"op": "kernel", "ns": 18446744073709551615})"};
  std::uint64_t state = 12345;
  for (int i = 0; i < 200; ++i) {
    std::string l;
    for (int k = 0; k < 40; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const char c = static_cast<char>(state >> 56);
      l += c == '\n' ? ' ' : c;
    }
    lines.push_back(l);
  }
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  ASSERT_EQ(::send(fd, all.data(), all.size(), MSG_NOSIGNAL), static_cast<ssize_t>(all.size()));
  // One reply per line, each an error, in order; then the connection still serves.
  const std::string hello = R"({"op": "hello"})"
                            "\n";
  ASSERT_EQ(::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  std::string got;
  char buf[65536];
  std::size_t newlines = 0;
  while (newlines < lines.size() + 1) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ASSERT_GT(n, 0) << "the server closed after " << newlines << " replies";
    got.append(buf, static_cast<std::size_t>(n));
    newlines = static_cast<std::size_t>(std::count(got.begin(), got.end(), '\n'));
  }
  ::close(fd);
  std::size_t at = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t nl = got.find('\n', at);
    const auto reply = nlohmann::json::parse(got.substr(at, nl - at));
    EXPECT_FALSE(reply["ok"].get<bool>()) << lines[i];
    at = nl + 1;
  }
  EXPECT_TRUE(nlohmann::json::parse(got.substr(at, got.find('\n', at) - at))["ok"].get<bool>());
}

TEST(Serve, ProcessesShareOneCardsMemoryAndADeadOnesIsReclaimed) {
  TempDir dir;
  Served s(options(dir));
  ServeClient monitor(s.server.socket_path());
  auto a = std::make_unique<ServeClient>(s.server.socket_path(), ClientHello{"a", 0, 0, ""});
  ServeClient b(s.server.socket_path(), {"b", 0, 0, ""});
  a->malloc(10ull << 30);
  EXPECT_THROW(b.malloc(6ull << 30), OutOfMemoryError);  // fits alone, not beside a
  const auto smi = monitor.request({{"op", "smi"}});
  EXPECT_EQ(smi["gpus"][0]["processes"].size(), 2u);
  EXPECT_GT(smi["gpus"][0]["memory_used_bytes"].get<std::uint64_t>(), 10ull << 30);
  // a's process dies without a word: its connection closes.
  a.reset();
  ASSERT_TRUE(gone(monitor, "a"));
  EXPECT_GT(b.malloc(6ull << 30), 0u);
}

// A connection to the server's socket that speaks raw lines (a client the
// test controls byte by byte); -1 when it cannot connect.
int raw_connect(const std::filesystem::path& socket) {
  const std::string path = socket.string();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_text(int fd, const std::string& text) {
  return ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// One reply line (the test's client waits for it as long as it takes).
std::string reply_line(int fd) {
  std::string line;
  char ch = 0;
  while (::read(fd, &ch, 1) == 1 && ch != '\n') line += ch;
  return line;
}

// A raw connection that has said hello as `name`; -1 when it could not.
int raw_hello(const std::filesystem::path& socket, const std::string& name) {
  const int fd = raw_connect(socket);
  if (fd < 0) return -1;
  if (!send_text(fd, R"({"op": "hello", "name": ")" + name + "\"}\n") ||
      reply_line(fd).find(R"("ok":true)") == std::string::npos) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// N3: a process that dies leaves its queued kernels behind; the others must
// not wait for them, nor for the one the GPU is running: CUDA tears the
// context down. The hog queues four 3 s kernels and dies; once the server has
// let it go, another process's 1 ms step waits for none of them (under fifo
// it waited for all four, 12 s; then for the running one, up to 3 s).
TEST(Serve, ADeadClientsQueuedAndRunningKernelsAreCancelled) {
  TempDir dir;
  Served s(options(dir, "V100-PCIE-16GB", SharePolicy::Fifo));
  ServeClient monitor(s.server.socket_path());
  const int hog = raw_hello(s.server.socket_path(), "hog");
  ASSERT_GE(hog, 0);
  std::string kernels;
  for (int i = 0; i < 4; ++i)
    kernels += R"({"op": "kernel", "ns": 3000000000})"
               "\n";
  ASSERT_TRUE(send_text(hog, kernels));
  // Posted as torch --connect posts launches; the first is on the GPU when
  // its reply comes (the server took the others at once before, in the 50 ms).
  ASSERT_NE(reply_line(hog).find(R"("ok":true)"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::close(hog);  // as kill -9 would
  ASSERT_TRUE(gone(monitor, "hog"));
  ServeClient next(s.server.socket_path(), {"next", 0, 0, ""});
  const Time start = next.sync();
  EXPECT_LT(next.batch(kMillisecond) - start, 1000 * kMillisecond);
  // Nor is the GPU busy with them for smi and the metrics endpoint once the
  // last second holds none of the hog's life: it said 100 % for the kernel's
  // remaining 3 s (the re-test's second symptom of N3); now `next`'s 1 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const nlohmann::json smi = s.server.smi();
  EXPECT_LT(smi["gpus"][0]["utilization_pct"].get<double>(), 50.0) << smi.dump();
}

// A served job is its client's process: smi lists it and counts its kernels
// while it runs, and when the client dies the job ends at its next step and
// its device goes back (the job had 50 s of steps to go).
TEST(Serve, AServedJobEndsWhenItsClientHangsUp) {
  TempDir dir;
  Served s(options(dir, "V100-PCIE-16GB", SharePolicy::Fifo));
  ServeClient monitor(s.server.socket_path());
  const int fd = raw_hello(s.server.socket_path(), "long");
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_text(fd, R"({"op": "job", "job": {"name": "long", "compute_s": 0.05, "iterations": 1000}})"
                            "\n"));
  bool busy = false;
  for (int i = 0; i < 1000 && !busy; ++i) {
    const nlohmann::json gpu = monitor.request({{"op", "smi"}})["gpus"][0];
    busy = gpu["utilization_pct"].get<double>() > 0 && gpu["processes"].size() == 1 &&
           gpu["processes"][0]["name"] == "long";
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(busy) << "the job's kernels never showed in smi";
  ::close(fd);
  EXPECT_TRUE(gone(monitor, "long"));
}

// N11: a client that sends requests but never reads the replies, and one
// that trickles bytes without ever ending a request, are dropped after the
// idle timeout like a silent one (they were kept for ever).
TEST(Serve, ClientsThatDoNotReadOrNeverFinishARequestAreDropped) {
  TempDir dir;
  ServeOptions o = options(dir);
  o.idle_timeout = 200 * kMillisecond;
  Served s(o);
  ServeClient monitor(s.server.socket_path());
  const int deaf = raw_hello(s.server.socket_path(), "deaf");
  ASSERT_GE(deaf, 0);
  // smi replies, far more than the socket's buffers hold, none read.
  std::string smis;
  for (int i = 0; i < 2000; ++i)
    smis += R"({"op": "smi"})"
            "\n";
  for (std::size_t at = 0; at < smis.size();) {
    const ssize_t n = ::send(deaf, smis.data() + at, smis.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) break;  // the server stopped reading: it is stuck writing to us
    at += static_cast<std::size_t>(n);
  }
  EXPECT_TRUE(gone(monitor, "deaf"));
  ::close(deaf);

  const int slow = raw_hello(s.server.socket_path(), "slow");
  ASSERT_GE(slow, 0);
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop && send_text(slow, " ")) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  EXPECT_TRUE(gone(monitor, "slow"));
  stop = true;
  trickle.join();
  ::close(slow);
}

// N5: a client gives up on a server that does not answer (SIGSTOPped, or not
// gpemu's) after its reply timeout, and any wait ends at once on SIGINT or
// SIGTERM; it waited for ever and ignored the first signal.
TEST(Serve, ClientsGiveUpOnAServerThatDoesNotAnswer) {
  TempDir dir;
  const auto path = dir.path() / "s.sock";
  const int silent = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(silent, 4), 0);  // connections wait in its backlog; nothing answers
  try {
    ServeClient c(path, ClientHello{"c", 0, 0, "", 100 * kMillisecond});
    ADD_FAILURE() << "a hello nobody answered was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not answer in 0.1 s"), std::string::npos) << e.what();
  }
  EXPECT_THROW(served_gpus(path, 100 * kMillisecond), Error);
  // A reply that did not come closes the connection: nothing waits on it
  // again (`gpemu smi --timeout-s N` waited 2N, its bye too, and said N).
  {
    ServeClient monitor(path, 100 * kMillisecond);
    EXPECT_THROW(monitor.request({{"op", "smi"}}), Error);
    try {
      monitor.request({{"op", "bye"}});
      ADD_FAILURE() << "a request went out on a connection out of step";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "gpemu serve: not connected");
    }
  }
  // A signal ends a wait that has no deadline of its own.
  std::thread signal([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    request_interrupt(SIGTERM);
  });
  try {
    ServeClient c(path, ClientHello{"c", 0, 0, "", 3600 * kSecond});
    ADD_FAILURE() << "the hello outlived SIGTERM";
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.signal(), SIGTERM);
  }
  signal.join();
  clear_interrupt();
  ::close(silent);
}

TEST(Serve, ASilentClientIsDroppedAndTheOthersGoOn) {
  TempDir dir;
  ServeOptions o = options(dir);
  o.idle_timeout = 50 * kMillisecond;
  Served s(o);
  ServeClient quiet(s.server.socket_path(), {"quiet", 0, 0, ""});
  quiet.malloc(1 << 20);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // 20 times the timeout
  EXPECT_THROW(quiet.request({{"op", "memory"}}), Error);
  ServeClient next(s.server.socket_path(), {"next", 0, 0, ""});
  EXPECT_GT(next.malloc(1 << 20), 0u);
}

TEST(Serve, TheSocketIsNeverAnotherFileAndOneServerHoldsIt) {
  TempDir dir;
  const auto path = dir.path() / "s.sock";
  std::ofstream(path) << "keep me";
  ServeOptions o = options(dir);
  EXPECT_THROW(ShareServer{o}, InputError);
  EXPECT_TRUE(std::filesystem::is_regular_file(path));  // not deleted
  std::filesystem::remove(path);
  {
    Served s(o);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_THROW(ShareServer{o}, InputError);  // a live server holds it
  }
  EXPECT_FALSE(std::filesystem::exists(path));  // removed by its server
  EXPECT_THROW(ServeClient(path, ClientHello{}), Error);
}

TEST(Serve, TheServerRefusesPeersOfOtherUsers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  TempDir dir;
  Served s(options(dir));
  // Open the folder and socket to everyone: only the credential check is left.
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);
  std::filesystem::permissions(s.server.socket_path(), std::filesystem::perms::all);
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  // The child makes only system calls (after fork in a threaded process,
  // nothing that may take a lock another thread held).
  const std::string path = s.server.socket_path().string();
  const std::string hello = "{\"op\":\"hello\"}\n";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipefd[0]);
    char verdict = 'x';
    if (::setgid(65534) == 0 && ::setuid(65534) == 0) {
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
      const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      char reply[512] = {};
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        // A refusal comes at once and the server hangs up: no SIGPIPE for the hello.
        (void)::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
        if (::read(fd, reply, sizeof reply - 1) > 0) verdict = std::strstr(reply, "refused") ? 'r' : 'a';
      }
    }
    (void)!::write(pipefd[1], &verdict, 1);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  char verdict = '?';
  ASSERT_EQ(::read(pipefd[0], &verdict, 1), 1);
  ::close(pipefd[0]);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(verdict, 'r');
}

TEST(Serve, ClientsBeyondTheLimitAreRefused) {
  TempDir dir;
  ServeOptions o = options(dir);
  o.max_clients = 1;
  Served s(o);
  ServeClient first(s.server.socket_path(), {"first", 0, 0, ""});
  EXPECT_THROW(ServeClient(s.server.socket_path(), ClientHello{"second", 0, 0, ""}), Error);
}

TEST(Serve, MigHellosTakeSlicesThatMustFit) {
  TempDir dir;
  Served s(options(dir, "A100-SXM4-40GB", SharePolicy::Mig));
  ServeClient a(s.server.socket_path(), {"a", 0, 0, "4g.20gb"});
  EXPECT_LT(a.hello_reply()["gpu"]["memory_bytes"].get<std::uint64_t>(), 20ull << 30);
  EXPECT_THROW(ServeClient(s.server.socket_path(), ClientHello{"b", 0, 0, "4g.20gb"}), InputError);
  EXPECT_THROW(ServeClient(s.server.socket_path(), ClientHello{"c", 0, 0, ""}), InputError);
  ServeClient d(s.server.socket_path(), {"d", 0, 0, "3g.20gb"});
}

// A request-by-request client is a job of the server's session (Session::
// attach) from its hello to its bye: smi counts it in its GPU's jobs and
// names its job; its bye has ended that job when it returns.
TEST(Serve, EachClientIsAJobOfTheServersSessionFromHelloToBye) {
  TempDir dir;
  ServeOptions o = options(dir);
  o.gpus = 2;
  Served s(o);
  const auto jobs = [&](int g) { return s.server.smi()["gpus"][g]["jobs"].get<int>(); };
  EXPECT_EQ(jobs(0), 0);
  auto a = std::make_unique<ServeClient>(s.server.socket_path(), ClientHello{"a", 0, 0, ""});
  ServeClient b(s.server.socket_path(), {"b", 0, 0, ""});
  ServeClient c(s.server.socket_path(), {"c", 1, 0, ""});
  EXPECT_EQ(jobs(0), 2);
  EXPECT_EQ(jobs(1), 1);
  const nlohmann::json smi = s.server.smi();
  std::map<std::string, int> job_of;
  for (const int g : {0, 1})
    for (const auto& p : smi["gpus"][g]["processes"]) job_of[p["name"].get<std::string>()] = p["job"].get<int>();
  EXPECT_EQ(job_of, (std::map<std::string, int>{{"a", 0}, {"b", 1}, {"c", 2}}));
  a.reset();  // its bye
  EXPECT_EQ(jobs(0), 1);
  EXPECT_EQ(jobs(1), 1);
  ServeClient d(s.server.socket_path(), {"d", 0, 0, ""});
  EXPECT_EQ(jobs(0), 2);
  EXPECT_EQ(s.server.smi()["gpus"][0]["processes"][1]["job"], 3);  // a new job, not a's
}

TEST(Serve, SmiAndMetricsDescribeTheEmulatedGpus) {
  TempDir dir;
  ServeOptions o = options(dir);
  o.gpus = 2;
  o.metrics = "127.0.0.1:0";
  Served s(o);
  ServeClient c(s.server.socket_path(), {"trainer", 1, 0, ""});
  c.malloc(1ull << 30);
  const auto smi = s.server.smi();
  ASSERT_EQ(smi["gpus"].size(), 2u);
  EXPECT_TRUE(smi["gpus"][0]["processes"].empty());
  ASSERT_EQ(smi["gpus"][1]["processes"].size(), 1u);
  EXPECT_EQ(smi["gpus"][1]["processes"][0]["name"], "trainer");
  EXPECT_EQ(smi["gpus"][1]["processes"][0]["pid"], ::getpid());
  // Prometheus over HTTP.
  ASSERT_GT(s.server.metrics_port(), 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(s.server.metrics_port()));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string get = "GET /metrics HTTP/1.0\r\n\r\n";
  ASSERT_EQ(::write(fd, get.data(), get.size()), static_cast<ssize_t>(get.size()));
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.0 200 OK", 0), 0u) << reply;
  EXPECT_NE(reply.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""), std::string::npos) << reply;
  EXPECT_NE(reply.find("DCGM_FI_DEV_FB_USED{gpu=\"1\""), std::string::npos) << reply;
}

// A request to the metrics endpoint on 127.0.0.1:port and its whole response.
std::string http_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "no connection";
  }
  (void)!::write(fd, request.data(), request.size());
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return reply;
}

// N6: a connection that trickles its headers (a slowloris) held the
// endpoint, one connection at a time, until it stopped; others wait no
// longer for it, and anything but GET /metrics is refused.
TEST(Serve, ASlowMetricsPeerDoesNotHoldTheOthers) {
  TempDir dir;
  ServeOptions o = options(dir);
  o.metrics = "127.0.0.1:0";
  Served s(o);
  const int port = s.server.metrics_port();
  const int slow = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(::connect(slow, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::atomic<bool> trickling{true};
  std::thread trickle([&] {
    const std::string start = "GET /metrics HTTP/1.1\r\n";
    (void)!::send(slow, start.data(), start.size(), MSG_NOSIGNAL);
    // A header line every 50 ms for 1.5 s.
    for (int i = 0; i < 30 && trickling; ++i) {
      (void)!::send(slow, "X-a: b\r\n", 8, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    trickling = false;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the slow one is in first
  const std::string reply = http_exchange(port, "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(trickling) << "the scrape was answered only after the slow peer was done";
  EXPECT_EQ(reply.rfind("HTTP/1.0 200 OK", 0), 0u) << reply;
  EXPECT_NE(reply.find("DCGM_FI_DEV_FB_USED"), std::string::npos) << reply;
  EXPECT_EQ(http_exchange(port, "POST /admin HTTP/1.1\r\n\r\n").rfind("HTTP/1.0 405", 0), 0u);
  EXPECT_EQ(http_exchange(port, "GET /secret HTTP/1.1\r\n\r\n").rfind("HTTP/1.0 404", 0), 0u);
  EXPECT_EQ(http_exchange(port, "\r\n\r\n").rfind("HTTP/1.0 400", 0), 0u);
  trickling = false;
  trickle.join();
  ::close(slow);
}

// N16: where the metrics endpoint listens, and whether other machines reach it.
TEST(Serve, TheMetricsAddressIsKnownAndAnyAddressIsNotLoopback) {
  TempDir dir;
  ServeOptions local = options(dir);
  local.metrics = "0";
  ShareServer a(local);
  EXPECT_EQ(a.metrics_address(), "127.0.0.1:" + std::to_string(a.metrics_port()));
  EXPECT_TRUE(a.metrics_on_loopback());
  TempDir dir2;
  ServeOptions any = options(dir2);
  any.metrics = "0.0.0.0:0";
  ShareServer b(any);
  EXPECT_EQ(b.metrics_address(), "0.0.0.0:" + std::to_string(b.metrics_port()));
  EXPECT_FALSE(b.metrics_on_loopback());
  TempDir dir3;
  ShareServer none(options(dir3));
  EXPECT_EQ(none.metrics_address(), "");
}

TEST(Serve, ShareConnectRunsAJobsFilesJobsAsClients) {
  TempDir dir;
  Served s(options(dir, "V100-PCIE-16GB", SharePolicy::Fifo));
  ShareSpec spec;
  spec.jobs = {fixed_step_job("a", 0.002, 8, 5), fixed_step_job("b", 0.002, 8, 5), model_job("c", "resnet18", 16, 3)};
  spec.per_step = true;
  const ShareResult r = run_shared_remote(s.server.socket_path(), spec);
  EXPECT_EQ(r.gpu, "V100-PCIE-16GB");  // the server's
  EXPECT_EQ(r.policy, SharePolicy::Fifo);
  for (const auto& j : r.jobs) {
    EXPECT_TRUE(j.error.empty()) << j.name << ": " << j.error;
    EXPECT_EQ(j.step_ends().size(), j.name == "c" ? 3u : 5u);
  }
  spec.jobs = {model_job("x", "resnet9000", 16, 3)};
  EXPECT_THROW(run_shared_remote(s.server.socket_path(), spec), InputError);
}

// A served job is the engine's Job on the client's device of the server's
// GPU: the step loop `gpemu share` runs in one process. Two jobs under fifo,
// served (real clock) and in one process (virtual clock), do the same work:
// the same steps and samples, the same kernels' time alone (forward,
// backward with the optimizer step, drawn as in-process) and the same memory
// plan through their caching allocators (peaks to the byte). Only when each
// step ends depends on the clock.
TEST(Serve, AServedJobStepsAsTheSameJobInOneProcess) {
  TempDir dir;
  Served s(options(dir, "A100-SXM4-40GB", SharePolicy::Fifo));
  ShareSpec spec;
  spec.gpu = &find_gpu("A100-SXM4-40GB");
  spec.options.policy = SharePolicy::Fifo;
  spec.per_step = true;
  spec.jobs = {model_job("m", "resnet18", 16, 4), fixed_step_job("f", 0.003, 8, 3)};
  spec.jobs[0].torch = "2";  // as a jobs file says it
  const ShareResult served = run_shared_remote(s.server.socket_path(), spec);
  ShareSpec local = spec;
  give_cost_models(local);
  const auto clock = make_virtual_clock();
  const ShareResult alone = run_shared(*clock, *local.jobs.front().costs, local);
  ASSERT_EQ(served.jobs.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const SharedJobResult &r = served.jobs[i], &l = alone.jobs[i];
    EXPECT_TRUE(r.error.empty()) << r.name << ": " << r.error;
    EXPECT_EQ(r.iterations(), l.iterations()) << r.name;
    EXPECT_EQ(r.samples(), l.samples()) << r.name;
    EXPECT_EQ(r.step_samples(), l.step_samples()) << r.name;
    EXPECT_EQ(r.compute_busy(), l.compute_busy()) << r.name;
    EXPECT_EQ(r.peak_allocated_bytes(), l.peak_allocated_bytes()) << r.name;
    EXPECT_EQ(r.peak_reserved_bytes(), l.peak_reserved_bytes()) << r.name;
    const std::vector<Time> ends = r.step_ends();
    ASSERT_EQ(ends.size(), l.step_ends().size()) << r.name;
    EXPECT_TRUE(std::is_sorted(ends.begin(), ends.end())) << r.name;
    EXPECT_GE(r.end - r.arrival, r.compute_busy()) << r.name;  // its kernels, one after another at least
  }
  // The model job holds its weights, batch and activations: the old served
  // loop's two mallocs (its persistent and peak bytes) are gone.
  EXPECT_GT(served.jobs[0].peak_allocated_bytes(), 0u);
  EXPECT_GT(served.jobs[0].compute_busy(), 0);
  EXPECT_EQ(served.jobs[1].compute_busy(), 3 * 3 * kMillisecond);  // compute_s, nothing else
  EXPECT_EQ(served.jobs[1].peak_allocated_bytes(), 0u);
}

// "job" is a process's whole life: right after hello, then only its steps' pages.
TEST(Serve, AJobRequestComesRightAfterHelloAndEndsTheConnectionsWork) {
  TempDir dir;
  Served s(options(dir));
  const nlohmann::json job = {{"name", "j"}, {"compute_s", 0.001}, {"batch_size", 4}, {"iterations", 5}};
  {
    ServeClient c(s.server.socket_path(), ClientHello{"late"});
    EXPECT_EQ(c.hello_reply()["protocol"], 2);
    c.malloc(1 << 20);
    const nlohmann::json r = c.request({{"op", "job"}, {"job", job}});
    EXPECT_EQ(r["kind"], "protocol") << r;
    EXPECT_NE(r["error"].get<std::string>().find("right after hello"), std::string::npos) << r;
  }
  ServeClient c(s.server.socket_path(), ClientHello{"j"});
  for (const char* key : {"arrival_s", "after", "priority", "mig", "dataset"}) {
    nlohmann::json with = job;
    with[key] = key == std::string("arrival_s") || key == std::string("priority") ? nlohmann::json(1) : "x";
    const nlohmann::json r = c.request({{"op", "job"}, {"job", with}});
    EXPECT_EQ(r["kind"], "input") << r;
    EXPECT_NE(r["error"].get<std::string>().find(std::string("'") + key + "' is not for a served job"),
              std::string::npos)
        << r;
  }
  nlohmann::json unknown = job;
  unknown["epochz"] = 1;
  EXPECT_NE(c.request({{"op", "job"}, {"job", unknown}})["error"].get<std::string>().find("unknown key 'epochz'"),
            std::string::npos);
  const nlohmann::json r = c.call({{"op", "job"}, {"job", job}, {"steps", true}});
  EXPECT_TRUE(r["error"].is_null()) << r;
  EXPECT_EQ(r["iterations"], 5);
  EXPECT_EQ(r["samples"], 20);
  EXPECT_EQ(r["compute_busy_ns"], 5 * kMillisecond);
  ASSERT_EQ(r["step_end_ns"].size(), 5u);
  const nlohmann::json page = c.call({{"op", "job_steps"}, {"from", 3}});
  ASSERT_EQ(page["step_end_ns"].size(), 2u);
  EXPECT_EQ(page["step_end_ns"][0], r["step_end_ns"][3]);
  EXPECT_EQ(page["step_samples"][1], 4);
  const nlohmann::json after = c.request({{"op", "kernel"}, {"ns", 1000}});
  EXPECT_EQ(after["kind"], "protocol") << after;
  EXPECT_EQ(c.request({{"op", "hello"}, {"name", "again"}})["kind"], "protocol");  // no second process
  EXPECT_EQ(c.request({{"op", "job"}, {"job", job}})["kind"], "protocol");
}

// ---- N2: the clients check the server as it checks them ---------------------

// A listening socket at `path` that accepts one client and answers its
// request lines with `replies` in turn (then {"ok": true}).
class ScriptedServer {
 public:
  // Each of `connections` clients in turn gets `replies` from the first.
  ScriptedServer(const std::filesystem::path& path, std::vector<std::string> replies, int connections = 1)
      : replies_(std::move(replies)), connections_(connections) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 4) == 0;
    if (ok_) thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  void serve() {
    for (int i = 0; i < connections_; ++i) serve_one();
  }
  void serve_one() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 60'000) <= 0) return;  // a guard against a client that never came
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    std::size_t next = 0;
    std::string pending;
    char buf[4096];
    for (ssize_t n; (n = ::read(c, buf, sizeof buf)) > 0;) {
      pending.append(buf, static_cast<std::size_t>(n));
      for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
        const std::string line = (next < replies_.size() ? replies_[next++] : R"({"ok": true})") + "\n";
        (void)!::write(c, line.data(), line.size());
      }
    }
    ::close(c);
  }
  int fd_ = -1;
  bool ok_ = false;
  std::vector<std::string> replies_;
  int connections_ = 1;
  std::thread thread_;
};

// A server of protocol 1 runs no jobs; a job reply whose step ends fall
// outside the job is not gpemu serve's. Either is the job's error.
TEST(Serve, ShareConnectRefusesAServerThatRunsNoJobsOrRepliesNonsense) {
  TempDir dir;
  const auto path = dir.path() / "s.sock";
  const std::string gpus = R"("gpus": [{"index": 0, "id": "V100-PCIE-16GB", "policy": "fifo"}])";
  ShareSpec spec;
  spec.jobs = {fixed_step_job("a", 0.001, 8, 2)};
  {
    ScriptedServer old(path, {R"({"ok": true, )" + gpus + "}"}, 2);  // smi, then the job's hello
    ASSERT_TRUE(old.ok());
    const ShareResult r = run_shared_remote(path, spec);
    EXPECT_NE(r.jobs[0].error.find("runs no jobs (its protocol is older than this client's)"), std::string::npos)
        << r.jobs[0].error;
  }
  std::filesystem::remove(path);
  {
    ScriptedServer liar(path,
                        {R"({"ok": true, "protocol": 2, )" + gpus + "}", nlohmann::json{{"ok", true},
                                                                                        {"start_ns", 100},
                                                                                        {"end_ns", 200},
                                                                                        {"iterations", 2},
                                                                                        {"samples", 16},
                                                                                        {"compute_busy_ns", 2},
                                                                                        {"peak_allocated_bytes", 0},
                                                                                        {"peak_reserved_bytes", 0},
                                                                                        {"error", nullptr},
                                                                                        {"steps", 2},
                                                                                        {"step_end_ns", {150, 250}},
                                                                                        {"step_samples", {8, 8}}}
                                                                             .dump()},
                        2);
    ASSERT_TRUE(liar.ok());
    const ShareResult r = run_shared_remote(path, spec);
    EXPECT_NE(r.jobs[0].error.find("step ends are not in order within the job"), std::string::npos) << r.jobs[0].error;
    EXPECT_EQ(r.jobs_finished, 0);
  }
}

std::string refusal_of(const std::filesystem::path& socket) {
  try {
    ServeClient c(socket);
  } catch (const InputError& e) {
    return std::string("input: ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "connected";
}

// The clients just connected: a socket in a folder another user made, or
// can write to, reached that user's server with every request.
TEST(Serve, ClientsRefuseASocketInAFolderOthersCanWriteTo) {
  TempDir dir;
  const auto folder = dir.path() / "run";
  std::filesystem::create_directory(folder);
  const auto path = folder / "s.sock";
  ScriptedServer fake(path, {});
  ASSERT_TRUE(fake.ok());
  std::filesystem::permissions(folder, std::filesystem::perms::all);  // 0777, as the squatter made it
  const std::string open = refusal_of(path);
  EXPECT_NE(open.find("input: refusing the socket " + path.string() + ": its folder " + folder.string() +
                      " must be a folder of this user's that others cannot write to (it is writable by others, "
                      "mode 777)"),
            std::string::npos)
      << open;
  if (::geteuid() == 0) {
    std::filesystem::permissions(folder, std::filesystem::perms::owner_all);
    ASSERT_EQ(::chown(folder.c_str(), 65534, 65534), 0);
    const std::string theirs = refusal_of(path);
    EXPECT_NE(theirs.find("(it is another user's, uid 65534)"), std::string::npos) << theirs;
    ASSERT_EQ(::chown(folder.c_str(), 0, 0), 0);
  }
  std::filesystem::permissions(folder, std::filesystem::perms::owner_all);
  EXPECT_EQ(refusal_of(path), "connected");  // ours alone: the fake is reached (and lets it go)
}

TEST(Serve, ClientsRefuseAServerOfAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to listen as another user";
  TempDir dir;
  const auto path = dir.path() / "s.sock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  // The listener's credentials are taken at listen(): bound as root in our
  // folder, listening as uid 65534. The child makes only system calls.
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    const char verdict = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                                 ::setgid(65534) == 0 && ::setuid(65534) == 0 && ::listen(fd, 4) == 0
                             ? 'l'
                             : 'x';
    (void)!::write(ready[1], &verdict, 1);
    ::pause();  // connections complete in the backlog; the parent kills it
    ::_exit(0);
  }
  ::close(ready[1]);
  char verdict = '?';
  ASSERT_EQ(::read(ready[0], &verdict, 1), 1);
  ::close(ready[0]);
  const std::string refused = verdict == 'l' ? refusal_of(path) : "";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_EQ(verdict, 'l');
  EXPECT_NE(refused.find("refusing the server at " + path.string() + ": it runs as uid 65534, not as this user (0)"),
            std::string::npos)
      << refused;
}

// The fake's negative end_ns was printed as a finished job.
TEST(Serve, ClientsRefuseStepEndsThatGoBackInTime) {
  TempDir dir;
  const auto path = dir.path() / "s.sock";
  {
    ScriptedServer fake(path, {R"({"ok": true})", R"({"ok": true, "end_ns": 100})", R"({"ok": true, "end_ns": 100})",
                               R"({"ok": true, "end_ns": 50})"});
    ASSERT_TRUE(fake.ok());
    ServeClient c(path, ClientHello{});
    EXPECT_EQ(c.sync(), 100);
    EXPECT_EQ(c.batch(kMillisecond), 100);  // no later, no earlier: an empty stream's end stays
    try {
      c.batch(kMillisecond);
      ADD_FAILURE() << "an end before the last was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("end_ns (50) is not a time at or after this stream's last (100)"),
                std::string::npos)
          << e.what();
    }
  }
  std::filesystem::remove(path);
  for (const char* bad : {R"({"ok": true, "end_ns": -5})", R"({"ok": true})", R"({"ok": true, "end_ns": "7"})"}) {
    ScriptedServer fake(path, {R"({"ok": true})", bad});
    ASSERT_TRUE(fake.ok());
    ServeClient c(path, ClientHello{});
    EXPECT_THROW(c.sync(), Error) << bad;
    std::filesystem::remove(path);
  }
}

// QA re-test: an smi reply whose GPU id is a number ended `share --connect`
// with nlohmann's "[json.exception.type_error.302] type must be string".
TEST(Serve, AServerWhoseGpusHaveNoTextIdIsNotGpemuServe) {
  TempDir dir;
  const auto path = dir.path() / "s.sock";
  ScriptedServer fake(path, {R"({"ok": true, "gpus": [{"id": 5, "policy": "fifo"}]})"});
  ASSERT_TRUE(fake.ok());
  try {
    served_gpus(path, 2 * kSecond);
    ADD_FAILURE() << "a GPU with a numeric id was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "described a GPU without a text id and policy ({\"id\":5,\"policy\":\"fifo\"})"),
              std::string::npos)
        << e.what();
  }
}

// Another user can make /tmp/gpemu-<uid> first; server and clients then both
// use a folder in $HOME that only this user can make.
TEST(Serve, TheDefaultSocketLeavesASharedFolderThatIsNotOurs) {
  TempDir tmp, home;
  const auto shared = tmp.path() / ("gpemu-" + std::to_string(::geteuid()));
  const auto fallback = home.path() / ".gpemu/serve.sock";
  EXPECT_EQ(default_socket_path("/run/user/7", tmp.path(), home.path().c_str()), "/run/user/7/gpemu/serve.sock");
  EXPECT_EQ(default_socket_path(nullptr, tmp.path(), home.path().c_str()), shared / "serve.sock");  // not there yet
  std::filesystem::create_directory(shared);
  std::filesystem::permissions(shared, std::filesystem::perms::owner_all);
  EXPECT_EQ(default_socket_path("", tmp.path(), home.path().c_str()), shared / "serve.sock");  // ours
  std::filesystem::permissions(shared, std::filesystem::perms::all);
  EXPECT_EQ(default_socket_path(nullptr, tmp.path(), home.path().c_str()), fallback);  // anyone's to write
  if (::geteuid() == 0) {
    std::filesystem::permissions(shared, std::filesystem::perms::owner_all);
    ASSERT_EQ(::chown(shared.c_str(), 65534, 65534), 0);
    EXPECT_EQ(default_socket_path(nullptr, tmp.path(), home.path().c_str()), fallback);  // another user's
  }
  EXPECT_THROW(default_socket_path(nullptr, tmp.path(), nullptr), InputError);
  // The server makes the private folder 0700 and serves there.
  ServeOptions o = options(tmp);
  o.socket = fallback;
  Served s(o);
  struct stat st {};
  ASSERT_EQ(::lstat(fallback.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ServeClient c(fallback, ClientHello{});
  EXPECT_GE(c.batch(kMillisecond), kMillisecond);
}

}  // namespace
}  // namespace gpemu
