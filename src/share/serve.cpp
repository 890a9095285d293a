// `gpemu serve` and its clients (share.h, "serve"): emulated GPUs shared by
// real processes over a Unix socket.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "common/interrupt.h"
#include "common/message_text.h"
#include "common/socket_wait.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/session.h"
#include "gpemu/share.h"
#include "share/job_entry.h"
#include "share/metrics_http.h"
#include "share/results.h"
#include "share/serve.h"
#include "share/serve_request.h"

namespace gpemu {
namespace {

using share_detail::Framed;
using share_detail::kMaxServeLine;
using share_detail::reply_line;
using share_detail::request_demand;
using share_detail::request_int;
using share_detail::request_string;
constexpr std::int64_t kMaxKernelNs = 3600 * kSecond;  // an hour per kernel
constexpr std::size_t kMaxKernelRecords = 1 << 16;     // per GPU, for utilisation
constexpr int kMaxGpus = 64;
constexpr int kLaunchQueue = 1024;                      // kernels a client may have in flight, as CUDA's launch queue
constexpr std::size_t kMaxStreams = 1024;               // streams a client may create
constexpr std::size_t kMaxEvents = 1 << 16;             // events a client may hold at once
constexpr std::int64_t kMaxEventId = INT64_C(1) << 53;  // ids JSON numbers carry exactly

// Step ends a "job" or "job_steps" reply carries at most (about 20 bytes
// each: well within a line).
constexpr std::size_t kStepsPerReply = 20'000;

// How far ahead of now a client's kernels are put on the shared timeline.
constexpr Duration kIssueAhead = 20 * kMillisecond;

std::string errno_text(int e) { return std::strerror(e); }

// True when the peer of fd closed its end (its process may have died);
// requests it sent before are still readable.
bool hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

using common::Deadline;
using common::deadline_in;
using common::wait_ready;

// Writes all of s; the peer has timeout_ms in all to take it (-1: no limit).
// False when the connection failed, the time ran out (a peer that does not
// read its replies) or a signal came.
bool write_all(int fd, std::string_view s, int timeout_ms = -1) {
  return common::send_all(fd, s.data(), s.size(), deadline_in(timeout_ms));
}

enum class Read { Line, Closed, Timeout, TooLong };

// One '\n'-terminated line from fd into `line` (without the newline);
// `buffer` keeps what came after it. Waits at most timeout_ms in all (-1: no
// limit): a peer that trickles bytes without ending a line times out too.
// A signal ends the wait as a timeout does.
Read read_line(int fd, std::string& buffer, std::string& line, int timeout_ms) {
  const Deadline deadline = deadline_in(timeout_ms);
  for (;;) {
    const Framed f = share_detail::take_line(buffer, line);
    if (f == Framed::Line) return Read::Line;
    if (f == Framed::TooLong) return Read::TooLong;
    if (!wait_ready(fd, POLLIN, deadline)) return Read::Timeout;
    char chunk[8192];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return Read::Closed;
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
}

nlohmann::json fail(std::string_view kind, std::string error) {
  return {{"ok", false}, {"kind", kind}, {"oom", kind == "oom"}, {"error", std::move(error)}};
}

// Every AllocatorStats field with its name on the wire.
constexpr std::pair<const char*, std::uint64_t AllocatorStats::*> kAllocatorFields[] = {
    {"allocated_bytes", &AllocatorStats::allocated_bytes},
    {"reserved_bytes", &AllocatorStats::reserved_bytes},
    {"requested_bytes", &AllocatorStats::requested_bytes},
    {"peak_allocated_bytes", &AllocatorStats::peak_allocated_bytes},
    {"peak_reserved_bytes", &AllocatorStats::peak_reserved_bytes},
    {"peak_requested_bytes", &AllocatorStats::peak_requested_bytes},
    {"active_blocks", &AllocatorStats::active_blocks},
    {"segments", &AllocatorStats::segments},
    {"num_alloc_retries", &AllocatorStats::num_alloc_retries},
    {"num_ooms", &AllocatorStats::num_ooms},
    {"num_device_alloc", &AllocatorStats::num_device_alloc},
    {"num_device_free", &AllocatorStats::num_device_free}};

// A refused request's reply as the exception it stands for.
[[noreturn]] void throw_refusal(const nlohmann::json& reply) {
  const std::string error = reply.value("error", std::string("refused"));
  if (reply.value("oom", false)) throw OutOfMemoryError(error, 0);
  if (reply.value("kind", std::string()) == "input") throw InputError(error);
  throw Error(error);
}

constexpr int kMaxPosted = 256;
constexpr int kRefusalWriteMs = 100;  // a refusal is written on the accepting thread: it must not wait long  // replies
                                      // a client leaves unread at most (well within a socket's buffers)

}  // namespace

nlohmann::json allocator_stats_json(const AllocatorStats& stats) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, field] : kAllocatorFields) j[name] = stats.*field;
  return j;
}

AllocatorStats allocator_stats_from_json(const nlohmann::json& reply) {
  AllocatorStats a;
  for (const auto& [name, field] : kAllocatorFields) a.*field = reply.value(name, std::uint64_t{0});
  return a;
}

namespace {

// Why `dir` is not a folder of this user's that others cannot write to
// (lstat: a link to one does not count); empty when it is. Server and
// clients check the socket's folder alike: a socket in a folder another
// user can write to may be that user's server.
std::string private_folder_problem(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return fmt::format("it cannot be looked at: {}", errno_text(errno));
  if (!S_ISDIR(st.st_mode)) return "it is not a folder";
  if (st.st_uid != ::geteuid()) return fmt::format("it is another user's, uid {}", st.st_uid);
  if ((st.st_mode & 0022) != 0) return fmt::format("it is writable by others, mode {:o}", st.st_mode & 07777);
  return "";
}

std::filesystem::path folder_of(const std::filesystem::path& socket) {
  return socket.parent_path().empty() ? std::filesystem::path(".") : socket.parent_path();
}

}  // namespace

std::filesystem::path default_socket_path(const char* xdg_runtime_dir, const std::filesystem::path& tmp,
                                          const char* home) {
  if (xdg_runtime_dir && *xdg_runtime_dir) return std::filesystem::path(xdg_runtime_dir) / "gpemu/serve.sock";
  const std::filesystem::path shared = tmp / fmt::format("gpemu-{}", ::geteuid());
  struct stat st {};
  if (::lstat(shared.c_str(), &st) != 0) return shared / "serve.sock";  // the server makes it, 0700
  const std::string problem = private_folder_problem(shared);
  if (problem.empty()) return shared / "serve.sock";
  // Anyone can make the guessable name first; a folder in $HOME only we can.
  if (!home || *home != '/')
    throw InputError(
        fmt::format("the default socket folder {} cannot be used ({}) and HOME is not set for the private one; set "
                    "XDG_RUNTIME_DIR or give the socket's path",
                    shared.string(), problem));
  return std::filesystem::path(home) / ".gpemu/serve.sock";
}

std::filesystem::path default_socket_path() {
  return default_socket_path(std::getenv("XDG_RUNTIME_DIR"), "/tmp", std::getenv("HOME"));
}

// ---- the server --------------------------------------------------------------

struct ShareServer::Impl {
  struct Client {
    int fd = -1;
    std::uint64_t id = 0;
    pid_t pid = 0;
    std::string name;
    int gpu = -1;
    // Its process on the GPU from its hello on: a client of the session
    // (Session::attach), one of the GPU's jobs, and that client's Device.
    ClientHandle process;
    Device* device = nullptr;
    JobId job = -1;  // its job in the session: the hello's client, then its "job"'s
    std::set<CachingAllocator::Ptr> live;
    std::vector<Stream*> streams;  // [0] the default stream; then the ones it created
    // Its events by its own ids, with what each captured (the stream's tail
    // at the record), so that a wait for one can be stopped with the server.
    // Declared after the device: they go before it.
    struct Recorded {
      std::unique_ptr<Event> event = std::make_unique<Event>();
      Completion captured;
    };
    std::map<std::int64_t, Recorded> events;
    int queued = 0;  // kernels issued since the client last waited for a stream
    int priority = 0;
    std::string mig;
    bool worked = false;  // it asked for GPU work or memory: too late for a job
    // Its job ("job"): the job's own device while it runs (the hello's is
    // gone); once it has run, its train steps' ends and samples, kept for
    // "job_steps".
    Device* job_device = nullptr;
    bool ran_job = false;
    std::vector<Time> job_step_ends;
    std::vector<std::int64_t> job_step_samples;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  struct KernelRecord {
    Completion c;
    Duration d;
    std::uint64_t client = 0;
    Time cut = std::numeric_limits<Time>::max();  // its client died: busy no later than this
  };

  ServeOptions o;
  std::unique_ptr<Clock> clock = make_real_clock();
  // The session that owns the GPUs (one SharedGpu each, on its timeline):
  // the request-by-request clients' Devices are views of them, and a
  // client's "job" is a job of the session, added while it runs. Its run()
  // goes on on session_thread until the server stops (Session::close).
  std::unique_ptr<CostModel> costs;  // the session's; each served job brings its own
  std::unique_ptr<Session> session;
  std::thread session_thread;
  std::filesystem::path path;
  ino_t socket_inode = 0;
  int listen_fd = -1, metrics_fd = -1, metrics_port = 0;
  std::string metrics_address;  // "IP:PORT" bound; empty without metrics
  bool metrics_loopback = true;
  int wake[2] = {-1, -1};
  std::atomic<bool> stopping{false};
  mutable std::mutex mu;  // clients, kernels
  std::list<std::shared_ptr<Client>> clients;
  std::vector<std::deque<KernelRecord>> kernels;  // per GPU
  std::uint64_t next_id = 1;
  std::thread metrics_thread;

  explicit Impl(ServeOptions options) : o(std::move(options)) {
    if (!o.gpu) throw InputError("serve: no GPU given; give one of 'gpemu devices'");
    if (o.gpus < 1 || o.gpus > kMaxGpus)
      throw InputError(fmt::format("serve: --gpus {}: give 1 to {}", o.gpus, kMaxGpus));
    if (o.max_clients < 1 || o.max_clients > 4096)
      throw InputError(fmt::format("serve: --max-clients {}: give 1 to 4096", o.max_clients));
    if (o.idle_timeout <= 0) throw InputError("serve: the idle timeout must be positive");
    SessionSpec world;
    world.gpu = o.gpu;
    world.gpus_per_node = o.gpus;
    world.share = o.share;
    world.placement = placement_policy("pinned");  // a client's job on the GPU its hello named
    world.open = true;
    costs = make_cost_model(std::nullopt);
    session = std::make_unique<Session>(*clock, *costs, std::move(world));
    kernels.resize(static_cast<std::size_t>(o.gpus));
    path = o.socket.empty() ? default_socket_path() : o.socket;
    bind_socket();
    try {
      if (::pipe2(wake, O_CLOEXEC) != 0) throw Error("serve: cannot make a pipe: " + errno_text(errno));
      if (!o.metrics.empty()) bind_metrics();
    } catch (...) {
      close_all();
      throw;
    }
    session_thread = std::thread([this] {
      try {
        session->run();
      } catch (...) {  // NOLINT: the host's memory ran out in a job, which ended failed (its client was told)
      }
    });
  }

  Timeline& timeline() { return session->timeline(); }
  SharedGpu& gpu(int g) { return session->gpu(g); }

  // Closes what the server opened and removes its socket (only if it is
  // still the one this server made).
  void close_all() {
    for (int* f : {&listen_fd, &metrics_fd, &wake[0], &wake[1]}) {
      if (*f >= 0) ::close(*f);
      *f = -1;
    }
    struct stat st {};
    if (socket_inode != 0 && ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == socket_inode)
      ::unlink(path.c_str());
    socket_inode = 0;
  }

  ~Impl() {
    stopping = true;
    if (wake[1] >= 0) (void)!::write(wake[1], "x", 1);
    {
      std::lock_guard lock(mu);
      for (auto& c : clients) ::shutdown(c->fd, SHUT_RDWR);
    }
    for (;;) {
      std::shared_ptr<Client> c;
      {
        std::lock_guard lock(mu);
        if (clients.empty()) break;
        c = clients.front();
        clients.pop_front();
      }
      if (c->thread.joinable()) c->thread.join();
    }
    if (metrics_thread.joinable()) metrics_thread.join();
    // The clients' jobs have ended with them (a job stops at its next step
    // when the server stops): the session's run() returns.
    session->close();
    if (session_thread.joinable()) session_thread.join();
    close_all();
  }

  void bind_socket() {
    const std::string p = path.string();
    sockaddr_un addr{};
    if (p.size() >= sizeof addr.sun_path)
      throw InputError(fmt::format("serve: socket path {} is {} bytes; a Unix socket's path has at most {}", p,
                                   p.size(), sizeof addr.sun_path - 1));
    const std::filesystem::path dir = folder_of(path);
    // Made if missing, then checked, whoever made it: another user may make
    // it between a look and the mkdir.
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw InputError(fmt::format("serve: cannot make the socket's folder {}: {}", dir.string(), errno_text(errno)));
    if (const std::string problem = private_folder_problem(dir); !problem.empty())
      throw InputError(
          fmt::format("serve: the socket's folder {} must be a folder of this user's that others cannot write to ({})",
                      dir.string(), problem));
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode))
        throw InputError(fmt::format("serve: {} exists and is not a socket; gpemu will not replace it", p));
      // A socket: in use by a live server, or left by one that died.
      const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      addr.sun_family = AF_UNIX;
      std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
      const bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      if (probe >= 0) ::close(probe);
      if (live) throw InputError(fmt::format("serve: a server already listens at {}; stop it or give --socket", p));
      ::unlink(p.c_str());
    }
    listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd < 0) throw Error("serve: cannot make a socket: " + errno_text(errno));
    // Bound under a temporary name and renamed once listening, so that the
    // socket's path appears only when a client can connect (a client that
    // waits for the path never meets a refused connection). A path too long
    // for a temporary name beside it is bound directly.
    const std::string tmp = p + fmt::format(".{}.tmp", ::getpid());
    const std::string& bound = tmp.size() < sizeof addr.sun_path ? tmp : p;
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, bound.c_str(), bound.size() + 1);
    ::unlink(tmp.c_str());             // a leftover of this pid's earlier run
    const mode_t old = ::umask(0177);  // the socket: rw for its user only
    const int b = ::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    const int err = errno;
    ::umask(old);
    if (b != 0) throw InputError(fmt::format("serve: cannot bind {}: {}", p, errno_text(err)));
    if (::listen(listen_fd, 128) != 0) {
      const int e = errno;
      if (&bound == &tmp) ::unlink(tmp.c_str());
      throw Error(fmt::format("serve: cannot listen on {}: {}", p, errno_text(e)));
    }
    if (&bound == &tmp && ::rename(tmp.c_str(), p.c_str()) != 0) {
      const int e = errno;
      ::unlink(tmp.c_str());
      throw Error(fmt::format("serve: cannot name the socket {}: {}", p, errno_text(e)));
    }
    if (::lstat(p.c_str(), &st) == 0) socket_inode = st.st_ino;
  }

  void bind_metrics() {
    std::string host = "127.0.0.1", port = o.metrics;
    if (const auto colon = o.metrics.rfind(':'); colon != std::string::npos) {
      host = o.metrics.substr(0, colon);
      port = o.metrics.substr(colon + 1);
    }
    char* end = nullptr;
    const long n = std::strtol(port.c_str(), &end, 10);
    in_addr ip{};
    if (port.empty() || *end != '\0' || n < 0 || n > 65535 || ::inet_pton(AF_INET, host.c_str(), &ip) != 1)
      throw InputError(
          fmt::format("serve: --metrics '{}': give PORT or IPv4:PORT (e.g. 9400 or 0.0.0.0:9400)", o.metrics));
    metrics_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(metrics_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(n));
    a.sin_addr = ip;
    if (metrics_fd < 0 || ::bind(metrics_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(metrics_fd, 16) != 0)
      throw InputError(fmt::format("serve: --metrics {}: cannot listen there: {}", o.metrics, errno_text(errno)));
    socklen_t len = sizeof a;
    ::getsockname(metrics_fd, reinterpret_cast<sockaddr*>(&a), &len);
    metrics_port = ntohs(a.sin_port);
    char shown[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &a.sin_addr, shown, sizeof shown);
    metrics_address = fmt::format("{}:{}", shown, metrics_port);
    metrics_loopback = (ntohl(a.sin_addr.s_addr) >> 24) == 127;  // 127.0.0.0/8
  }

  void record_kernel(int gpu, const Completion& c, Duration d, std::uint64_t client) {
    std::lock_guard lock(mu);
    auto& k = kernels[static_cast<std::size_t>(gpu)];
    k.push_back({c, d, client});
    if (k.size() > kMaxKernelRecords) k.pop_front();
  }

  nlohmann::json smi() {
    const Time now = clock->now();
    const Time from = std::max<Time>(0, now - kSecond);
    nlohmann::json out = {{"driver", "gpemu"}, {"gpus", nlohmann::json::array()}};
    const std::vector<GpuLoad> loads = session->loads();  // before mu: the session's lock is taken under it
    std::lock_guard lock(mu);
    for (int g = 0; g < o.gpus; ++g) {
      auto& k = kernels[static_cast<std::size_t>(g)];
      std::vector<BusyInterval> spans;
      for (const KernelRecord& r : k) {
        const Time end = std::min(timeline().end_time(r.c), r.cut);
        spans.push_back({std::min(end, r.c.resolved() ? r.c.known_start(r.d) : end - r.d), end});
      }
      while (!k.empty() && k.front().c.resolved() && k.front().c.known_end() < from) k.pop_front();
      nlohmann::json procs = nlohmann::json::array();
      std::uint64_t used = 0;
      for (const auto& c : clients) {
        const Device* d = c->device ? c->device : c->job_device;
        if (c->gpu != g || !d || c->done) continue;
        const std::uint64_t bytes = d->context_reserve_bytes() + d->allocator().stats().reserved_bytes;
        used += bytes;
        procs.push_back(
            {{"pid", c->pid}, {"name", c->name}, {"client", c->id}, {"job", c->job}, {"memory_bytes", bytes}});
      }
      out["gpus"].push_back(
          {{"index", g},
           {"id", o.gpu->id},
           {"name", o.gpu->name},
           {"uuid", fmt::format("GPU-gpemu-{:08x}-{:04x}", std::hash<std::string>{}(o.gpu->id) & 0xffffffff, g)},
           {"policy", to_string(o.share.policy)},
           {"memory_total_bytes", o.gpu->reported_memory()},
           {"memory_used_bytes", used},
           {"jobs", loads[static_cast<std::size_t>(g)].jobs},
           {"utilization_pct",
            now > from
                ? 100.0 * utilization_from_intervals("GPU", spans, now - from, from, now).samples.front().busy_fraction
                : 0.0},
           {"processes", std::move(procs)}});
    }
    return out;
  }

  std::string metrics_text() {
    const nlohmann::json s = smi();
    char host[256] = "localhost";
    ::gethostname(host, sizeof host - 1);
    std::string out;
    auto family = [&](const char* name, const char* help, auto value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
      for (const auto& g : s["gpus"])
        out += fmt::format("{}{{gpu=\"{}\",UUID=\"{}\",device=\"nvidia{}\",modelName=\"{}\",Hostname=\"{}\"}} {}\n",
                           name, g["index"].get<int>(), g["uuid"].get<std::string>(), g["index"].get<int>(),
                           g["name"].get<std::string>(), host, value(g));
    };
    constexpr double MiB = 1048576.0;
    family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
           [](const nlohmann::json& g) { return static_cast<int>(g["utilization_pct"].get<double>() + 0.5); });
    family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", [&](const nlohmann::json& g) {
      return static_cast<std::uint64_t>(g["memory_used_bytes"].get<std::uint64_t>() / MiB);
    });
    family("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", [&](const nlohmann::json& g) {
      const auto total = g["memory_total_bytes"].get<std::uint64_t>(),
                 used = g["memory_used_bytes"].get<std::uint64_t>();
      return static_cast<std::uint64_t>((total > used ? total - used : 0) / MiB);
    });
    return out;
  }

  // ---- one client ----

  // Sleeps until the server's time t in slices: the server stopping or the
  // client hanging up (its process died: the kernel closed its socket) ends
  // the wait with an Error that ends the client.
  void sleep_until(const Client& c, Time t) {
    while (clock->now() < t) {
      if (stopping) throw Error("the server is stopping");
      if (hung_up(c.fd)) throw Error("the client hung up");
      clock->sleep_until(std::min<Time>(t, clock->now() + 20 * kMillisecond));
    }
  }

  nlohmann::json handle(Client& c, const nlohmann::json& m) {
    const std::string op = share_detail::request_op(m);
    if (op == "hello") {
      if (c.device || c.ran_job) return fail("protocol", "hello: this client has said hello already");
      const int g = static_cast<int>(request_int(m, "gpu", 0, o.gpus - 1, 0));
      const int priority = static_cast<int>(request_int(m, "priority", -1000, 1000, 0));
      const std::string mig = request_string(m, "mig", "");
      c.name = request_string(m, "name", "client");
      const bool slices = gpu(g).slices();
      if (slices && mig.empty())
        throw InputError(fmt::format("hello: policy mig: give 'mig', a profile of the {}", o.gpu->id));
      if (!slices && !mig.empty())
        throw InputError(fmt::format("hello: 'mig' is for policy mig, not {}", to_string(o.share.policy)));
      // Its process: a client of the session on GPU g (the placement is pinned).
      ClientHandle process = session->attach({c.name, g, 1, priority, mig});
      std::lock_guard lock(mu);
      c.process = std::move(process);
      c.device = &c.process.device();
      c.job = c.process.id();
      c.streams = {&c.device->default_stream()};
      c.gpu = g;
      c.priority = priority;
      c.mig = mig;
      return {{"ok", true},
              {"client", c.id},
              {"protocol", kServeProtocol},
              {"gpu",
               {{"index", g},
                {"id", o.gpu->id},
                {"name", o.gpu->name},
                {"policy", to_string(o.share.policy)},
                {"memory_bytes", c.device->allocator().capacity()}}}};
    }
    if (op == "smi") {
      nlohmann::json r = smi();
      r["ok"] = true;
      return r;
    }
    if (op == "bye") {
      release(c);  // before the reply: what it held is back when its bye returns
      return {{"ok", true}};
    }
    if (op == "job_steps") return job_steps(c, m);
    if (c.ran_job)
      return fail("protocol", fmt::format("'{}' after a job: this connection's process was the job, which "
                                          "has ended; it takes job_steps, smi and bye",
                                          op.substr(0, 40)));
    if (!c.device) return fail("protocol", fmt::format("'{}' before hello: say hello first", op));
    if (op == "job") return run_job(c, m);
    if (op != "memory") c.worked = true;
    Device& dev = *c.device;
    CachingAllocator& alloc = dev.allocator();
    // The stream a request names ("stream", default 0: the default stream).
    const auto stream_of = [&]() -> Stream& {
      const auto id = request_int(m, "stream", 0, static_cast<std::int64_t>(kMaxStreams), 0);
      if (static_cast<std::size_t>(id) >= c.streams.size())
        throw InputError(fmt::format("stream {}: this client has streams 0 to {}", id, c.streams.size() - 1));
      return *c.streams[static_cast<std::size_t>(id)];
    };
    // Waits on the clock in slices, so that stopping the server, or the
    // client hanging up, never waits for a long kernel of a client's.
    const auto wait_for = [&](const Completion& done) {
      return timeline().wait(done, [&](Time t) { sleep_until(c, t); });
    };
    const auto wait_stream = [&](Stream& s) {
      c.queued = 0;
      return wait_for(s.tail());
    };
    const auto event_of = [&](bool create) -> Client::Recorded& {
      const std::int64_t id = request_int(m, "event", 1, kMaxEventId, 0, true);
      auto it = c.events.find(id);
      if (it == c.events.end()) {
        if (!create) throw InputError(fmt::format("event {}: not an event this client recorded", id));
        if (c.events.size() >= kMaxEvents)
          throw InputError(fmt::format("event {}: this client holds {} events already (free some)", id, kMaxEvents));
        it = c.events.emplace(id, Client::Recorded{}).first;
      }
      return it->second;
    };
    const auto issue_kernel = [&](Stream& s) {
      const Duration ns = request_int(m, "ns", 0, kMaxKernelNs, 0, true);
      const KernelDemand demand{request_demand(m, "sm"), request_demand(m, "bw")};
      // A kernel goes on the shared GPU's timeline when the stream's work
      // before it is about to end, not when it is asked: what a client asked
      // and the GPU has not reached stays here (in its socket), so that a
      // client that dies or is dropped leaves at most one kernel behind it
      // for the others to wait for, as a dead process's context takes its
      // queued work with it (N3).
      sleep_until(c, timeline().end_time(s.tail()) - kIssueAhead);
      SharedGpu& shared = gpu(c.gpu);
      // Under fifo each request is one exclusive turn.
      const bool fifo = shared.exclusive_steps();
      if (fifo) {
        const Completion dep[] = {shared.begin_turn()};
        OpSpec w;
        w.trace = false;
        w.tag.name = "wait for the shared GPU";
        s.enqueue(w, std::nullopt, dep);
      }
      const Completion k = s.launch_kernel(ns, c.name, demand);
      if (fifo) shared.end_turn(k);
      record_kernel(c.gpu, k, ns, c.id);
      // CUDA's launch queue is bounded: a launch into a full one blocks
      // until the stream drains (and the timeline's pending work stays bounded).
      if (++c.queued >= kLaunchQueue) wait_stream(s);
    };
    if (op == "malloc") {
      const auto bytes =
          static_cast<std::uint64_t>(request_int(m, "bytes", 0, static_cast<std::int64_t>(kMaxByteSize), 0, true));
      const CachingAllocator::Ptr p = alloc.allocate(bytes, stream_of().id());
      if (p) c.live.insert(p);
      return {{"ok", true}, {"ptr", p}, {"size", p ? alloc.block_size(p) : 0}};
    }
    if (op == "free") {
      const auto p = static_cast<CachingAllocator::Ptr>(request_int(m, "ptr", 0, INT64_MAX, 0, true));
      if (p == 0) return {{"ok", true}};
      if (!c.live.erase(p)) return fail("input", fmt::format("free: {} is not a live allocation of this client", p));
      alloc.free(p);
      return {{"ok", true}};
    }
    if (op == "kernel") {
      issue_kernel(stream_of());
      return {{"ok", true}};
    }
    if (op == "copy") {
      Stream& s = stream_of();
      const std::string dir = request_string(m, "dir", "h2d");
      if (dir != "h2d" && dir != "d2h") throw InputError(fmt::format("copy: 'dir' is '{}': give h2d or d2h", dir));
      const auto bytes = static_cast<std::uint64_t>(request_int(m, "bytes", 0, std::int64_t{1} << 36, 0, true));
      const auto pinned = m.find("pinned");
      if (pinned != m.end() && !pinned->is_boolean()) throw InputError("copy: 'pinned' must be true or false");
      const HostMemoryKind kind =
          pinned == m.end() || pinned->get<bool>() ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
      // A pageable copy returns when done (the host copies through a staging
      // buffer); the Device blocks on the timeline for it, which cannot be
      // stopped: copies are bounded (64 GiB over the link) so it ends.
      if (dir == "h2d")
        s.copy_h2d(bytes, kind);
      else
        s.copy_d2h(bytes, kind);
      return {{"ok", true}};
    }
    if (op == "sync" || op == "batch") {
      Stream& s = stream_of();
      if (op == "batch") issue_kernel(s);
      if (const auto all = m.find("device"); all != m.end()) {
        if (!all->is_boolean()) throw InputError("sync: 'device' must be true or false");
        if (all->get<bool>()) {
          Time end = 0;
          for (Stream* t : c.streams) end = std::max(end, wait_stream(*t));
          return {{"ok", true}, {"end_ns", end}};
        }
      }
      return {{"ok", true}, {"end_ns", wait_stream(s)}};
    }
    if (op == "stream") {
      if (c.streams.size() >= kMaxStreams)
        throw InputError(fmt::format("stream: this client has {} streams, the most a client may have", kMaxStreams));
      // PyTorch's streams are non-blocking: no implicit order with the default stream.
      c.streams.push_back(&dev.create_stream(/*non_blocking=*/true));
      return {{"ok", true}, {"stream", c.streams.size() - 1}};
    }
    if (op == "record") {
      Stream& s = stream_of();
      Client::Recorded& e = event_of(/*create=*/true);
      s.record(*e.event);
      e.captured = s.tail();
      return {{"ok", true}};
    }
    if (op == "wait") {
      Stream& s = stream_of();
      s.wait(*event_of(/*create=*/false).event);
      return {{"ok", true}};
    }
    if (op == "query") {
      if (m.contains("event")) return {{"ok", true}, {"done", event_of(/*create=*/false).event->query()}};
      return {{"ok", true}, {"done", stream_of().query()}};
    }
    if (op == "event_sync") {
      Client::Recorded& e = event_of(/*create=*/false);
      return {{"ok", true}, {"end_ns", wait_for(e.captured)}};
    }
    if (op == "elapsed") {
      const std::int64_t a = request_int(m, "start", 1, kMaxEventId, 0, true);
      const std::int64_t b = request_int(m, "end", 1, kMaxEventId, 0, true);
      const auto ia = c.events.find(a), ib = c.events.find(b);
      if (ia == c.events.end() || ib == c.events.end())
        throw InputError(
            fmt::format("elapsed: event {} was not recorded by this client", ia == c.events.end() ? a : b));
      wait_for(ia->second.captured);
      wait_for(ib->second.captured);
      return {{"ok", true}, {"ms", to_ms(Event::elapsed(*ia->second.event, *ib->second.event))}};
    }
    if (op == "event_free") {
      c.events.erase(request_int(m, "event", 1, kMaxEventId, 0, true));
      return {{"ok", true}};
    }
    if (op == "empty_cache") {
      alloc.empty_cache();
      return {{"ok", true}};
    }
    if (op == "reset_peak") {
      alloc.reset_peak_stats();
      return {{"ok", true}};
    }
    if (op == "memory") {
      nlohmann::json r = allocator_stats_json(alloc.stats());
      r["ok"] = true;
      r["capacity_bytes"] = alloc.capacity();
      return r;
    }
    return fail("input", fmt::format("unknown op '{}'; ops: hello, malloc, free, kernel, copy, sync, batch, stream, "
                                     "record, wait, query, event_sync, elapsed, event_free, empty_cache, reset_peak, "
                                     "memory, job, job_steps, smi, bye",
                                     op.substr(0, 40)));
  }

  // ---- a job of the client's, run here ----

  // Its kernels, as its job settles them, count in smi's utilisation.
  class KernelsSeen final : public RecordSink {
   public:
    KernelsSeen(Impl& server, const Client& c) : server_(server), c_(c) {}
    void on_kernel(int, const KernelSpan& k) override {
      server_.record_kernel(c_.gpu, Completion::at(k.end), k.end - k.start, c_.id);
    }

   private:
    Impl& server_;
    const Client& c_;
  };

  // "job": the client's process is the engine's Job (job.h) on its GPU, the
  // step loop `gpemu share` runs in one process: the same memory plan through
  // its caching allocator, copies, kernels and policy turns. The hello's
  // device (its context and slice) makes way for the job's own.
  nlohmann::json run_job(Client& c, const nlohmann::json& m) {
    if (c.worked)
      return fail("protocol",
                  "job: send it right after hello: the job is the whole process, and this one has asked for GPU work "
                  "or memory already");
    const auto entry = m.find("job");
    if (entry == m.end() || !entry->is_object())
      throw InputError("job: 'job' must be an object, a job of a jobs file (docs/sharing.md, \"The jobs file\")");
    for (const auto& [key, why] :
         {std::pair<const char*, const char*>{"arrival_s", "the client starts it when it connects"},
          {"after", "a queue runs in one process (gpemu share)"},
          {"priority", "hello gives it"},
          {"mig", "hello gives it"},
          {"dataset", "a served job's batches are in memory (gpemu share runs loaders)"}})
      if (entry->contains(key)) throw InputError(fmt::format("job: '{}' is not for a served job: {}", key, why));
    std::optional<std::filesystem::path> profiles;
    if (const auto p = m.find("profiles"); p != m.end()) {
      if (!p->is_string() || p->get<std::string>().empty() || p->get<std::string>().size() > 4096 ||
          has_control_characters(p->get<std::string>()))
        throw InputError("job: 'profiles' must be a folder's path (at most 4096 bytes, no control characters)");
      profiles = p->get<std::string>();
    }
    const auto steps = m.find("steps");
    if (steps != m.end() && !steps->is_boolean()) throw InputError("job: 'steps' must be true or false");
    ShareSpec one;
    one.gpu = o.gpu;
    one.options = o.share;
    one.jobs = {share_detail::parse_job_entry(*entry, "job")};
    give_cost_models(one, profiles);  // InputError for an unknown model or host
    const SharedJobSpec& js = one.jobs.front();
    SessionJob job = share_detail::session_job(js, c.gpu);  // it arrives now
    job.priority = c.priority;                              // its hello's
    job.mig = c.mig;
    job.trace_row = c.gpu;  // its Device's index: the GPU's, as a hello's device
    // A client that hangs up, or the server stopping, ends its job at the next step.
    job.job.schedule.between_steps = [this, &c](const StepBoundary&) {
      if (stopping) throw Error("the server is stopping");
      if (hung_up(c.fd)) throw Error("the client hung up");
    };
    KernelsSeen seen(*this, c);
    job.job.record.sink = &seen;
    job.job.record.steps = steps != m.end() && steps->get<bool>();
    // smi counts the job's device while it is the client's process.
    job.on_start = [this, &c](Job& j) {
      std::lock_guard lock(mu);
      c.job_device = &j.device(0);
    };
    job.on_stop = [this, &c] {
      std::lock_guard lock(mu);
      c.job_device = nullptr;
    };
    {
      std::lock_guard lock(mu);
      c.streams.clear();
      c.device = nullptr;
      c.process.detach();
    }
    // It arrives now and runs on the session's host thread; its end is an
    // event of the session's, and its memory has gone back by then, as a
    // process's at its exit.
    const JobId id = session->add_job(std::move(job));
    {
      std::lock_guard lock(mu);
      c.job = id;
    }
    session->ended(id).wait();
    JobOutcome out = session->take_outcome(id);
    const SharedJobResult r = share_detail::job_result(js, *o.gpu, std::move(out));
    c.ran_job = true;
    c.job_step_ends = r.step_ends();
    c.job_step_samples = r.step_samples();
    nlohmann::json reply = {{"ok", true},
                            {"start_ns", r.arrival},
                            {"end_ns", r.end},
                            {"iterations", r.iterations()},
                            {"samples", r.samples()},
                            {"compute_busy_ns", r.compute_busy()},
                            {"peak_allocated_bytes", r.peak_allocated_bytes()},
                            {"peak_reserved_bytes", r.peak_reserved_bytes()},
                            {"error", r.error.empty() ? nlohmann::json() : nlohmann::json(r.error)},
                            {"steps", c.job_step_ends.size()}};
    add_steps(reply, c, 0);
    return reply;
  }

  static void add_steps(nlohmann::json& reply, const Client& c, std::size_t from) {
    const std::size_t to = std::min(c.job_step_ends.size(), from + kStepsPerReply);
    reply["step_end_ns"] = std::vector<Time>(c.job_step_ends.begin() + from, c.job_step_ends.begin() + to);
    reply["step_samples"] =
        std::vector<std::int64_t>(c.job_step_samples.begin() + from, c.job_step_samples.begin() + to);
  }

  // "job_steps" {from}: the job's step ends from `from` on, a page at a time.
  nlohmann::json job_steps(const Client& c, const nlohmann::json& m) {
    if (!c.ran_job) return fail("protocol", "job_steps: this connection has run no job");
    const auto from = request_int(m, "from", 0, static_cast<std::int64_t>(c.job_step_ends.size()), 0, true);
    nlohmann::json reply = {{"ok", true}};
    add_steps(reply, c, static_cast<std::size_t>(from));
    return reply;
  }

  // Requests and replies until the client leaves, goes silent or the server stops.
  void converse(const std::shared_ptr<Client>& c) {
    std::string buffer, line;
    // A client that says nothing, trickles bytes without ending a request,
    // or does not read its replies for the idle timeout is dropped (N11).
    const int idle_ms = static_cast<int>(std::clamp<std::int64_t>(o.idle_timeout / kMillisecond, 1, INT32_MAX));
    std::int64_t idle = 0;
    while (!stopping && !interrupt_requested()) {
      const int slice = std::min(200, idle_ms);
      const Read r = read_line(c->fd, buffer, line, slice);
      if (r == Read::Timeout) {
        idle += slice;
        if (idle >= idle_ms) break;  // a client that hangs is dropped
        continue;
      }
      idle = 0;
      if (r == Read::TooLong) {
        write_all(c->fd, reply_line(fail("protocol", fmt::format("a request longer than {} bytes", kMaxServeLine))),
                  idle_ms);
        break;
      }
      if (r == Read::Closed) break;
      nlohmann::json reply;
      bool bye = false;
      try {
        const nlohmann::json m = share_detail::parse_request(line);
        bye = share_detail::request_op(m) == "bye";
        reply = handle(*c, m);
      } catch (const nlohmann::json::exception& e) {
        reply = fail("protocol", fmt::format("not a JSON request ({})", e.what()));
      } catch (const OutOfMemoryError& e) {
        reply = fail("oom", e.what());
      } catch (const InputError& e) {
        reply = fail("input", e.what());
      } catch (const std::exception& e) {
        reply = fail("error", e.what());
      }
      if (!write_all(c->fd, reply_line(reply), idle_ms) || bye) break;
    }
  }

  // The client's process exits (bye, or its connection ended): its memory,
  // context and place in the session go back. Once only.
  void release(Client& c) {
    std::lock_guard lock(mu);
    if (!c.device) return;
    // Its context goes with it: the kernel it left on the GPU stops now,
    // not at its end, which may be an hour away (N3).
    for (Stream* s : c.streams) timeline().cancel(s->tail());
    // What smi and the metrics endpoint count as busy ends with it too,
    // though a kernel on the timeline's fast path keeps its end there.
    const Time died = clock->now();
    for (KernelRecord& r : kernels[static_cast<std::size_t>(c.gpu)])
      if (r.client == c.id) r.cut = std::min(r.cut, died);
    SharedGpu& shared = gpu(c.gpu);
    if (shared.exclusive_steps()) {
      // Under fifo a kernel alone on the GPU took the timeline's fast path,
      // whose end is fixed: the next turn starts now instead of after it.
      const Time now = clock->now();
      const Completion last = shared.begin_turn();
      const bool its_turn = last.resolved() && last.known_end() > now &&
                            std::any_of(c.streams.begin(), c.streams.end(), [&](const Stream* s) {
                              return s->tail().resolved() && s->tail().known_end() == last.known_end();
                            });
      shared.end_turn(its_turn ? Completion::at(now) : last);
    }
    for (CachingAllocator::Ptr p : c.live) c.device->allocator().free(p);
    c.live.clear();
    c.events.clear();
    c.streams.clear();
    c.device = nullptr;
    c.process.detach();  // its place in the session: the GPU's load, its end
  }

  void serve(const std::shared_ptr<Client>& c) {
    try {
      converse(c);
    } catch (...) {  // NOLINT: whatever went wrong ends this client only; its resources go back below
    }
    release(*c);  // the client is gone (or dropped)
    ::shutdown(c->fd, SHUT_RDWR);
    c->done = true;
  }

  void reap() {
    std::vector<std::shared_ptr<Client>> finished;
    {
      std::lock_guard lock(mu);
      for (auto it = clients.begin(); it != clients.end();) {
        if ((*it)->done) {
          finished.push_back(*it);
          it = clients.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& c : finished) {
      if (c->thread.joinable()) c->thread.join();
      ::close(c->fd);
    }
  }

  void accept_one() {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
      write_all(fd,
                reply_line(fail("refused", fmt::format("refused: the peer's user ({}) is not the server's ({})",
                                                       cred.uid, ::geteuid()))),
                kRefusalWriteMs);
      ::close(fd);
      return;
    }
    std::lock_guard lock(mu);
    if (clients.size() >= static_cast<std::size_t>(o.max_clients)) {
      write_all(fd, reply_line(fail("refused", fmt::format("refused: the server has its {} clients", o.max_clients))),
                kRefusalWriteMs);
      ::close(fd);
      return;
    }
    auto c = std::make_shared<Client>();
    c->fd = fd;
    c->pid = cred.pid;
    c->id = next_id++;
    clients.push_back(c);
    c->thread = std::thread([this, c] { serve(c); });
  }

  // The metrics endpoint: one thread, off the accepting path, serving every
  // connection without blocking. Each has kMetricsDeadline from its accept
  // to send its request's head and take the response, so a slow or silent
  // peer (a slowloris) holds neither the other scrapers nor shutdown (N6).
  struct MetricsConnection {
    int fd = -1;
    std::chrono::steady_clock::time_point deadline;
    std::string in, out;
    std::size_t sent = 0;
  };
  static constexpr auto kMetricsDeadline = std::chrono::seconds(2);
  static constexpr std::size_t kMaxMetricsConnections = 64;

  // Reads what came, answers a whole head; false when the connection is done.
  bool metrics_step(MetricsConnection& m) {
    if (m.out.empty()) {
      char chunk[4096];
      for (;;) {
        const ssize_t n = ::recv(m.fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) return false;  // closed before a whole request
        m.in.append(chunk, static_cast<std::size_t>(n));
        if (m.in.size() > share_detail::kMaxMetricsHead) break;
      }
      const std::size_t end = share_detail::metrics_head_end(m.in);
      if (end == 0 && m.in.size() <= share_detail::kMaxMetricsHead) return true;  // more to come
      const std::string_view head = std::string_view(m.in).substr(0, end == 0 ? m.in.size() : end);
      const int status = share_detail::metrics_request_status(head);
      m.out = share_detail::metrics_response(status, head, status == 200 ? metrics_text() : std::string());
    }
    while (m.sent < m.out.size()) {
      const ssize_t n = ::send(m.fd, m.out.data() + m.sent, m.out.size() - m.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) return false;
      m.sent += static_cast<std::size_t>(n);
    }
    return false;  // answered
  }

  void serve_metrics() {
    std::deque<MetricsConnection> conns;
    std::vector<pollfd> p;
    while (!stopping) {
      p.assign({{metrics_fd, POLLIN, 0}, {wake[0], POLLIN, 0}});
      for (const auto& m : conns) p.push_back({m.fd, static_cast<short>(m.out.empty() ? POLLIN : POLLOUT), 0});
      if (::poll(p.data(), p.size(), 100) < 0 && errno != EINTR) break;
      const auto now = std::chrono::steady_clock::now();
      std::deque<MetricsConnection> kept;
      for (std::size_t i = 0; i < conns.size(); ++i) {
        MetricsConnection& m = conns[i];
        const bool ready = (p[i + 2].revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)) != 0;
        if (now < m.deadline && (!ready || metrics_step(m)))
          kept.push_back(std::move(m));
        else
          ::close(m.fd);
      }
      conns = std::move(kept);
      if (p[0].revents & POLLIN) {
        const int fd = ::accept4(metrics_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
          if (conns.size() >= kMaxMetricsConnections) {  // the oldest goes: the newest may be a real scraper
            ::close(conns.front().fd);
            conns.pop_front();
          }
          conns.push_back({fd, now + kMetricsDeadline, {}, {}, 0});
        }
      }
    }
    for (const auto& m : conns) ::close(m.fd);
  }

  void run() {
    if (metrics_fd >= 0 && !metrics_thread.joinable()) metrics_thread = std::thread([this] { serve_metrics(); });
    while (!stopping && !interrupt_requested()) {
      pollfd p[2] = {{listen_fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
      const int r = ::poll(p, 2, 200);
      reap();
      if (r > 0 && (p[0].revents & POLLIN)) accept_one();
    }
    stopping = true;
  }
};

ShareServer::ShareServer(ServeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
ShareServer::~ShareServer() = default;
const std::filesystem::path& ShareServer::socket_path() const { return impl_->path; }
int ShareServer::metrics_port() const { return impl_->metrics_port; }
const std::string& ShareServer::metrics_address() const { return impl_->metrics_address; }
bool ShareServer::metrics_on_loopback() const { return impl_->metrics_loopback; }
void ShareServer::run() { impl_->run(); }
void ShareServer::stop() {
  impl_->stopping = true;
  (void)!::write(impl_->wake[1], "x", 1);
}
nlohmann::json ShareServer::smi() { return impl_->smi(); }
std::string ShareServer::metrics_text() { return impl_->metrics_text(); }

// ---- the client ----------------------------------------------------------------

ServeClient::ServeClient(const std::filesystem::path& socket, const ClientHello& hello)
    : ServeClient(socket, hello.reply_timeout) {
  nlohmann::json m = {{"op", "hello"}, {"name", hello.name}, {"gpu", hello.gpu}, {"priority", hello.priority}};
  if (!hello.mig.empty()) m["mig"] = hello.mig;
  hello_ = request(m);
  if (!hello_.value("ok", false)) {
    const std::string error = hello_.value("error", std::string("refused"));
    ::close(fd_);
    fd_ = -1;
    if (hello_.value("kind", std::string()) == "oom") throw OutOfMemoryError(error, 0);
    if (hello_.value("kind", std::string()) == "input") throw InputError(error);
    throw Error(error);
  }
}

ServeClient::ServeClient(const std::filesystem::path& socket, Duration reply_timeout)
    : socket_(socket), reply_timeout_(reply_timeout) {
  if (reply_timeout <= 0) throw InputError("gpemu serve: a client's reply timeout must be positive");
  const std::string p = socket.string();
  sockaddr_un addr{};
  if (p.size() >= sizeof addr.sun_path) throw InputError(fmt::format("socket path {} is too long", p));
  // The server's own check, from this side: a socket in a folder another
  // user can write to may be that user's server, which would see every
  // request and could answer anything.
  const std::filesystem::path dir = folder_of(socket);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0)
    if (const std::string problem = private_folder_problem(dir); !problem.empty())
      throw InputError(fmt::format(
          "refusing the socket {}: its folder {} must be a folder of this user's that others cannot write to "
          "({}), as gpemu serve makes it",
          p, dir.string(), problem));
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw Error("cannot make a socket: " + errno_text(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  // A server whose backlog is full (it stopped accepting) refuses at once
  // without blocking: tried again until the reply timeout, or a signal.
  const Deadline deadline = deadline_in(timeout_ms());
  int e = 0;
  while (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    e = errno;
    if (e == EINTR) continue;
    if (e != EAGAIN || interrupt_requested() || std::chrono::steady_clock::now() >= *deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    e = 0;
  }
  if (e != 0) {
    ::close(fd_);
    fd_ = -1;
    throw_if_interrupted();
    if (e == EAGAIN)
      throw Error(fmt::format("gpemu serve at {} did not accept the connection in {}", p, timeout_text()));
    throw Error(fmt::format("nothing serves {} ({}); start 'gpemu serve' or give its --socket", p, errno_text(e)));
  }
  // The server's user, as the server checks ours: this user or root.
  ucred cred{};
  socklen_t len = sizeof cred;
  const bool known = ::getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
  const int cred_errno = errno;
  if (!known || (cred.uid != ::geteuid() && cred.uid != 0)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(
        known ? fmt::format("refusing the server at {}: it runs as uid {}, not as this user ({}) or root", p, cred.uid,
                            ::geteuid())
              : fmt::format("refusing the server at {}: its user cannot be known ({})", p, errno_text(cred_errno)));
  }
}

ServeClient::~ServeClient() {
  if (fd_ < 0) return;
  try {
    if (!interrupt_requested()) request({{"op", "bye"}});
  } catch (...) {  // NOLINT: the server is gone (or does not answer); nothing to say goodbye to
  }
  ::close(fd_);
}

int ServeClient::timeout_ms() const {
  return static_cast<int>(std::clamp<std::int64_t>(reply_timeout_ / kMillisecond, 1, INT32_MAX));
}

std::string ServeClient::timeout_text() const { return fmt::format("{:g} s", to_seconds(reply_timeout_)); }

void ServeClient::send_line(const nlohmann::json& message) {
  if (write_all(fd_, reply_line(message))) return;
  throw_if_interrupted();
  throw Error("gpemu serve: the connection is closed");
}

std::string ServeClient::reply(bool bounded) {
  std::string line;
  const Read got = read_line(fd_, buffer_, line, bounded ? timeout_ms() : -1);
  if (got == Read::Line) return line;
  // The connection is out of step (or gone): closed now, so that nothing
  // else (the destructor's bye) waits on it again.
  ::close(fd_);
  fd_ = -1;
  posted_ = 0;
  if (got == Read::Timeout) {
    throw_if_interrupted();
    throw Error(fmt::format("gpemu serve at {} did not answer in {}", socket_.string(), timeout_text()));
  }
  if (got == Read::TooLong) throw Error(fmt::format("gpemu serve: a reply longer than {} bytes", kMaxServeLine));
  throw Error("gpemu serve: the server closed the connection");
}

void ServeClient::post(const nlohmann::json& message) {
  if (fd_ < 0) throw Error("gpemu serve: not connected");
  if (posted_ >= kMaxPosted) drain();
  send_line(message);
  ++posted_;
}

void ServeClient::drain() {
  nlohmann::json first_refusal;  // every reply is read; the first refusal is thrown
  for (; posted_ > 0; --posted_) {
    std::string line;
    try {
      line = reply(/*bounded=*/false);  // a posted launch may wait for the GPU to reach it
    } catch (...) {
      posted_ = 0;
      throw;
    }
    nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded()) r = {{"ok", false}, {"error", "gpemu serve: a reply that is not JSON"}};
    if (first_refusal.is_null() && !r.value("ok", false)) first_refusal = std::move(r);
  }
  if (!first_refusal.is_null()) throw_refusal(first_refusal);
}

nlohmann::json ServeClient::request(const nlohmann::json& message) {
  if (fd_ < 0) throw Error("gpemu serve: not connected");
  drain();
  send_line(message);
  // What answers at once has the reply timeout; the rest may wait for
  // emulated work (an hour-long kernel), and ends on a signal only.
  const std::string op = message.is_object() ? message.value("op", std::string()) : std::string();
  const std::string line = reply(op == "hello" || op == "smi" || op == "bye");
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("gpemu serve: a reply that is not JSON ({})", e.what()));
  }
}

nlohmann::json ServeClient::checked(const nlohmann::json& message) {
  nlohmann::json r = request(message);
  if (r.value("ok", false)) return r;
  throw_refusal(r);
}

std::uint64_t ServeClient::malloc(std::uint64_t bytes) {
  return checked({{"op", "malloc"}, {"bytes", bytes}})["ptr"].get<std::uint64_t>();
}
void ServeClient::free(std::uint64_t ptr) { checked({{"op", "free"}, {"ptr", ptr}}); }
void ServeClient::kernel(Duration ns, KernelDemand d) {
  checked({{"op", "kernel"}, {"ns", ns}, {"sm", d.sm}, {"bw", d.bw}});
}
Time ServeClient::sync() { return default_stream_end(checked({{"op", "sync"}})); }
Time ServeClient::batch(Duration ns, KernelDemand d) {
  return default_stream_end(checked({{"op", "batch"}, {"ns", ns}, {"sm", d.sm}, {"bw", d.bw}}));
}

Time ServeClient::default_stream_end(const nlohmann::json& reply) {
  // A stream's work ends in order: an end before the last one (or none) is
  // not a reply of gpemu serve's.
  const auto end = reply.find("end_ns");
  if (end == reply.end() || !end->is_number_integer() || end->get<Time>() < last_end_)
    throw Error(fmt::format("gpemu serve: a reply whose end_ns ({}) is not a time at or after this stream's last ({})",
                            end == reply.end() ? "none" : one_line_message(end->dump()), last_end_));
  last_end_ = end->get<Time>();
  return last_end_;
}

nlohmann::json served_gpus(const std::filesystem::path& socket, Duration reply_timeout) {
  ServeClient monitor(socket, reply_timeout);
  const nlohmann::json s = monitor.request({{"op", "smi"}});
  if (!s.value("ok", false) || !s.contains("gpus") || !s["gpus"].is_array() || s["gpus"].empty())
    throw Error(fmt::format("gpemu serve at {} did not describe its GPUs", socket.string()));
  for (const nlohmann::json& g : s["gpus"])
    if (!g.is_object() || !g.contains("id") || !g["id"].is_string() || !g.contains("policy") ||
        !g["policy"].is_string())
      throw Error(
          fmt::format("gpemu serve at {} described a GPU without a text id and policy ({}): not a reply of "
                      "gpemu serve's",
                      socket.string(), one_line_message(g.dump()).substr(0, 200)));
  return s["gpus"];
}

}  // namespace gpemu
