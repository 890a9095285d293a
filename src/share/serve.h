// `gpemu serve` and its clients: a node's emulated GPUs shared by real
// processes over a Unix socket (share.h has the in-process `gpemu share`).
// Internal: the wire protocol is JSON lines, and the client and server speak
// it; the Python module, the torch backend and the CLI include this header.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/share.h"
#include "gpemu/time.h"

// ==== serve ====
//
// Real processes sharing emulated GPUs: `gpemu serve` owns a node's emulated
// GPUs (one SharedGpu each, on one timeline under the real clock) and
// processes attach over a Unix socket. Each client is a process's view of one
// GPU (its own Device: context, caching allocator, stream), so several
// processes' kernels and memory meet on the same emulated device under the
// server's policy, as `gpemu share` runs them inside one process.
//
// Wire protocol (docs/sharing.md has it in full): one JSON object per line
// each way, a reply for every request, in order. The first request is
// {"op": "hello", "name", "gpu", "priority", "mig"}; then "malloc" {bytes},
// "free" {ptr}, "kernel" {ns, sm, bw} (returns at once), "copy" {dir, bytes,
// pinned}, "sync", "batch" {ns, sm, bw} (a kernel and a sync: one step of a
// GPEmu-style job), "memory", "smi", "bye". A reply is {"ok": true, ...} or
// {"ok": false, "error": "...", "oom": bool}. The GPU work of a process with
// several streams and events (a PyTorch script under `gpemu torch --connect`)
// adds "stream" (creates one), a "stream" field on kernel, copy, sync, batch
// and malloc, "record" / "wait" / "query" / "event_sync" / "elapsed" /
// "event_free" of the client's own event ids, "empty_cache" and "reset_peak".
//
// Isolation: the socket's folder and the socket are the starting user's
// alone (0700 / 0600), and every peer's credentials (SO_PEERCRED) must be
// that user's, else it is refused. A bad request is an error to that client
// only. A client that disconnects, or sends nothing for the idle timeout, is
// dropped: its memory, context and slot go back to the GPU; the others go on.
//
// Thread safety: the server runs one thread per client; the client object is
// used by one thread at a time.

namespace gpemu {

struct ServeOptions {
  const GpuSpec* gpu = nullptr;  // required
  int gpus = 1;                  // emulated GPUs the server owns (1 to 64)
  ShareOptions share;            // the policy of every GPU
  std::filesystem::path socket;  // empty: default_socket_path()
  Duration idle_timeout = 600 * kSecond;
  int max_clients = 256;
  std::string metrics;  // "PORT" or "HOST:PORT" for Prometheus text (DCGM names); empty: none
};

// $XDG_RUNTIME_DIR/gpemu/serve.sock, else /tmp/gpemu-<uid>/serve.sock, unless
// that folder exists and is not this user's private one (another user can
// make the guessable name first): then $HOME/.gpemu/serve.sock (InputError
// without HOME). Server and clients pick the same; both check the folder.
std::filesystem::path default_socket_path();
// The same rule from given values (tests): XDG_RUNTIME_DIR, the shared temp
// folder and HOME; null or "" for an unset variable.
std::filesystem::path default_socket_path(const char* xdg_runtime_dir, const std::filesystem::path& tmp,
                                          const char* home);

class ShareServer {
 public:
  // Binds the socket (InputError when a live server holds it, or the path is
  // something else than a socket gpemu may replace) and the metrics port.
  explicit ShareServer(ServeOptions options);
  ~ShareServer();  // stops, drops the clients, removes the socket it made
  ShareServer(const ShareServer&) = delete;
  ShareServer& operator=(const ShareServer&) = delete;

  const std::filesystem::path& socket_path() const;
  // The metrics port actually bound (0 without --metrics): "HOST:0" binds any free port.
  int metrics_port() const;
  // Where the metrics endpoint listens, "IP:PORT" (empty without --metrics),
  // and whether that is loopback (127.0.0.0/8): reachable from this machine
  // only. 0.0.0.0 or a network address is reachable from other machines.
  const std::string& metrics_address() const;
  bool metrics_on_loopback() const;
  // Accepts clients until stop() is called or SIGINT/SIGTERM is received.
  void run();
  void stop();
  // What `gpemu smi` prints, as JSON (see the protocol's "smi").
  nlohmann::json smi();
  // The same as Prometheus text with DCGM exporter's field names.
  std::string metrics_text();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The protocol's version, in hello's reply ("protocol"; absent: 1): 2 added
// "job" and "job_steps", a client's job run by the server.
inline constexpr int kServeProtocol = 2;

// How long a client waits for the server to accept it and to answer what
// it answers at once (hello, smi, bye).
inline constexpr Duration kServeReplyTimeout = 30 * kSecond;

struct ClientHello {
  std::string name = "client";
  int gpu = 0;
  int priority = 0;
  std::string mig;
  Duration reply_timeout = kServeReplyTimeout;
};

// A process's connection to `gpemu serve`.
class ServeClient {
 public:
  // Connects and says hello. Error when nothing serves `socket`, the server
  // refuses, or it runs as another user than this one or root (SO_PEERCRED);
  // InputError when the socket's folder is not this user's alone (the
  // server's own check), or for a bad hello (unknown GPU, MIG slice that
  // does not fit).
  ServeClient(const std::filesystem::path& socket, const ClientHello& hello);
  // A connection that attaches to no GPU (a monitor: "smi" only).
  //
  // Deadlines: the connection, hello, smi and bye fail with Error ("did not
  // answer in N s") after reply_timeout; replies that wait for emulated work
  // (sync, a launch the GPU has not reached) have none. Every wait ends at
  // once with gpemu::Interrupted when SIGINT or SIGTERM came
  // (common/interrupt.h's handlers).
  explicit ServeClient(const std::filesystem::path& socket, Duration reply_timeout = kServeReplyTimeout);
  ~ServeClient();
  ServeClient(const ServeClient&) = delete;
  ServeClient& operator=(const ServeClient&) = delete;

  // One round trip. Throws Error when the connection fails; returns the
  // server's reply, {"ok": false, ...} included.
  nlohmann::json request(const nlohmann::json& message);
  // One round trip with the reply checked: OutOfMemoryError for an OOM,
  // InputError for a refused field, Error for any other refusal.
  nlohmann::json call(const nlohmann::json& message) { return checked(message); }
  // Sends a request whose reply nobody waits for (a kernel launch, an event
  // record: CUDA returns at once): its reply is read, and checked, before
  // the next request's, so a refusal surfaces there as call() would throw
  // it. Saves a round trip per op.
  void post(const nlohmann::json& message);
  // The requests with their replies checked: OutOfMemoryError for an OOM,
  // Error for any other refusal.
  std::uint64_t malloc(std::uint64_t bytes);
  void free(std::uint64_t ptr);
  void kernel(Duration ns, KernelDemand demand = {});
  // The emulated time the default stream's work ended; Error for a reply
  // without one or with one before the last (a server that is not gpemu's).
  Time sync();
  Time batch(Duration ns, KernelDemand demand = {});  // a kernel and a sync
  const nlohmann::json& hello_reply() const { return hello_; }

 private:
  nlohmann::json checked(const nlohmann::json& message);
  void drain();  // reads the posted requests' replies
  Time default_stream_end(const nlohmann::json& reply);
  void send_line(const nlohmann::json& message);
  std::string reply(bool bounded);  // the next reply line; bounded: within the reply timeout
  int timeout_ms() const;
  std::string timeout_text() const;
  std::filesystem::path socket_;
  Duration reply_timeout_;
  int fd_ = -1;
  Time last_end_ = 0;  // the default stream's, as sync() and batch() saw it
  std::string buffer_;
  int posted_ = 0;
  nlohmann::json hello_;
};

// The GPUs a running server describes (its "smi" reply's "gpus": index, id,
// name, policy, memory, processes), at least one. Error when nothing serves
// `socket` or the reply has none.
nlohmann::json served_gpus(const std::filesystem::path& socket, Duration reply_timeout = kServeReplyTimeout);

// The "memory" reply's allocator figures (every AllocatorStats field, under
// its own name), written by the server and read by clients.
nlohmann::json allocator_stats_json(const AllocatorStats& stats);
AllocatorStats allocator_stats_from_json(const nlohmann::json& reply);  // absent fields: 0

// `gpemu share --connect`: the spec's jobs as clients of a running server
// (on its GPU 0, whose card and policy are the server's: spec.gpu and
// spec.options are replaced by them), one connection each, started at their
// arrival times (wall time from the call). Each sends its job (op "job": its
// jobs-file entry, so a job must be one a jobs file can say, InputError
// otherwise) and the server runs it as `gpemu share` does in one process: the
// engine's Job on the client's device of the shared GPU, its memory plan
// through that device's caching allocator, its copies, kernels and loss.item()
// under the server's policy, its cost model the server's (from `profiles`
// when given, as on this side: torch, host and models are checked here
// before connecting). The result's times are the server's, from each job's
// start (its arrival); the GPU's utilisation and memory in use are the
// server's to report (`gpemu smi`) and left at 0. Step ends are kept with
// spec.per_step, as run_shared keeps them.
ShareResult run_shared_remote(const std::filesystem::path& socket, ShareSpec spec,
                              const std::optional<std::filesystem::path>& profiles = std::nullopt);

}  // namespace gpemu
