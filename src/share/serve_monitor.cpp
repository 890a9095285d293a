// gpemu serve's server as gpemu smi and a Prometheus scraper see it: the
// GPUs' kernels over the last second, their memory and processes, and the
// metrics endpoint (serve_server.h).
#include "share/serve_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/share.h"
#include "share/metrics_http.h"
#include "share/serve_wire.h"

namespace gpemu {

using share_detail::errno_text;

namespace {

constexpr std::size_t kMaxKernelRecords = 1 << 16;  // per GPU, for utilisation

}  // namespace

void ShareServer::Impl::bind_metrics() {
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

void ShareServer::Impl::record_kernel(int gpu, const Completion& c, Duration d, std::uint64_t client) {
  std::lock_guard lock(mu);
  auto& k = kernels[static_cast<std::size_t>(gpu)];
  k.push_back({c, d, client});
  if (k.size() > kMaxKernelRecords) k.pop_front();
}

nlohmann::json ShareServer::Impl::smi() {
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

std::string ShareServer::Impl::metrics_text() {
  const nlohmann::json s = smi();
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  std::string out;
  auto family = [&](const char* name, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
    for (const auto& g : s["gpus"])
      out += fmt::format("{}{{gpu=\"{}\",UUID=\"{}\",device=\"nvidia{}\",modelName=\"{}\",Hostname=\"{}\"}} {}\n", name,
                         g["index"].get<int>(), g["uuid"].get<std::string>(), g["index"].get<int>(),
                         g["name"].get<std::string>(), host, value(g));
  };
  constexpr double MiB = 1048576.0;
  family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
         [](const nlohmann::json& g) { return static_cast<int>(g["utilization_pct"].get<double>() + 0.5); });
  family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", [&](const nlohmann::json& g) {
    return static_cast<std::uint64_t>(g["memory_used_bytes"].get<std::uint64_t>() / MiB);
  });
  family("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", [&](const nlohmann::json& g) {
    const auto total = g["memory_total_bytes"].get<std::uint64_t>(), used = g["memory_used_bytes"].get<std::uint64_t>();
    return static_cast<std::uint64_t>((total > used ? total - used : 0) / MiB);
  });
  return out;
}

// Reads what came, answers a whole head; false when the connection is done.
bool ShareServer::Impl::metrics_step(MetricsConnection& m) {
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

void ShareServer::Impl::serve_metrics() {
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

}  // namespace gpemu
