// `gpemu prep serve` over real TCP (prep_serve.h): a dispatcher in a child
// process with its workers in theirs, the client in this one, a few hundred
// tiny JPEGs. Behaviour only: which samples came, where the work ran, what a
// dead worker or a bad peer gets; never how long anything took.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/pipeline/generator.h"
#include "gpemu/prep_serve.h"
#include "prep/job.h"
#include "prep/wire.h"

namespace gpemu::prep {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gpemu-prep-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A dispatcher with `workers` workers in a child process (forked before this
// process starts any thread); stopped with SIGTERM by the destructor.
class ServiceProcess {
 public:
  explicit ServiceProcess(int workers, int cpus = 1) {
    int p[2];
    EXPECT_EQ(::pipe(p), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(p[0]);
      int port = -1;
      try {
        PrepServerOptions o;
        o.workers = workers;
        o.cpus_per_worker = cpus;
        o.quiet = true;
        PrepServer server(o);
        port = server.port();
        (void)!::write(p[1], &port, sizeof port);
        ::close(p[1]);
        server.run();
      } catch (...) {
        (void)!::write(p[1], &port, sizeof port);
        ::_exit(1);
      }
      ::_exit(0);
    }
    ::close(p[1]);
    EXPECT_EQ(::read(p[0], &port_, sizeof port_), static_cast<ssize_t>(sizeof port_));
    ::close(p[0]);
  }
  ~ServiceProcess() { stop(); }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  int stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
};

const fs::path& images() {
  static TempDir dir;
  static const bool made = [] {
    pipeline::generate_image_dataset(dir.path(), 4, 240, 7, 1.5);
    return true;
  }();
  (void)made;
  return dir.path();
}

PrepClientOptions client(int port, pipeline::PrepOffload offload) {
  PrepClientOptions o;
  o.port = port;
  o.job.dataset = images().string();
  o.job.batch_size = 16;
  o.job.seed = 3;
  o.job.offload = offload;
  o.job.transform.height = o.job.transform.width = 16;
  o.reply_timeout = 20 * kSecond;
  o.batch_timeout = 60 * kSecond;
  return o;
}

// One epoch's batches: every sample exactly once.
std::vector<pipeline::LoadedBatch> epoch(PrepServiceSource& s, std::uint64_t e) {
  s.begin_epoch(e);
  std::vector<pipeline::LoadedBatch> out;
  while (auto b = s.next({})) out.push_back(std::move(*b));
  return out;
}

void expect_each_sample_once(const std::vector<pipeline::LoadedBatch>& batches, std::size_t samples) {
  std::map<std::size_t, int> seen;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].index, i);
    for (std::size_t idx : batches[i].sample_indices) ++seen[idx];
  }
  EXPECT_EQ(seen.size(), samples);
  for (const auto& [idx, n] : seen) EXPECT_EQ(n, 1) << "sample " << idx;
}

TEST(PrepServe, EveryOffloadDeliversEachSampleOnceWithTheWorkInTheWorkers) {
  (void)images();
  ServiceProcess service(2);
  auto clock = make_clock(ClockKind::Real);
  for (auto offload : {pipeline::PrepOffload::Read, pipeline::PrepOffload::Decode, pipeline::PrepOffload::All}) {
    SCOPED_TRACE(std::string(pipeline::to_string(offload)));
    PrepServiceSource source(*clock, client(service.port(), offload));
    ASSERT_EQ(source.samples_per_epoch(), 240u);
    ASSERT_EQ(source.batches_per_epoch(), 15u);
    for (const PrepWorkerInfo& w : source.workers()) EXPECT_NE(w.pid, ::getpid());
    const auto batches = epoch(source, 0);
    ASSERT_EQ(batches.size(), 15u);
    expect_each_sample_once(batches, 240);
    for (const auto& b : batches) EXPECT_EQ(b.bytes, static_cast<std::uint64_t>(b.samples) * 3 * 16 * 16 * 4);
    const PrepServiceCounters c = source.counters();
    EXPECT_EQ(c.worker_samples_read, 240u);
    EXPECT_EQ(c.worker_batches_sent, 15u);
    EXPECT_GT(c.worker_bytes_read, 0u);
    const bool read = offload == pipeline::PrepOffload::Read;
    EXPECT_EQ(c.worker_samples_decoded, read ? 0u : 240u);
    EXPECT_EQ(c.client_samples_decoded, read ? 240u : 0u);
    EXPECT_EQ(c.worker_batches_collated, offload == pipeline::PrepOffload::All ? 15u : 0u);
    EXPECT_EQ(c.client_batches_collated, offload == pipeline::PrepOffload::Decode ? 15u : 0u);
    EXPECT_GT(c.worker_cpu_s, 0.0);
  }
}

TEST(PrepServe, TheSameTensorsWhoeverDecodesAndAnotherOrderNextEpoch) {
  (void)images();
  ServiceProcess service(3);
  auto clock = make_clock(ClockKind::Real);
  PrepServiceSource remote(*clock, client(service.port(), pipeline::PrepOffload::All));
  PrepServiceSource local(*clock, client(service.port(), pipeline::PrepOffload::Read));
  const auto a = epoch(remote, 1), b = epoch(local, 1);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].sample_indices, b[i].sample_indices);
    const auto& x = *std::static_pointer_cast<std::vector<std::byte>>(a[i].keep_alive);
    const auto& y = *std::static_pointer_cast<std::vector<std::byte>>(b[i].keep_alive);
    EXPECT_TRUE(x == y) << "batch " << i;
  }
  const auto c = epoch(remote, 2);
  EXPECT_NE(a.front().sample_indices, c.front().sample_indices);  // shuffled by epoch
  expect_each_sample_once(c, 240);
}

TEST(PrepServe, AnEpochLeftHalfwayGivesWayToAWholeNextOne) {
  (void)images();
  ServiceProcess service(2);
  auto clock = make_clock(ClockKind::Real);
  PrepServiceSource source(*clock, client(service.port(), pipeline::PrepOffload::Decode));
  source.begin_epoch(0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(source.next({}).has_value());
  const auto next = epoch(source, 1);  // new connections to the workers; the old epoch's batches are dropped
  ASSERT_EQ(next.size(), 15u);
  for (const auto& b : next) EXPECT_EQ(b.epoch, 1u);
  expect_each_sample_once(next, 240);
}

TEST(PrepServe, AKilledWorkerIsAnErrorNamingItAndSigtermEndsEveryWorker) {
  (void)images();
  ServiceProcess service(2);
  auto clock = make_clock(ClockKind::Real);
  PrepServiceSource source(*clock, client(service.port(), pipeline::PrepOffload::All));
  EXPECT_EQ(epoch(source, 0).size(), 15u);
  const std::vector<PrepWorkerInfo> workers = source.workers();
  ASSERT_EQ(workers.size(), 2u);
  ASSERT_EQ(::kill(workers[1].pid, SIGKILL), 0);
  try {
    epoch(source, 1);
    FAIL() << "an epoch with a dead worker completed";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(fmt::format("worker 1 (pid {})", workers[1].pid)), std::string::npos) << what;
    EXPECT_NE(what.find("killed by SIGKILL"), std::string::npos) << what;
  }
  const int status = service.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // The dispatcher reaped its workers before it ended: neither is left.
  for (const auto& w : workers) EXPECT_NE(::kill(w.pid, 0), 0) << "worker " << w.index << " outlived SIGTERM";
}

TEST(PrepServe, ABadPeerAndABadJobGetOneClearLine) {
  (void)images();
  ServiceProcess service(1);
  int fd = wire::connect_tcp("127.0.0.1", service.port(), 5000);
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, http.data(), http.size(), MSG_NOSIGNAL), static_cast<ssize_t>(http.size()));
  wire::Frame f;
  ASSERT_EQ(wire::read_frame(fd, f, 5000, 5000).got, wire::Got::Frame);
  EXPECT_FALSE(f.message.value("ok", true));
  EXPECT_NE(f.message.value("error", "").find("an HTTP request"), std::string::npos) << f.message.dump();
  wire::close_fd(fd);
  // Well-framed but malformed requests: an error each, on a connection that goes on.
  fd = wire::connect_tcp("127.0.0.1", service.port(), 5000);
  for (const nlohmann::json& bad :
       {nlohmann::json{{"op", 7}}, nlohmann::json{{"op", "register"}, {"job", {{"dataset", 5}}}},
        nlohmann::json{{"op", "launch\n"}}}) {
    ASSERT_TRUE(wire::write_frame(fd, bad));
    ASSERT_EQ(wire::read_frame(fd, f, 5000, 5000).got, wire::Got::Frame) << bad.dump();
    EXPECT_FALSE(f.message.value("ok", true)) << bad.dump();
    EXPECT_EQ(f.message.value("error", "").find('\n'), std::string::npos) << f.message.dump();
  }
  wire::close_fd(fd);

  auto clock = make_clock(ClockKind::Real);
  PrepClientOptions o = client(service.port(), pipeline::PrepOffload::All);
  o.job.dataset = "/nonexistent/gpemu-prep";
  EXPECT_THROW(PrepServiceSource(*clock, o), InputError);
  // The service goes on serving.
  PrepServiceSource fine(*clock, client(service.port(), pipeline::PrepOffload::All));
  EXPECT_EQ(fine.batches_per_epoch(), 15u);
}

TEST(PrepServe, ABrokenJpegIsAnErrorNamingItsSample) {
  TempDir dir;
  pipeline::generate_image_dataset(dir.path(), 2, 20, 4, 1.5);
  fs::path broken;
  for (const auto& e : fs::recursive_directory_iterator(dir.path()))
    if (e.path().extension() == ".JPEG") broken = e.path();
  fs::resize_file(broken, 200);  // a header and the start of the scan: truncated
  ServiceProcess service(2);
  auto clock = make_clock(ClockKind::Real);
  for (auto offload : {pipeline::PrepOffload::All, pipeline::PrepOffload::Read}) {
    SCOPED_TRACE(std::string(pipeline::to_string(offload)));
    PrepClientOptions o = client(service.port(), offload);
    o.job.dataset = dir.path().string();
    o.job.batch_size = 4;
    PrepServiceSource source(*clock, o);
    try {
      epoch(source, 0);
      FAIL() << "an epoch with a truncated JPEG completed";
    } catch (const Error& e) {
      const std::string what = e.what();
      if (offload == pipeline::PrepOffload::All)
        EXPECT_NE(what.find(broken.string()), std::string::npos) << what;
      else
        EXPECT_NE(what.find("(as the service read it)"), std::string::npos) << what;
    }
  }
}

TEST(PrepServe, ASilentWorkerIsAnErrorNamingItAfterTheBatchTimeout) {
  (void)images();
  ServiceProcess service(1);  // one worker: the only one that can fall silent is the stopped one
  auto clock = make_clock(ClockKind::Real);
  PrepClientOptions o = client(service.port(), pipeline::PrepOffload::All);
  o.batch_timeout = 300 * kMillisecond;
  PrepServiceSource source(*clock, o);
  const pid_t stopped = source.workers()[0].pid;
  ASSERT_EQ(::kill(stopped, SIGSTOP), 0);
  try {
    epoch(source, 0);
    ADD_FAILURE() << "an epoch with a stopped worker completed";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(
                  fmt::format("worker 0 (pid {}) sent nothing for 0.3 s before sending batch 0 of epoch 0", stopped)),
              std::string::npos)
        << what;
  }
  ::kill(stopped, SIGCONT);
}

TEST(PrepWire, HeadersAreCheckedBeforeAnythingIsRead) {
  wire::Header h;
  auto good = wire::make_header(10, 20);
  EXPECT_EQ(wire::header_problem(good, h), "");
  EXPECT_EQ(h.json_bytes, 10u);
  EXPECT_EQ(h.payload_bytes, 20u);
  auto version = good;
  version[4] = std::byte{2};
  EXPECT_NE(wire::header_problem(version, h).find("protocol version 2"), std::string::npos);
  EXPECT_NE(wire::header_problem(wire::make_header(wire::kMaxJsonBytes + 1, 0), h).find("outside"), std::string::npos);
  EXPECT_NE(wire::header_problem(wire::make_header(1, wire::kMaxPayloadBytes + 1), h).find("payload"),
            std::string::npos);
}

// A header may claim up to 4 GiB; what is allocated is what came (the fuzz harness's first finding:
// 4 GiB allocated for a 40-byte input).
TEST(PrepWire, APayloadThatStopsShortIsABadFrameWithoutItsClaimedSize) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const std::string json = R"({"op":"batch"})";
  const auto h = wire::make_header(static_cast<std::uint32_t>(json.size()), wire::kMaxPayloadBytes);
  ASSERT_EQ(::write(fds[0], h.data(), h.size()), static_cast<ssize_t>(h.size()));
  ASSERT_EQ(::write(fds[0], json.data(), json.size()), static_cast<ssize_t>(json.size()));
  ASSERT_EQ(::write(fds[0], "0123456789", 10), 10);
  ::close(fds[0]);
  wire::Frame f;
  const wire::ReadResult r = wire::read_frame(fds[1], f, 1000, 1000);
  EXPECT_EQ(r.got, wire::Got::Bad);
  EXPECT_EQ(r.why, "the connection ended inside a frame's payload");
  EXPECT_LE(f.payload.capacity(), std::size_t{8} << 20);
  ::close(fds[1]);
}

TEST(PrepJob, ItsJsonRoundTripsAndNamesWhatIsWrong) {
  PrepJob j;
  j.dataset = "/data";
  j.batch_size = 32;
  j.seed = 9;
  j.offload = pipeline::PrepOffload::Decode;
  const PrepJob back = job_from_json(job_json(j));
  EXPECT_EQ(back.dataset, "/data");
  EXPECT_EQ(back.batch_size, 32u);
  EXPECT_EQ(back.offload, pipeline::PrepOffload::Decode);
  nlohmann::json bad = job_json(j);
  bad["batch_size"] = 0;
  EXPECT_THROW(job_from_json(bad), InputError);
  bad = job_json(j);
  bad["offload"] = "none";
  EXPECT_THROW(job_from_json(bad), InputError);
  EXPECT_EQ(parse_host_port("[::1]:7070").first, "::1");
  EXPECT_THROW(parse_host_port("localhost"), InputError);
  EXPECT_THROW(parse_host_port("h:70000"), InputError);
}

}  // namespace
}  // namespace gpemu::prep
