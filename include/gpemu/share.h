// Several training jobs on one emulated GPU: `gpemu share`.
//
//   ShareSpec (the GPU, its policy, the jobs and when they arrive)
//     --run_shared(Clock&, CostModel&)-->  ShareResult  --share_json / the CLI-->  people
//
// Each job is the one engine's Job (job.h) on its own view of one SharedGpu
// (device.h, "sharing"): its own host thread, streams, CUDA context and
// caching allocator, all on the shared GPU's timeline, so the policy, the
// shared memory and the shared PCIe link decide how the jobs slow each other.
// A job arrives (its process starts) at its arrival time; when it ends, having
// finished or failed (an OutOfMemoryError ends that job only), its memory
// goes back to the GPU, as a process's does at its exit. docs/sharing.md.
//
// Thread safety: free functions on values; run_shared starts the jobs' host
// threads under the clock and returns when all have ended.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/job.h"
#include "gpemu/report.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu {

struct SharedJobSpec {
  std::string name;
  // One GPU's job. run_shared sets its GPU, its place on the shared GPU and
  // keep_partial; the rest (model, batch, data, schedule) is the job's.
  JobSpec job;
  Time arrival = 0;  // when the job's process starts (with `after`: this long after that job's end)
  // A job of the spec (an earlier one) after whose end this one starts: a
  // queue of jobs run one after another (a scheduler's). Empty: none.
  std::string after;
  int priority = 0;  // SharePolicy::Priority: larger first
  std::string mig;   // SharePolicy::Mig: the profile of its slice
  // Its cost model (each program has its own); null: the one run_shared is
  // given.
  std::shared_ptr<const CostModel> costs;
  // A model job's PyTorch ("1" or "2": its TorchPreset) and host profile (a
  // name or a `gpemu bench host` file; empty: the preset's), as a jobs file
  // names them; give_cost_models applies them to job.compute.model. Empty
  // torch: the ModelSpec as it is (the C++ API's jobs).
  std::string torch;
  std::string host;
};

// A model's training job (in-memory batches, always ready; or, with
// with_dataset, batches of a dataset described by its sizes from a modelled
// loader), or GPEmu's shape
// of a job: a fixed GPU time per step and nothing else (no copy, no memory).
SharedJobSpec model_job(std::string name, std::string model, int batch_size, std::int64_t iterations, Time arrival = 0);
SharedJobSpec fixed_step_job(std::string name, double step_s, int batch_size, std::int64_t iterations,
                             Time arrival = 0);
// The job reads `dataset` (a pipeline::virtual_dataset spec) through a
// modelled loader of `workers` workers for `epochs` epochs (its iterations
// then cap the steps, 0: none). InputError for an unknown dataset.
void with_dataset(SharedJobSpec& job, std::string_view dataset, int workers, std::uint64_t epochs);

inline constexpr std::size_t kMaxSharedJobs = 1024;
// The steps of all jobs of one run together. With ShareSpec::per_step each
// step keeps its records (about 300 bytes) until the run ends, so 10^6 steps
// are about 300 MB; without, a run's memory is flat in steps.
inline constexpr std::int64_t kMaxSharedSteps = 1'000'000;
// Utilisation windows a result holds at most: a longer run widens its
// window (ShareResult::utilization_window says to what).
inline constexpr std::int64_t kMaxUtilizationWindows = 100'000;

// The steps a job will run at most: its iterations, or with a dataset its
// epochs of batches (capped by its iterations).
std::int64_t planned_share_steps(const SharedJobSpec& job);
// The window a run of `makespan` reports its utilisation in: `asked`, or a
// whole multiple of it when `asked` would give more than
// kMaxUtilizationWindows windows.
Duration utilization_window_for(Time makespan, Duration asked);

struct ShareSpec {
  const GpuSpec* gpu = nullptr;  // required
  ShareOptions options;
  std::vector<SharedJobSpec> jobs;  // 1 to kMaxSharedJobs, distinct names
  bool trace = false;               // keep the timeline's operations for a trace
  Duration utilization_window = kSecond;
  // CPU cores of the machine the jobs' modelled data loaders share
  // (pipeline::CpuPool); 0: this machine's.
  int cpu_cores = 0;
  // Each job's step ends and kernel spans (SharedJobResult::step_ends,
  // step_samples, kernels: share_json's steps, share_report's charts), which
  // grow with the steps; false: the totals only, in memory flat in steps.
  bool per_step = true;
};

// Gives every job without a cost model the layered cost model of its model
// spec (job_cost_model: one per precision, optimizer, zero_grad and sequence
// length among the jobs), with measured profiles from `profiles` where they apply.
// Applies each job's torch and host (InputError naming the job) and gives it
// its program's cost model.
void give_cost_models(ShareSpec& spec, const std::optional<std::filesystem::path>& profiles = std::nullopt);

// Throws InputError naming the first bad field (and its job), its value and
// what is accepted; a Mig spec whose slices do not fit on the card together
// names the job whose slice does not; the jobs' steps together past
// kMaxSharedSteps are refused too.
void validate(const ShareSpec& spec);

struct SharedJobResult {
  std::string name;
  std::string model;  // "" for a fixed step time
  int batch_size = 0;
  int priority = 0;
  std::string mig;
  Time arrival = 0;
  Time end = 0;  // its last GPU work ended (its arrival when it never ran)
  std::int64_t iterations = 0;
  std::int64_t samples = 0;
  double samples_per_s = 0;  // samples / (end - arrival)
  double jct_s = 0;          // end - arrival
  // Its kernels' time on the GPU alone over (end - arrival), in percent:
  // the share of the GPU the policy gave it.
  double gpu_share_pct = 0;
  std::uint64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0;
  // What ended it early (an out-of-memory message, a slice that did not
  // fit); empty when it ran its schedule.
  std::string error;
  // Per train step: when its GPU work ended, and its samples (a throughput
  // series: samples / time since the previous step's end).
  std::vector<Time> step_ends;
  std::vector<std::int64_t> step_samples;
  std::vector<KernelSpan> kernels;  // [start, end) of its kernels on the shared GPU
};

struct ShareResult {
  std::string gpu;
  SharePolicy policy = SharePolicy::Fifo;
  ShareOptions options;
  std::string clock;
  std::vector<SharedJobResult> jobs;  // in the spec's order
  Time makespan = 0;                  // the last job's end (from time 0)
  double mean_jct_s = 0;              // over the jobs that finished (0 when none did: see jobs_finished)
  int jobs_finished = 0;              // jobs that ran all their iterations without an error
  // The GPU's utilisation as nvidia-smi reports it: the share of each window
  // during which some kernel ran, in percent. The window is the spec's, or
  // a multiple of it that gives at most kMaxUtilizationWindows windows.
  Duration utilization_window = kSecond;
  std::vector<double> utilization_pct;
  double mean_utilization_pct = 0;           // over [0, makespan)
  std::uint64_t peak_memory_used_bytes = 0;  // contexts and segments of all jobs at once (not Mig)
  std::uint64_t memory_capacity_bytes = 0;
  // With ShareSpec::trace: the shared timeline's operations and host spans.
  std::vector<TraceRecord> trace;
  std::vector<HostSpan> host_spans;
  std::vector<TraceDeviceName> trace_devices;
};

// Runs the jobs on one emulated GPU of spec.gpu under its policy. A job's
// failure is in its result; InputError for an invalid spec.
ShareResult run_shared(Clock& clock, const CostModel& costs, const ShareSpec& spec);

// The result as JSON (every figure above; utilization as a list of percent).
// with_steps: each job's steps too ("steps": {"end_s": [...], "samples": [...]}).
nlohmann::json share_json(const ShareResult& result, bool with_steps = false);
// The result as an HTML report's data (report.h): the summary, each job's
// time split into its kernels' time alone and the rest, the GPU's
// utilisation over time (all jobs, then each job's), each job's step times.
RunReport share_report(const ShareResult& result);
// The mean JCT as the summaries print it: "12.34 s (3 of 4 jobs finished)",
// or "none: no job finished" (a run interrupted before any job ended).
std::string mean_jct_text(const ShareResult& result);

// A jobs file (YAML or JSON, docs/sharing.md):
//   gpu: P100                  # optional: the card, when --gpu is not given
//   jobs:
//     - name: a                # default: job1, job2, ...
//       model: resnet50        # a model, or:
//       compute_s: 0.5753      #   a fixed GPU time per step (no model)
//       batch_size: 128
//       iterations: 200        # train steps (default 100)
//       arrival_s: 30          # default 0
//       priority: 1            # policy priority
//       mig: 3g.20gb           # policy mig
//       precision: amp         # as --precision; optimizer: adam, as --optimizer
//       dataset: imagenette    # batches from a modelled loader over a virtual dataset ...
//       epochs: 5              #   ... for this many epochs (instead of iterations)
//       workers: 3             #   its loader's workers (default 4), prefetch_factor (2),
//       decode_us: 800         #   its CPU costs per image (as gpemu train --decode-us / --decode-ns-per-byte)
//       after: a               # starts arrival_s after job a ends (a queue)
// Throws InputError naming the file, the job and the key for a bad file,
// an unknown key, a wrong type or an out-of-range value.
struct JobsFile {
  std::string gpu;  // "" when the file names none
  int cores = 0;    // "cores": the machine's cores the loaders share; 0 when the file names none
  std::vector<SharedJobSpec> jobs;
};
JobsFile load_jobs_file(const std::filesystem::path& path);
JobsFile parse_jobs(std::string_view text, std::string_view source);

}  // namespace gpemu

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
// spec.options are replaced by them),
// one connection each, started at their arrival times (wall time from the
// call). A model job holds its weights and its step's peak memory for its
// run and sends one "batch" request per step (forward and backward from
// its cost model); a fixed-step job sends its step time. The result's times
// are the server's emulated times; GPU share, utilisation and memory peaks
// are the server's to report (`gpemu smi`) and are left at 0 here.
ShareResult run_shared_remote(const std::filesystem::path& socket, const CostModel& costs, ShareSpec spec);

}  // namespace gpemu
