// The preprocessing service's dispatcher (prep_serve.h): starts the worker
// processes, registers jobs, reports the workers and how any of them ended.
// Requests on a client's connection: "register" {job} (answered with the
// job's id, its samples and batches, and the workers to read from),
// "status" (the workers, alive or how they ended), "bye".
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "common/interrupt.h"
#include "common/message_text.h"
#include "common/socket_wait.h"
#include "gpemu/error.h"
#include "prep/connections.h"
#include "prep/job.h"
#include "prep/wire.h"
#include "prep/worker.h"

namespace gpemu::prep {
namespace {

std::string exit_text(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = ::sigabbrev_np(WTERMSIG(status));  // "KILL"
    return name ? fmt::format("killed by SIG{}", name) : fmt::format("killed by signal {}", WTERMSIG(status));
  }
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return "ended";
}

nlohmann::json worker_json(const PrepWorkerInfo& w) {
  return {{"index", w.index}, {"pid", w.pid}, {"port", w.port}, {"cpus", w.cpus}, {"alive", w.alive}, {"exit", w.exit}};
}

}  // namespace

struct PrepServer::Impl {
  PrepServerOptions o;
  int listen_fd = -1;
  int port = 0;
  std::string cpu_note;
  mutable std::mutex mu;
  std::vector<PrepWorkerInfo> workers;  // guarded by mu
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> next_job{1};

  int ms(Duration d) const { return static_cast<int>(d / kMillisecond); }

  // Worker i's cores: C of the cores this process may use, dealt in turn
  // (wrapping round when N x C is more than there are).
  std::vector<std::vector<int>> deal_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> allowed;
    if (::sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) allowed.push_back(c);
    if (allowed.empty()) allowed.push_back(0);
    const std::size_t asked = static_cast<std::size_t>(o.workers) * static_cast<std::size_t>(o.cpus_per_worker);
    if (asked > allowed.size())
      cpu_note = fmt::format(
          "{} workers x {} CPUs = {} cores asked for; this process may use {}: the workers' cores wrap round and "
          "share cores",
          o.workers, o.cpus_per_worker, asked, allowed.size());
    std::vector<std::vector<int>> out(static_cast<std::size_t>(o.workers));
    std::size_t next = 0;
    for (auto& w : out)
      for (int k = 0; k < o.cpus_per_worker; ++k) {
        const int c = allowed[next++ % allowed.size()];
        if (std::find(w.begin(), w.end(), c) == w.end()) w.push_back(c);
      }
    return out;
  }

  void start_workers() {
    const auto cores = deal_cores();
    std::vector<int> fds;
    for (int i = 0; i < o.workers; ++i) {
      PrepWorkerInfo w;
      w.index = i;
      w.cpus = cores[static_cast<std::size_t>(i)];
      fds.push_back(wire::listen_tcp(o.host, 0, w.port));
      workers.push_back(w);
    }
    const pid_t self = ::getpid();
    for (int i = 0; i < o.workers; ++i) {
      std::fflush(nullptr);
      const pid_t pid = ::fork();
      if (pid < 0) {
        for (int& fd : fds) wire::close_fd(fd);
        terminate_workers();
        throw Error(fmt::format("gpemu prep serve: cannot start worker {}: {}", i, std::strerror(errno)));
      }
      if (pid == 0) {
        ::close(listen_fd);
        for (int k = 0; k < o.workers; ++k)
          if (k != i) ::close(fds[static_cast<std::size_t>(k)]);
        WorkerSetup s{i,    o.workers, fds[static_cast<std::size_t>(i)], workers[static_cast<std::size_t>(i)].cpus,
                      self, o};
        int status = 1;
        try {
          status = run_worker(s);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "gpemu prep serve: worker %d: %s\n", i, e.what());
        }
        std::fflush(nullptr);
        ::_exit(status);
      }
      workers[static_cast<std::size_t>(i)].pid = pid;
    }
    for (int& fd : fds) wire::close_fd(fd);
  }

  // Reaps the workers that ended, noting how.
  void reap() {
    std::lock_guard lock(mu);
    for (auto& w : workers) {
      if (!w.alive || w.pid <= 0) continue;
      int status = 0;
      if (::waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
      w.alive = false;
      w.exit = exit_text(status);
      if (!o.quiet && !stopping)
        std::fprintf(stderr, "gpemu prep serve: worker %d (pid %d) %s\n", w.index, static_cast<int>(w.pid),
                     w.exit.c_str());
    }
  }

  // SIGTERM to the workers alive, SIGKILL to those alive 5 s later; all reaped.
  void terminate_workers() {
    {
      std::lock_guard lock(mu);
      for (auto& w : workers)
        if (w.alive && w.pid > 0) ::kill(w.pid, SIGTERM);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      reap();
      std::lock_guard lock(mu);
      const bool any = std::any_of(workers.begin(), workers.end(), [](const auto& w) { return w.alive && w.pid > 0; });
      if (!any) return;
      if (std::chrono::steady_clock::now() > until) {
        for (auto& w : workers)
          if (w.alive && w.pid > 0) {
            ::kill(w.pid, SIGKILL);
            int status = 0;
            ::waitpid(w.pid, &status, 0);
            w.alive = false;
            w.exit = exit_text(status);
          }
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  nlohmann::json answer(const nlohmann::json& request) {
    const std::string op = wire::op_of(request);
    if (op == "status") {
      reap();
      nlohmann::json list = nlohmann::json::array();
      std::lock_guard lock(mu);
      for (const auto& w : workers) list.push_back(worker_json(w));
      return {{"ok", true}, {"workers", list}};
    }
    if (op != "register")
      return {{"ok", false},
              {"kind", "input"},
              {"error", fmt::format("gpemu prep serve: unknown request '{}': accepted register, status, bye",
                                    printable_excerpt(op, 40))}};
    try {
      const PrepJob job = job_from_json(request.value("job", nlohmann::json::object()));
      const pipeline::Dataset ds = open_job_dataset(job);
      reap();
      nlohmann::json list = nlohmann::json::array();
      std::lock_guard lock(mu);
      for (const auto& w : workers) {
        if (!w.alive)
          return {{"ok", false},
                  {"error", fmt::format("gpemu prep serve: worker {} (pid {}) {}; restart the service", w.index, w.pid,
                                        w.exit)}};
        list.push_back(worker_json(w));
      }
      return {{"ok", true},
              {"job", next_job++},
              {"samples", ds.size()},
              {"batches", batches_per_epoch(job, ds.size())},
              {"cpus_per_worker", o.cpus_per_worker},
              {"workers", list}};
    } catch (const InputError& e) {
      return {{"ok", false}, {"kind", "input"}, {"error", e.what()}};
    }
  }

  void serve_client(int fd) {
    for (;;) {
      wire::Frame f;
      const wire::ReadResult r = wire::read_frame(fd, f, ms(o.idle_timeout), ms(o.reply_timeout));
      if (r.got == wire::Got::Bad) {
        wire::send_error(fd, "gpemu prep serve: a bad frame: " + r.why);
        if (!o.quiet) std::fprintf(stderr, "gpemu prep serve: dropped a peer: %s\n", r.why.c_str());
      }
      if (r.got != wire::Got::Frame) return;
      if (wire::op_of(f.message) == "bye") return;
      nlohmann::json reply;
      try {
        reply = answer(f.message);
      } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
        reply = {{"ok", false},
                 {"kind", "input"},
                 {"error", one_line_message(std::string("gpemu prep serve: a malformed request: ") + e.what())}};
      }
      if (!wire::write_frame(fd, reply, {}, ms(o.reply_timeout))) return;
    }
  }
};

PrepServer::PrepServer(PrepServerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.o = std::move(options);
  if (s.o.workers < 1 || s.o.workers > 1024)
    throw InputError(fmt::format("gpemu prep serve: --workers {} is impossible: 1 to 1024", s.o.workers));
  if (s.o.cpus_per_worker < 1 || s.o.cpus_per_worker > 1024)
    throw InputError(fmt::format("gpemu prep serve: --worker-cpus {} is impossible: 1 to 1024", s.o.cpus_per_worker));
  if (s.o.port < 0 || s.o.port > 65535)
    throw InputError(fmt::format("gpemu prep serve: --port {} is impossible: 0 to 65535", s.o.port));
  if (s.o.idle_timeout <= 0 || s.o.reply_timeout <= 0) throw InputError("gpemu prep serve: timeouts must be positive");
  install_interrupt_handlers();
  s.listen_fd = wire::listen_tcp(s.o.host, s.o.port, s.port);
  try {
    s.start_workers();
  } catch (...) {
    wire::close_fd(s.listen_fd);
    throw;
  }
}

PrepServer::~PrepServer() {
  stop();
  impl_->terminate_workers();
  wire::close_fd(impl_->listen_fd);
}

int PrepServer::port() const { return impl_->port; }
const std::string& PrepServer::cpu_note() const { return impl_->cpu_note; }

std::vector<PrepWorkerInfo> PrepServer::workers() const {
  impl_->reap();
  std::lock_guard lock(impl_->mu);
  return impl_->workers;
}

void PrepServer::stop() { impl_->stopping = true; }

void PrepServer::run() {
  Impl& s = *impl_;
  {
    Connections clients;
    while (!s.stopping && !interrupt_requested()) {
      s.reap();
      clients.sweep(false);
      if (!common::wait_ready(s.listen_fd, POLLIN, common::deadline_in(100))) continue;
      const int fd = ::accept4(s.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) clients.add(fd, [&s](int c) { s.serve_client(c); });
    }
    s.stopping = true;
  }  // every client's connection ends here
  s.terminate_workers();
}

}  // namespace gpemu::prep
