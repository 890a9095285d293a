// gpemu serve's server: the socket it listens on, the clients' connections
// (one thread each: requests and replies until the client leaves) and what a
// client's exit gives back (serve_server.h).
#include "share/serve_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/interrupt.h"
#include "gpemu/error.h"
#include "gpemu/share.h"
#include "share/serve_request.h"
#include "share/serve_wire.h"

namespace gpemu {

using share_detail::errno_text;
using share_detail::fail;
using share_detail::folder_of;
using share_detail::kMaxServeLine;
using share_detail::private_folder_problem;
using share_detail::Read;
using share_detail::read_line;
using share_detail::reply_line;
using share_detail::write_all;

namespace {

constexpr int kMaxGpus = 64;
constexpr int kRefusalWriteMs = 100;  // a refusal is written on the accepting thread: it must not wait long

}  // namespace

ShareServer::Impl::Impl(ServeOptions options) : o(std::move(options)) {
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

// Closes what the server opened and removes its socket (only if it is
// still the one this server made).
void ShareServer::Impl::close_all() {
  for (int* f : {&listen_fd, &metrics_fd, &wake[0], &wake[1]}) {
    if (*f >= 0) ::close(*f);
    *f = -1;
  }
  struct stat st {};
  if (socket_inode != 0 && ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == socket_inode)
    ::unlink(path.c_str());
  socket_inode = 0;
}

ShareServer::Impl::~Impl() {
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

void ShareServer::Impl::bind_socket() {
  const std::string p = path.string();
  sockaddr_un addr{};
  if (p.size() >= sizeof addr.sun_path)
    throw InputError(fmt::format("serve: socket path {} is {} bytes; a Unix socket's path has at most {}", p, p.size(),
                                 sizeof addr.sun_path - 1));
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

// Requests and replies until the client leaves, goes silent or the server stops.
void ShareServer::Impl::converse(const std::shared_ptr<Client>& c) {
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
void ShareServer::Impl::release(Client& c) {
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

void ShareServer::Impl::serve(const std::shared_ptr<Client>& c) {
  try {
    converse(c);
  } catch (...) {  // NOLINT: whatever went wrong ends this client only; its resources go back below
  }
  release(*c);  // the client is gone (or dropped)
  ::shutdown(c->fd, SHUT_RDWR);
  c->done = true;
}

void ShareServer::Impl::reap() {
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

void ShareServer::Impl::accept_one() {
  const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
    write_all(fd,
              reply_line(fail("refused", fmt::format("refused: the peer's user ({}) is not the server's ({})", cred.uid,
                                                     ::geteuid()))),
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

void ShareServer::Impl::run() {
  if (metrics_fd >= 0 && !metrics_thread.joinable()) metrics_thread = std::thread([this] { serve_metrics(); });
  while (!stopping && !interrupt_requested()) {
    pollfd p[2] = {{listen_fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
    const int r = ::poll(p, 2, 200);
    reap();
    if (r > 0 && (p[0].revents & POLLIN)) accept_one();
  }
  stopping = true;
}

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

}  // namespace gpemu
