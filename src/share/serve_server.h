// gpemu serve's server (ShareServer::Impl, serve.h): its state, and its
// members by concept: serve_server.cpp (the socket, the clients'
// connections and their threads), serve_ops.cpp (a client's requests, one
// by one), serve_job.cpp (a client's job, run here) and serve_monitor.cpp
// (what gpemu smi and the metrics endpoint see).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/session.h"
#include "gpemu/timeline.h"
#include "share/serve.h"

namespace gpemu {

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

  explicit Impl(ServeOptions options);
  ~Impl();

  Timeline& timeline() { return session->timeline(); }
  SharedGpu& gpu(int g) { return session->gpu(g); }

  // serve_server.cpp
  void close_all();
  void bind_socket();
  void converse(const std::shared_ptr<Client>& c);
  void release(Client& c);
  void serve(const std::shared_ptr<Client>& c);
  void reap();
  void accept_one();
  void run();

  // serve_ops.cpp
  void sleep_until(const Client& c, Time t);
  nlohmann::json handle(Client& c, const nlohmann::json& m);

  // serve_job.cpp
  class KernelsSeen;
  nlohmann::json run_job(Client& c, const nlohmann::json& m);
  static void add_steps(nlohmann::json& reply, const Client& c, std::size_t from);
  nlohmann::json job_steps(const Client& c, const nlohmann::json& m);

  // serve_monitor.cpp
  void bind_metrics();
  void record_kernel(int gpu, const Completion& c, Duration d, std::uint64_t client);
  nlohmann::json smi();
  std::string metrics_text();
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

  bool metrics_step(MetricsConnection& m);
  void serve_metrics();
};

}  // namespace gpemu
