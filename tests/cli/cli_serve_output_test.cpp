// What `gpemu smi` and `gpemu serve` print on the terminal when the names or
// addresses they show come from elsewhere (reliability findings N12, N16,
// /work/shared/qa).
#include <gtest/gtest.h>

#include "support/gpemu_child.h"
#include "support/run_gpemu.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "support/temp_dir.h"

namespace {

using gpemu::testing::ChildOptions;
using gpemu::testing::run_gpemu;
using gpemu::testing::run_gpemu_child;
using gpemu::testing::TempDir;

// A server that answers every request line with `reply` (then "ok" to the
// rest), for `connections` clients: what a hostile or buggy server could say.
class FakeServer {
 public:
  FakeServer(const std::string& path, std::string reply, int connections) : reply_(std::move(reply)) {
    std::erase(reply_, '\n');  // one line on the wire
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 4) == 0;
    if (ok_) thread_ = std::thread([this, connections] { serve(connections); });
  }
  ~FakeServer() {
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  void serve(int connections) {
    for (int i = 0; i < connections; ++i) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 60'000) <= 0) return;  // a guard against a client that never came
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      bool first = true;
      std::string pending;
      char buf[4096];
      for (ssize_t n; (n = ::read(c, buf, sizeof buf)) > 0;) {
        pending.append(buf, static_cast<std::size_t>(n));
        for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
          const std::string line = (first ? reply_ : std::string(R"({"ok": true})")) + "\n";
          first = false;
          (void)!::write(c, line.data(), line.size());
        }
      }
      ::close(c);
    }
  }
  int fd_ = -1;
  bool ok_ = false;
  std::string reply_;
  std::thread thread_;
};

// N12: a client's name (any process can say hello) went to the terminal raw:
// it set the window title, cleared the screen and forged a table row.
TEST(CliSmi, NamesFromTheServerCannotControlTheTerminal) {
  TempDir d;
  const std::string sock = (d / "s.sock").string();
  const std::string reply =
      R"({"ok": true, "driver": "gpemu", "gpus": [{"index": 0, "id": "V100", "name": "V100\u001b]0;owned\u0007",
          "uuid": "GPU-\u009b2J", "policy": "fifo", "memory_total_bytes": 1048576, "memory_used_bytes": 0,
          "utilization_pct": 0, "processes": [{"pid": 7, "client": 1, "memory_bytes": 0,
          "name": "\u001b[2J\u001b[1;31mEVIL\u001b[0m\r\nGPU  0  fake-line\u007f"}]}]})";
  FakeServer server(sock, reply, 2);
  ASSERT_TRUE(server.ok());
  const auto table = run_gpemu("smi --socket " + sock);
  EXPECT_EQ(table.status, 0) << table.err;
  const auto csv = run_gpemu("smi --socket " + sock + " --query-gpu=name,uuid --format=csv,noheader");
  EXPECT_EQ(csv.status, 0) << csv.err;
  for (const std::string& out : {table.out, csv.out}) {
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
    EXPECT_EQ(out.find('\r'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x7f'), std::string::npos) << out;
    EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << out;
  }
  EXPECT_NE(table.out.find("\\x1b[2J\\x1b[1;31mEVIL\\x1b[0m\\r\\nGPU  0  fake-line\\x7f"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("V100\\x1b]0;owned\\x07"), std::string::npos) << table.out;
  EXPECT_NE(csv.out.find("V100\\x1b]0;owned\\x07, GPU-\\u009b2J"), std::string::npos) << csv.out;
}

// N2: a fake server's 953674MiB / 0MiB and 1000000000% were printed as the
// GPU's state.
TEST(CliSmi, RepliesNoServerGivesAreRefusedNotPrinted) {
  TempDir d;
  const std::string sock = (d / "s.sock").string();
  const std::string gpu =
      R"("index": 0, "id": "V100", "name": "V100", "uuid": "GPU-0", "policy": "fifo", "processes": [])";
  for (const char* figures : {R"("memory_total_bytes": 0, "memory_used_bytes": 1000000000000000,
                                        "utilization_pct": 0)",
                              R"("memory_total_bytes": 1048576, "memory_used_bytes": 0,
                                        "utilization_pct": 1000000000)"}) {
    FakeServer server(sock, R"({"ok": true, "gpus": [{)" + gpu + ", " + figures + "}]}", 1);
    ASSERT_TRUE(server.ok());
    const auto r = run_gpemu("smi --socket " + sock);
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_EQ(r.out.find("MiB"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("gpemu: error: gpemu smi: the server at " + sock + " replied "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(": not a reply of gpemu serve's"), std::string::npos) << r.err;
    std::filesystem::remove(sock);
  }
}

std::string serve_output(const TempDir& d, const std::string& metrics) {
  ChildOptions o;
  o.marker_text = "stop with Ctrl-C";
  o.signal = SIGTERM;
  o.guard_seconds = 60;
  const auto r = run_gpemu_child({"serve", "--socket", (d / "s.sock").string(), "--metrics", metrics}, o);
  EXPECT_TRUE(r.signalled) << r.out;
  return r.out;
}

// N16: `--metrics 0.0.0.0:PORT` said only "on port N".
TEST(CliServe, MetricsOffLoopbackAreAnnouncedWithTheAddressAndAWarning) {
  TempDir d;
  const std::string any = serve_output(d, "0.0.0.0:0");
  EXPECT_NE(any.find("metrics (Prometheus text, DCGM names) at http://0.0.0.0:"), std::string::npos) << any;
  EXPECT_NE(any.find("gpemu: warning: --metrics 0.0.0.0:0: the metrics endpoint listens on 0.0.0.0:"),
            std::string::npos)
      << any;
  EXPECT_NE(any.find("reachable from other machines"), std::string::npos) << any;
  const std::string local = serve_output(d, "0");
  EXPECT_NE(local.find("at http://127.0.0.1:"), std::string::npos) << local;
  EXPECT_EQ(local.find("warning"), std::string::npos) << local;
}

// N9: a bare `--connect` (no socket after it) ran the jobs in-process and
// printed the usual table with exit 0, as if they had shared the server's GPU.
// It means the default socket; with no server there, that is an error.
TEST(CliShare, ABareConnectUsesTheDefaultSocketAndNeverRunsInProcess) {
  TempDir d;
  const std::string jobs = d.write("j.json", R"({"jobs": [{"name": "a", "compute_s": 0.001, "iterations": 3}]})");
  const std::string env = "XDG_RUNTIME_DIR=" + d.path().string() + " ";
  for (const std::string& args : {"share --jobs " + jobs + " --connect", "share --connect --jobs " + jobs}) {
    const auto r = run_gpemu(args, env);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("sharing one emulated"), std::string::npos) << args << "\n" << r.out;
    EXPECT_NE(r.err.find("nothing serves " + (d / "gpemu/serve.sock").string()), std::string::npos) << r.err;
  }
}

}  // namespace
