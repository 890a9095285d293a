// The emulated GPUs of one PyTorch process under `gpemu torch` (docs/torch.md).
//
// This half of the torch backend knows nothing of torch: it owns the clock
// and a session of the process's emulated GPUs (session.h: exclusive, whole
// cards, the session's timeline), the process being the session's client
// (Session::attach: its devices), maps PyTorch's stream ids
// to gpemu streams, issues each operator's kernel with the analytical model's
// per-op cost and paces the host by the calibrated launch cost, exactly as
// `gpemu predict`'s pipeline does (cost_model.h). backend.cpp, the other
// half, is the c10/ATen side that calls it.
//
// Attached to `gpemu serve` (Settings::serve), the process owns no emulated
// GPU of its own (its session has no client): each of its devices is a
// client of one of the server's GPUs (of the server's session), and its
// kernels, copies, streams, events and memory are the server's, so several
// scripts' work meets on one emulated GPU under the server's policy. The
// host is still paced here, by the same launch costs.
//
// The members are defined by concept: runtime.cpp (the devices, their
// streams and the ops issued on them), device_memory.cpp, events.cpp,
// collectives.cpp, served_devices.cpp (the connections to gpemu serve),
// run_record.cpp (what the run counts, as a record) and run_outputs.cpp (the
// summary, trace and report at exit); settings.h is what the environment says.
//
// Thread safety: every member may be called from any thread (PyTorch's
// autograd engine issues backward kernels from its own device threads).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "gpemu/calibration.h"
#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/device.h"
#include "gpemu/host.h"
#include "gpemu/interconnect.h"
#include "gpemu/session.h"
#include "gpemu/share.h"
#include "gpemu/timeline.h"
#include "share/serve.h"
#include "torch/settings.h"
#include "torch/summary.h"

namespace gpemu::torch_backend {

// What marks the start of a step of the script (the summary's per-step
// figures): the first that occurred wins, in this order.
enum class StepSource { Marker, Optimizer, Backward };
inline constexpr int kStepSources = 3;
std::string_view to_string(StepSource s);

// What an op's launch adds beyond the CPU-only dispatch this host runs for
// real: a CUDA launch's host cost, the 5 us `gpemu bench host` states
// (--cuda-launch-us; docs/decisions.md). Paid per kernel under the real clock.
inline constexpr double kCudaLaunchUs = 5.0;

// The trace's detail of one op (only built when a trace is written).
struct OpDetail {
  std::string shapes;  // the tensor arguments' and outputs' shapes, "[64,650] [650,2600] -> [64,2600]"
};

// Counters of one process's run, for the summary.
struct RunCounters {
  std::uint64_t kernels = 0;          // ops charged as GPU kernels
  std::uint64_t views = 0;            // view ops (host time only)
  std::uint64_t h2d = 0, d2h = 0;     // copies
  std::uint64_t blocking_syncs = 0;   // item(), synchronize, pageable copies, ...
  std::uint64_t collectives = 0;      // the emulated NCCL process group's
  std::uint64_t optimizer_steps = 0;  // optimizer.step() calls: the run's iterations
  // GPU time of the kernels charged in each phase (forward, backward,
  // optimizer), seconds, over every device.
  double forward_gpu_s = 0, backward_gpu_s = 0, optimizer_gpu_s = 0;
};

class Runtime {
 public:
  explicit Runtime(Settings settings);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The process's runtime, made from Settings::from_env() on first use.
  static Runtime& instance();

  const Settings& settings() const { return settings_; }
  const GpuSpec& gpu() const { return *gpu_; }
  Clock& clock() { return *clock_; }
  Timeline& timeline() { return *timeline_; }
  int device_count() const { return settings_.gpus; }
  bool remote() const { return !remote_.empty(); }
  // InputError naming the index and the count when out of range.
  void check_device(int index) const;

  // Streams by PyTorch's stream id on a device: 0 is the default stream.
  // InputError for an id the device does not have.
  void check_stream(int device, std::int64_t id);
  std::int64_t create_stream(int device);
  // True when all work issued to the stream has completed.
  bool stream_query(int device, std::int64_t id);

  // The device's memory (its caching allocator's, here or the server's):
  // OutOfMemoryError with PyTorch's message when it does not fit.
  CachingAllocator::Ptr allocate(int device, std::uint64_t bytes, std::int64_t stream);
  void free(int device, CachingAllocator::Ptr p);
  std::uint64_t block_size(int device, CachingAllocator::Ptr p);
  AllocatorStats memory_stats(int device);
  void empty_cache(int device);
  // torch.cuda.set_per_process_memory_fraction (local devices only: InputError attached).
  void set_memory_fraction(int device, double fraction);
  void reset_peak_stats(int device);

  // CUDA events by id (cudaEvent_t): created unrecorded; an event never
  // recorded is complete and waiting for it is a no-op, as in CUDA.
  std::int64_t event_create();
  void event_destroy(std::int64_t id);  // ignores an unknown id
  void event_record(std::int64_t id, int device, std::int64_t stream);
  void event_wait(std::int64_t id, int device, std::int64_t stream);
  bool event_query(std::int64_t id);
  void event_synchronize(std::int64_t id);
  // InputError unless both were recorded (on the same GPU, when attached).
  double event_elapsed_ms(std::int64_t start, std::int64_t end);

  // Issues one operator on (device, stream): the host spends the op's launch
  // cost first (the calibrated per-op issue time, so launch-bound programs
  // are not faster than the real GPU), then the kernel, if it is not a view,
  // is enqueued and the call returns (CUDA's asynchronous launch).
  // tf32_conv / tf32_matmul: torch.backends' allow_tf32 switches now.
  // cpp_loop: the op is one of many a single call issues from C++ (DDP's
  // bucket and buffer copies, DataParallel's scatter): its host cost is the
  // C++ launch path's (the calibrated backward cost), not the forward's,
  // which folds in the Python of a module's forward.
  // started: when the op's call reached the backend (the clock's time; -1:
  // now). Under the real clock the script's Python and torch's dispatch ran
  // for real before it, so the host pays only what a CUDA launch adds
  // (kCudaLaunchUs per kernel, from `started`); under the virtual clock it
  // pays the host profile's per-op cost (host.h; cpp_loop: the C++ rate).
  // detail: the op's shapes for the trace (null: none).
  void issue(int device, std::int64_t stream, const OpProgram::Op& op, std::string_view name, bool tf32_conv,
             bool tf32_matmul, bool cpp_loop = false, Time started = -1, const OpDetail* detail = nullptr);
  // Whether a trace (or report) is written: the caller builds OpDetail only then.
  bool tracing() const;
  // The script slept (time.sleep under the virtual clock) or waited for
  // something real (its DataLoader): the host's emulated time moves on by
  // `seconds`. InputError for a negative or non-finite time.
  void advance_host(double seconds);
  // A step of the script began (StepSource): its time is when the host
  // reached it or when the GPU work issued before it ends on (device,
  // stream), whichever is later.
  void note_step(StepSource source, int device, std::int64_t stream);
  const HostProfile& host_profile() const { return host_; }
  // A host-device copy of `bytes` on (device, stream); a pageable one (or
  // any device-to-host copy into pageable memory) returns only when done.
  void copy(int device, std::int64_t stream, bool to_device, std::uint64_t bytes, bool pinned);
  // Blocks the host until the stream's work is done (item(), .cpu(), ...).
  void synchronize(int device, std::int64_t stream);
  void synchronize_device(int device);

  // A collective of the emulated NCCL process group (gpemu_torch/_dist.py)
  // on (device, stream): `kind` is all_reduce, broadcast, all_gather or
  // reduce_scatter of `bytes` (all_gather: the output; the others: the
  // input) among `world` ranks, each rank one GPU of this run's GPU type.
  // It starts after the stream's earlier work and not before
  // `start_shared_ns` (the latest rank's ready time, shared_ns); its
  // duration is what it takes alone on idle links: when the ranks span
  // nodes (Settings::nodes) and `world` is all of them, over the cluster of
  // those nodes and the network (as `gpemu train --nodes`); otherwise the
  // ring over one node's topology (interconnect.h, Communicator). Returns at once.
  void collective(int device, std::int64_t stream, std::string_view kind, std::uint64_t bytes, int world,
                  std::int64_t start_shared_ns);
  // The duration collective() charges (cached per kind, bytes and world).
  Duration collective_duration(std::string_view kind, std::uint64_t bytes, int world);
  // When the stream's issued work will be done (provisional), as a time every
  // rank process reads alike: CLOCK_MONOTONIC nanoseconds under the real clock
  // (processes started apart share it), the emulated time under the virtual
  // clock (every process starts its own at zero).
  std::int64_t stream_ready_shared_ns(int device, std::int64_t stream);

  // The zoo model the script trains from now on (a torchvision builder of
  // that name was called): its learned correction applies, as with
  // Settings::model; a name not in the zoo, none. Ignored when Settings::model
  // was given (it holds for the whole run). Returns whether the model is the
  // zoo's.
  bool set_model(const std::string& model);

  RunCounters counters() const;
  // Ops that had no shape rule of their own and ran through the generic
  // meta path, and ops refused; for the summary.
  void note_generic(std::string_view op);
  // An optimizer.step() began (torch.optim's "Optimizer.step#..." scope).
  void note_optimizer_step(int device, std::int64_t stream);
  // A span of the script's host for the trace (from start to end, in the
  // clock's seconds): the DataLoader's waits for a batch. Dropped when no
  // trace or report is written, and when empty.
  void host_span(std::string name, double start_s, double end_s);

  // The summary of this process's run so far (JSON text): the keys `gpemu
  // train --json` has where they mean the same (docs/torch.md, "Outputs").
  std::string summary_json();
  // The first process: writes the summary, trace and report Settings asks
  // for, with every rank's part merged in. Another process: leaves its part
  // (when it used an emulated GPU). Idempotent. Tries every output, then
  // throws gpemu::Error naming each one that could not be written (one line
  // each: "--trace: cannot write the trace file '...': No space left...").
  void finish();

 private:
  const GpuPeaks& peaks(bool tf32_conv, bool tf32_matmul) const;
  void pace_host(double seconds);
  Device& device(int index);
  Stream& stream(int device, std::int64_t id);
  struct Remote;
  // Attached: the device's connection state (InputError for a bad index).
  Remote& remote_of(int device);
  // Attached: device's client of the server, connected on first use (the
  // caller holds r.mutex).
  ServeClient& attached(Remote& r, int device);
  // Attached: one round trip to device's client (serialised per client).
  nlohmann::json call(int device, nlohmann::json message);
  // Attached: the reply, or nullopt when the process has not used the GPU yet.
  std::optional<nlohmann::json> call_if_attached(int device, nlohmann::json message);
  // Attached: a request whose reply is checked before the next one's (ServeClient::post).
  void post(int device, nlohmann::json message);
  Event& local_event(std::int64_t id);
  // Attached: the GPU event `id` was last recorded on (-1: never); with
  // record_on, it is recorded there from now on. InputError for an unknown id.
  int remote_event_device(std::int64_t id, std::optional<int> record_on = std::nullopt);
  // This process's run so far, as a typed record (torch/summary.h).
  TorchRunRecord record();
  nlohmann::json part_object();
  // The source of the run's steps and their start times (seconds).
  std::pair<StepSource, std::vector<double>> steps() const;
  // The timeline's records, each drawn once (on its stream's track only when
  // it has one), and each one's trace "args" (a kernel's detail; "" none).
  std::pair<std::vector<TraceRecord>, std::vector<std::string>> trace_records() const;
  // The table `gpemu torch` prints on stderr at the end of the run.
  void print_summary(const TorchRunRecord& summary) const;

  Settings settings_;
  const GpuSpec* gpu_ = nullptr;
  std::unique_ptr<Clock> clock_;
  std::unique_ptr<CostModel> costs_;  // the session's (it runs no job of its own)
  // The process's GPUs: an exclusive session of Settings::gpu (of gpus, one
  // node), whose timeline is the process's; the process is its one client
  // (GPUs 0 to gpus-1), not attached when the GPUs are a server's.
  std::unique_ptr<Session> session_;
  Timeline* timeline_ = nullptr;  // session_'s
  ClientHandle process_;
  struct Remote {
    std::unique_ptr<ServeClient> client;
    std::mutex mutex;
    std::atomic<std::int64_t> streams{1};                        // the server's stream ids 0 to streams-1
    std::map<CachingAllocator::Ptr, std::uint64_t> block_sizes;  // live blocks
    std::uint64_t kernels = 0, h2d_bytes = 0, d2h_bytes = 0;
    Duration kernel_time = 0;  // the kernels' time alone
  };
  std::vector<std::unique_ptr<Remote>> remote_;  // per device when attached
  FamilyFactors factors_;                        // the GPU family's, with the host profile's launch costs
  HostProfile host_;
  NetworkSpec network_;  // Settings::nodes > 1
  std::string model_;    // whose correction_ applies (mutex_)
  ModelCorrection correction_;
  GpuPeaks peaks_[2][2];  // [tf32_conv][tf32_matmul]

  mutable std::mutex mutex_;
  std::vector<std::vector<Stream*>> streams_;  // [device][id]
  Time host_ready_ = 0;                        // when the host finishes its last launch
  RunCounters counters_;
  std::map<std::string, std::uint64_t, std::less<>> generic_ops_;
  std::map<std::tuple<std::string, std::uint64_t, int>, Duration, std::less<>> collective_durations_;
  std::vector<Duration> collective_busy_;  // per device
  bool finished_ = false;
  std::array<std::vector<double>, kStepSources> step_starts_;  // by StepSource, seconds
  // Per (device, stream), the trace detail of each kernel issued, in order:
  // an index into shapes_ (interned), its section, the op's bytes.
  struct KernelDetail {
    std::uint32_t shapes;
    std::uint8_t section;
    double bytes;
  };
  std::map<std::pair<int, std::int64_t>, std::vector<KernelDetail>> kernel_details_;
  std::vector<std::string> shapes_;
  std::map<std::string, std::uint32_t, std::less<>> shape_ids_;
  // Local devices this process has allocated on (claim_device): the first
  // allocation looks for another process of the run on the same device.
  std::array<std::atomic<bool>, kMaxTorchGpus> claimed_{};
  // set_per_process_memory_fraction's bound on what each device's allocator reserves.
  // (Set to CachingAllocator::kUnlimited by the constructor.)
  std::array<std::atomic<std::uint64_t>, kMaxTorchGpus> reserve_limits_{};
  void claim_device(int index);

  // Events: here, the Event; attached, the device it was last recorded on (-1: never).
  std::mutex events_mutex_;
  std::int64_t next_event_ = 1;
  std::map<std::int64_t, std::unique_ptr<Event>> local_events_;
  std::map<std::int64_t, int> remote_events_;
};

}  // namespace gpemu::torch_backend
