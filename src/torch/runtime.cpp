#include "torch/runtime.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/checked.h"
#include "common/message_text.h"
#include "device/trace_args.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/report.h"
#include "gpemu/zoo.h"
#include "interconnect/cluster_collectives.h"
#include "report/configuration_rows.h"
#include "share/serve.h"
#include "torch/summary.h"

namespace gpemu::torch_backend {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// A whole-number variable in [lo, hi]; nullopt when unset. InputError naming it otherwise.
std::optional<int> env_whole(const char* name, int lo, int hi) {
  const auto v = env(name);
  if (!v) return std::nullopt;
  int n = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size() || n < lo || n > hi)
    throw InputError(fmt::format("{} '{}': expected a whole number from {} to {}", name, *v, lo, hi));
  return n;
}

std::string rank_label() {
  if (auto r = env("RANK")) return "rank " + *r;
  return fmt::format("pid {}", ::getpid());
}

// The collectives the process group charges, by name; static, as trace tags
// keep the name beyond the call.
std::string_view collective_name(std::string_view kind) {
  for (std::string_view k : {"all_reduce", "broadcast", "all_gather", "reduce_scatter"})
    if (k == kind) return k;
  throw InputError(fmt::format("collective '{}': expected all_reduce, broadcast, all_gather or reduce_scatter", kind));
}

// What the op keeps busy when alone, by the roofline at the card's peaks
// (the same rule as src/workload/roofline.h's roofline_demand, per op): a server's mps and mig
// policies slow kernels by it.
KernelDemand op_demand(const OpProgram::Op& op, const GpuPeaks& peaks) {
  double peak = peaks.vector_f32;
  if (op.kind == OpProgram::Kind::Conv || op.kind == OpProgram::Kind::Matmul) {
    peak = op.kind == OpProgram::Kind::Conv ? peaks.conv_f32 : peaks.matmul_f32;
    if (op.math == OpProgram::Math::F16) peak = peaks.f16;
    if (op.math == OpProgram::Math::BF16) peak = peaks.bf16;
  }
  const double compute = peak > 0 ? op.flops0 / peak : 0;
  const double memory = peaks.bandwidth > 0 ? op.bytes0 / peaks.bandwidth : 0;
  const double busiest = std::max(compute, memory);
  if (!(busiest > 0)) return {};
  return {static_cast<float>(compute / busiest), static_cast<float>(memory / busiest)};
}

// The real clock less the time this process's issuing threads spent ready
// to run but not running (the kernel's run_delay: another process had the
// CPU). A GPU host would not have lost that time, so the emulated world
// (timeline, syncs, events) does not see it: the loss is made up. The
// script's own clocks are real under the real clock and do see it; the
// summary reports it (host_load_delay_s). A thread samples its own delay
// each time it reads the clock (one getrusage(); /proc only when the thread
// was switched out since), so nothing is stamped with a delay not yet made
// up, and a delay is made up only down to the time the clock has shown
// (another thread ran meanwhile): the clock then never has to hold, which a
// waiting thread would sleep out in real time, losing the time again.
class LoadAdjustedClock final : public Clock {
 public:
  LoadAdjustedClock() : real_(make_real_clock()) {}

  // Never backwards (the floor: the latest time shown).
  Time now() const override {
    sample();
    const Time t = real_->now() - lost_.load(std::memory_order_relaxed);
    Time seen = floor_.load(std::memory_order_relaxed);
    while (t > seen && !floor_.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
    }
    return std::max(t, seen);
  }
  void sleep_until(Time deadline) override {
    for (;;) {
      real_->sleep_until(saturating_add(deadline, lost_.load(std::memory_order_relaxed)));
      if (now() >= deadline) return;
    }
  }
  void run_concurrently(std::vector<std::function<void()>> bodies) override {
    real_->run_concurrently(std::move(bodies));
  }
  // Moves with the time made up, so that CLOCK_MONOTONIC times other
  // processes share (rank processes' collectives) map onto this clock.
  std::optional<std::int64_t> monotonic_epoch_ns() const override {
    return *real_->monotonic_epoch_ns() + lost_.load(std::memory_order_relaxed);
  }
  bool is_virtual() const override { return false; }
  std::string_view name() const override { return "real"; }

  // Adds the calling thread's run_delay since its last sample: none without
  // a context switch since (run_delay grows only while the thread is off the CPU).
  void sample() const {
    thread_local std::int64_t last_delay = -1;
    thread_local long last_switches = -1;
    rusage u{};
    if (::getrusage(RUSAGE_THREAD, &u) == 0) {
      const long switches = u.ru_nvcsw + u.ru_nivcsw;
      if (switches == last_switches) return;
      last_switches = switches;
    }
    const std::int64_t delay = run_delay_ns();
    if (delay < 0) return;
    if (last_delay >= 0 && delay > last_delay) {
      // Not below what the clock has shown: where another thread read the
      // clock during this one's delay, the process was not stalled, and
      // that part of the delay was not lost.
      const std::int64_t cap = real_->now() - floor_.load(std::memory_order_relaxed);
      std::int64_t l = lost_.load(std::memory_order_relaxed);
      while (l < cap &&
             !lost_.compare_exchange_weak(l, std::min(l + (delay - last_delay), cap), std::memory_order_relaxed)) {
      }
    }
    last_delay = delay;
  }
  Duration lost() const { return lost_.load(std::memory_order_relaxed); }

 private:
  // The calling thread's run_delay (ns), -1 when the kernel does not say.
  static std::int64_t run_delay_ns() {
    struct File {  // this thread's, open while the thread lives
      int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
      ~File() {
        if (fd >= 0) ::close(fd);
      }
    };
    thread_local File file;
    char text[96];
    const ssize_t n = file.fd < 0 ? -1 : ::pread(file.fd, text, sizeof text - 1, 0);
    if (n <= 0) return -1;
    text[n] = '\0';
    long long run = 0, delay = -1;
    if (std::sscanf(text, "%lld %lld", &run, &delay) != 2) delay = -1;
    return delay;
  }
  std::unique_ptr<Clock> real_;
  mutable std::atomic<std::int64_t> lost_{0};
  mutable std::atomic<Time> floor_{0};
};

}  // namespace

Settings Settings::from_env() {
  Settings s;
  if (auto v = env("GPEMU_TORCH_GPU")) {
    if (try_find_gpu(*v) == nullptr)
      throw InputError(fmt::format("GPEMU_TORCH_GPU '{}': not a catalogued GPU (`gpemu devices` lists them)", *v));
    s.gpu = *v;
  }
  if (auto n = env_whole("GPEMU_TORCH_GPUS", 1, kMaxTorchGpus)) s.gpus = *n;
  if (auto n = env_whole("GPEMU_TORCH_NODES", 1, 4096)) s.nodes = *n;
  if (auto n = env_whole("GPEMU_TORCH_NODE_RANKS", 1, 4096)) s.node_ranks = *n;
  if (auto v = env("GPEMU_TORCH_NETWORK")) s.network = *v;
  if (auto v = env("GPEMU_TORCH_CLOCK")) {
    if (*v != "real" && *v != "virtual")
      throw InputError(fmt::format("GPEMU_TORCH_CLOCK '{}': expected 'real' or 'virtual'", *v));
    s.clock = parse_clock_kind(*v);
  }
  if (auto v = env("GPEMU_TORCH_JSON")) s.json = *v;
  if (auto v = env("GPEMU_TORCH_TRACE")) s.trace = *v;
  if (auto v = env("GPEMU_TORCH_REPORT")) s.report = *v;
  if (auto v = env("GPEMU_TORCH_SCRIPT")) s.script = *v;
  if (auto v = env("GPEMU_TORCH_MAIN_PID")) s.main_process = *v == std::to_string(::getpid());
  if (auto v = env("GPEMU_TORCH_PARTS")) s.parts = *v;
  if (auto v = env("GPEMU_TORCH_SERVE")) s.serve = *v;
  if (auto n = env_whole("GPEMU_TORCH_PRIORITY", -1000, 1000)) s.priority = *n;
  if (auto v = env("GPEMU_TORCH_MIG")) s.mig = *v;
  if (auto v = env("GPEMU_TORCH_HOST")) s.host = *v;
  if (auto v = env("GPEMU_TORCH_STEP_MARKER")) s.step_marker = *v;
  if (s.serve && (s.trace || s.report))
    throw InputError(
        "GPEMU_TORCH_TRACE / GPEMU_TORCH_REPORT with GPEMU_TORCH_SERVE: the GPU's timeline is the server's; "
        "watch it with gpemu smi (a trace of a shared GPU comes from gpemu share --trace)");
  if (s.serve && s.clock == ClockKind::Virtual)
    throw InputError(
        "GPEMU_TORCH_CLOCK 'virtual' with GPEMU_TORCH_SERVE: a script attached to gpemu serve runs under the real "
        "clock (the server's GPUs are shared with other processes in wall time)");
  if (auto v = env("GPEMU_TORCH_MODEL")) {
    if (!zoo::has_model(*v))
      throw InputError(fmt::format("GPEMU_TORCH_MODEL '{}': not a model of the zoo (`gpemu models` lists them)", *v));
    s.model = *v;
  }
  return s;
}

namespace {

std::string client_name(const Settings& s) {
  const std::string script = s.script.empty() ? "torch" : std::filesystem::path(s.script).filename().string();
  // The server refuses control characters and names over 200 bytes; a file
  // name may hold any byte and be 255 long.
  return fmt::format("{} ({})", printable_excerpt(script, 160), rank_label());
}

}  // namespace

Runtime::Runtime(Settings settings)
    : settings_(std::move(settings)),
      gpu_(&find_gpu(settings_.gpu)),
      clock_(settings_.clock == ClockKind::Real && !settings_.serve ? std::make_unique<LoadAdjustedClock>()
                                                                    : make_clock(settings_.clock)),
      costs_(make_cost_model(std::nullopt)) {
  if (settings_.gpus < 1 || settings_.gpus > kMaxTorchGpus)
    throw InputError(fmt::format("gpus {}: expected 1 to {}", settings_.gpus, kMaxTorchGpus));
  SessionSpec world;
  world.gpu = gpu_;
  world.gpus_per_node = settings_.gpus;
  world.exclusive = true;  // the process's own cards, as a CUDA process sees them
  world.trace = settings_.trace.has_value() || settings_.report.has_value();
  session_ = std::make_unique<Session>(*clock_, *costs_, std::move(world));
  timeline_ = &session_->timeline();
  for (auto& limit : reserve_limits_) limit.store(CachingAllocator::kUnlimited, std::memory_order_relaxed);
  collective_busy_.assign(static_cast<std::size_t>(settings_.gpus), 0);
  if (settings_.nodes > 1) network_ = parse_network(settings_.network);
  if (settings_.serve) {
    // Each device is a client of the server's GPU of the same index, from
    // its first use on (a process holds a CUDA context only on the GPUs it
    // touches). The card is the server's.
    const nlohmann::json gpus = served_gpus(*settings_.serve);
    if (static_cast<int>(gpus.size()) < settings_.gpus)
      throw InputError(
          fmt::format("gpus {}: the server at {} has {}", settings_.gpus, settings_.serve->string(), gpus.size()));
    gpu_ = &find_gpu(gpus[0].at("id").get<std::string>());
    for (int i = 0; i < settings_.gpus; ++i) remote_.push_back(std::make_unique<Remote>());
  } else {
    process_ = session_->attach({client_name(settings_), 0, settings_.gpus});
    for (int i = 0; i < settings_.gpus; ++i) streams_.push_back({&process_.device(i).default_stream()});
  }
  const auto calibration = load_default_calibration();
  host_ = find_host(settings_.host.empty() ? kDefaultHost : std::string_view(settings_.host), "GPEMU_TORCH_HOST");
  factors_ = with_host(calibration->factors(*gpu_), host_);
  if (!settings_.model.empty()) {
    model_ = settings_.model;
    correction_ = calibration->correction(zoo::canonical_name(settings_.model));
  }
  for (int c = 0; c < 2; ++c)
    for (int m = 0; m < 2; ++m) {
      AnalyticalOptions o;
      o.tf32_conv = c != 0;
      o.tf32_matmul = m != 0;
      peaks_[c][m] = gpu_peaks(*gpu_, o);
    }
}

Runtime::~Runtime() {
  try {
    finish();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor at exit has no one to tell
  }
  {
    std::lock_guard lock(events_mutex_);
    local_events_.clear();
  }
  process_.detach();  // the devices go before the session's timeline
  remote_.clear();    // says bye
}

Runtime& Runtime::instance() {
  // Leaked on purpose: PyTorch's tensors (and their deleters, which return
  // blocks to these devices' allocators) may outlive static destruction.
  static Runtime* runtime = new Runtime(Settings::from_env());
  return *runtime;
}

void Runtime::check_device(int index) const {
  if (index < 0 || index >= device_count())
    throw InputError(fmt::format("CUDA device {}: this run emulates {} GPU{} (gpemu torch --gpus)", index,
                                 device_count(), device_count() == 1 ? "" : "s"));
}

Device& Runtime::device(int index) {
  check_device(index);
  return process_.device(index);
}

Runtime::Remote& Runtime::remote_of(int device_index) {
  check_device(device_index);
  return *remote_[static_cast<std::size_t>(device_index)];
}

ServeClient& Runtime::attached(Remote& r, int device_index) {
  if (!r.client)
    r.client = std::make_unique<ServeClient>(*settings_.serve, ClientHello{client_name(settings_), device_index,
                                                                           settings_.priority, settings_.mig});
  return *r.client;
}

nlohmann::json Runtime::call(int device_index, nlohmann::json message) {
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  return attached(r, device_index).call(message);
}

void Runtime::post(int device_index, nlohmann::json message) {
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  attached(r, device_index).post(message);
}

Stream& Runtime::stream(int device_index, std::int64_t id) {
  Device& d = device(device_index);
  (void)d;
  std::lock_guard lock(mutex_);
  const auto& list = streams_[static_cast<std::size_t>(device_index)];
  if (id < 0 || id >= static_cast<std::int64_t>(list.size()))
    throw InputError(fmt::format("CUDA stream {} on device {}: no such stream", id, device_index));
  return *list[static_cast<std::size_t>(id)];
}

void Runtime::check_stream(int device_index, std::int64_t id) {
  if (!remote()) {
    (void)stream(device_index, id);
    return;
  }
  // Lock-free: every op checks its stream (streams are only ever added).
  if (id < 0 || id >= remote_of(device_index).streams.load(std::memory_order_acquire))
    throw InputError(fmt::format("CUDA stream {} on device {}: no such stream", id, device_index));
}

std::int64_t Runtime::create_stream(int device_index) {
  if (remote()) {
    Remote& r = remote_of(device_index);
    std::lock_guard lock(r.mutex);
    const auto id = attached(r, device_index).call({{"op", "stream"}})["stream"].get<std::int64_t>();
    r.streams.store(id + 1, std::memory_order_release);
    return id;
  }
  Device& d = device(device_index);
  std::lock_guard lock(mutex_);
  auto& list = streams_[static_cast<std::size_t>(device_index)];
  // PyTorch's streams (torch.cuda.Stream, the pool) are non-blocking: no
  // implicit ordering with the default stream.
  list.push_back(&d.create_stream(/*non_blocking=*/true));
  return static_cast<std::int64_t>(list.size()) - 1;
}

bool Runtime::stream_query(int device_index, std::int64_t id) {
  if (!remote()) return stream(device_index, id).query();
  check_stream(device_index, id);
  return call(device_index, {{"op", "query"}, {"stream", id}})["done"].get<bool>();
}

// ---- memory -----------------------------------------------------------------------

// N10: each process of a run has its own emulated devices, so two processes
// on one device index would each get the whole card. The first process of
// the run to allocate on device i holds an abstract Unix socket named after
// the run (its first process's pid) and i, for as long as it lives; a later
// one finds the name taken and says so on stderr, naming the holder (its
// SO_PEERCRED). (decisions.md: "Processes of one gpemu torch run on one GPU")
void Runtime::claim_device(int index) {
  if (index < 0 || index >= kMaxTorchGpus || claimed_[static_cast<std::size_t>(index)].exchange(true)) return;
  const auto run = env("GPEMU_TORCH_MAIN_PID");
  if (!run) return;  // not under gpemu torch: no run to share with
  const std::string name = fmt::format("gpemu-torch-{}-cuda{}", *run, index);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof a.sun_path - 2));  // sun_path[0] = 0: abstract
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd, 64) == 0) return;  // held until exit
  ::close(fd);
  // Taken: by whom (a connection its listener never accepts tells its pid).
  pid_t holder = 0;
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&a), len) == 0) {
    ucred cred{};
    socklen_t n = sizeof cred;
    if (::getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cred, &n) == 0) holder = cred.pid;
  }
  if (probe >= 0) ::close(probe);
  const std::string warning = fmt::format(
      "gpemu torch: warning: process {} allocates on cuda:{}, which {} of this run uses too; processes of one run do "
      "not share an emulated GPU: each has a whole {}, its memory and its time (a real GPU would run out of memory "
      "or time-slice them). To share one card, run `gpemu serve` and `gpemu torch --connect`, or give each process "
      "its own GPU (--gpus)\n",
      ::getpid(), index, holder > 0 ? fmt::format("process {}", holder) : std::string("another process"), gpu_->id);
  std::fputs(warning.c_str(), stderr);
}

CachingAllocator::Ptr Runtime::allocate(int device_index, std::uint64_t bytes, std::int64_t stream_id) {
  if (!remote()) {
    Device& d = device(device_index);
    if (!claimed_[static_cast<std::size_t>(device_index)].load(std::memory_order_relaxed)) claim_device(device_index);
    CachingAllocator& a = d.allocator();
    const CachingAllocator::Ptr p = a.allocate(bytes, static_cast<int>(stream_id));
    const std::uint64_t limit = reserve_limits_[static_cast<std::size_t>(device_index)].load(std::memory_order_relaxed);
    if (limit == CachingAllocator::kUnlimited || a.stats().reserved_bytes <= limit) return p;
    // A new segment past the process's memory fraction: as PyTorch, the
    // cache is released and the request tried again, then it is an OOM.
    a.free(p);
    a.empty_cache();
    const CachingAllocator::Ptr q = a.allocate(bytes, static_cast<int>(stream_id));
    if (a.stats().reserved_bytes <= limit) return q;
    a.free(q);
    a.empty_cache();
    throw OutOfMemoryError(
        fmt::format("CUDA out of memory. Tried to allocate {} (GPU {}; {} total capacity; {} allowed by "
                    "set_per_process_memory_fraction; {} already allocated; {} reserved in total by PyTorch)",
                    CachingAllocator::format_size(bytes), device_index,
                    CachingAllocator::format_size(gpu_->reported_memory()), CachingAllocator::format_size(limit),
                    CachingAllocator::format_size(a.stats().allocated_bytes),
                    CachingAllocator::format_size(a.stats().reserved_bytes)),
        bytes);
  }
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  const nlohmann::json reply =
      attached(r, device_index).call({{"op", "malloc"}, {"bytes", bytes}, {"stream", stream_id}});
  const auto p = reply["ptr"].get<CachingAllocator::Ptr>();
  if (p != 0) r.block_sizes[p] = reply["size"].get<std::uint64_t>();
  return p;
}

void Runtime::free(int device_index, CachingAllocator::Ptr p) {
  if (!remote()) {
    device(device_index).allocator().free(p);
    return;
  }
  if (p == 0) return;
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  r.block_sizes.erase(p);
  attached(r, device_index).post({{"op", "free"}, {"ptr", p}});
}

std::uint64_t Runtime::block_size(int device_index, CachingAllocator::Ptr p) {
  if (!remote()) return device(device_index).allocator().block_size(p);
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  const auto it = r.block_sizes.find(p);
  if (it == r.block_sizes.end()) throw std::invalid_argument("block_size: not a live allocation");
  return it->second;
}

// Attached, the memory queries of a GPU the process has not used answer
// without connecting (as CUDA's do not create a context).
std::optional<nlohmann::json> Runtime::call_if_attached(int device_index, nlohmann::json message) {
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  if (!r.client) return std::nullopt;
  return r.client->call(message);
}

AllocatorStats Runtime::memory_stats(int device_index) {
  if (!remote()) return device(device_index).allocator().stats();
  const auto reply = call_if_attached(device_index, {{"op", "memory"}});
  return reply ? allocator_stats_from_json(*reply) : AllocatorStats{};
}

void Runtime::set_memory_fraction(int device_index, double fraction) {
  if (!(fraction >= 0 && fraction <= 1))
    throw InputError(fmt::format("set_per_process_memory_fraction: {} is not a fraction from 0 to 1", fraction));
  if (remote())
    throw InputError(
        "set_per_process_memory_fraction: not emulated for a script attached to gpemu serve (--connect): the "
        "server's allocator has no such limit; run without --connect to emulate it");
  // PyTorch's rule: the fraction of the card's total memory (what
  // get_device_properties reports), as a bound on what the process reserves.
  (void)device(device_index);
  reserve_limits_[static_cast<std::size_t>(device_index)].store(
      fraction >= 1 ? CachingAllocator::kUnlimited
                    : static_cast<std::uint64_t>(fraction * static_cast<double>(gpu_->reported_memory())),
      std::memory_order_relaxed);
}

void Runtime::empty_cache(int device_index) {
  if (!remote())
    device(device_index).allocator().empty_cache();
  else
    call_if_attached(device_index, {{"op", "empty_cache"}});
}

void Runtime::reset_peak_stats(int device_index) {
  if (!remote())
    device(device_index).allocator().reset_peak_stats();
  else
    call_if_attached(device_index, {{"op", "reset_peak"}});
}

// ---- events -----------------------------------------------------------------------

Event& Runtime::local_event(std::int64_t id) {
  std::lock_guard lock(events_mutex_);
  const auto it = local_events_.find(id);
  if (it == local_events_.end()) throw InputError(fmt::format("CUDA event {}: no such event", id));
  return *it->second;
}

std::int64_t Runtime::event_create() {
  std::lock_guard lock(events_mutex_);
  const std::int64_t id = next_event_++;
  if (remote())
    remote_events_.emplace(id, -1);
  else
    local_events_.emplace(id, std::make_unique<Event>());
  return id;
}

void Runtime::event_destroy(std::int64_t id) {
  int recorded_on = -1;
  {
    std::lock_guard lock(events_mutex_);
    if (!remote()) {
      local_events_.erase(id);
      return;
    }
    const auto it = remote_events_.find(id);
    if (it == remote_events_.end()) return;
    recorded_on = it->second;
    remote_events_.erase(it);
  }
  if (recorded_on >= 0) post(recorded_on, {{"op", "event_free"}, {"event", id}});
}

int Runtime::remote_event_device(std::int64_t id, std::optional<int> record_on) {
  std::lock_guard lock(events_mutex_);
  const auto it = remote_events_.find(id);
  if (it == remote_events_.end()) throw InputError(fmt::format("CUDA event {}: no such event", id));
  const int before = it->second;
  if (record_on) it->second = *record_on;
  return before;
}

void Runtime::event_record(std::int64_t id, int device_index, std::int64_t stream_id) {
  if (!remote()) {
    stream(device_index, stream_id).record(local_event(id));
    return;
  }
  check_stream(device_index, stream_id);
  const int before = remote_event_device(id, device_index);
  if (before >= 0 && before != device_index) post(before, {{"op", "event_free"}, {"event", id}});
  post(device_index, {{"op", "record"}, {"event", id}, {"stream", stream_id}});
}

void Runtime::event_wait(std::int64_t id, int device_index, std::int64_t stream_id) {
  if (!remote()) {
    Event& e = local_event(id);
    if (e.recorded()) stream(device_index, stream_id).wait(e);
    return;
  }
  check_stream(device_index, stream_id);
  const int on = remote_event_device(id);
  if (on < 0) return;
  if (on == device_index) {
    post(device_index, {{"op", "wait"}, {"event", id}, {"stream", stream_id}});
  } else {
    // Another GPU's event: each GPU is its own client of the server, so the
    // host waits for it (later work on the stream is then ordered after it).
    call(on, {{"op", "event_sync"}, {"event", id}});
  }
}

bool Runtime::event_query(std::int64_t id) {
  if (!remote()) {
    Event& e = local_event(id);
    return !e.recorded() || e.query();
  }
  const int on = remote_event_device(id);
  return on < 0 || call(on, {{"op", "query"}, {"event", id}})["done"].get<bool>();
}

void Runtime::event_synchronize(std::int64_t id) {
  if (!remote()) {
    Event& e = local_event(id);
    if (e.recorded()) e.synchronize();
    return;
  }
  const int on = remote_event_device(id);
  if (on >= 0) call(on, {{"op", "event_sync"}, {"event", id}});
}

double Runtime::event_elapsed_ms(std::int64_t start, std::int64_t end) {
  const char* const not_recorded =
      "elapsed_time: both events must have been recorded (and created with enable_timing=True)";
  if (!remote()) {
    Event& a = local_event(start);
    Event& b = local_event(end);
    if (!a.recorded() || !b.recorded()) throw InputError(not_recorded);
    return to_ms(Event::elapsed(a, b));
  }
  const int on_a = remote_event_device(start), on_b = remote_event_device(end);
  if (on_a < 0 || on_b < 0) throw InputError(not_recorded);
  if (on_a != on_b) throw InputError("elapsed_time: the events were recorded on different GPUs");
  return call(on_a, {{"op", "elapsed"}, {"start", start}, {"end", end}})["ms"].get<double>();
}

const GpuPeaks& Runtime::peaks(bool tf32_conv, bool tf32_matmul) const {
  return peaks_[tf32_conv ? 1 : 0][tf32_matmul ? 1 : 0];
}

void Runtime::pace_host(double seconds) {
  const Duration launch = from_seconds(seconds);
  Time until = 0;
  {
    std::lock_guard lock(mutex_);
    // The host's emulated time is all there is: each op costs its launch.
    host_ready_ = std::max(host_ready_, clock_->now()) + launch;
    until = host_ready_;
  }
  clock_->sleep_until(until);
}

bool Runtime::tracing() const { return timeline_->tracing(); }

void Runtime::advance_host(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    throw InputError(fmt::format("advance the host by {} s: expected a finite time of 0 or more", seconds));
  clock_->sleep_for(from_seconds(seconds));
}

void Runtime::issue(int device_index, std::int64_t stream_id, const OpProgram::Op& op, std::string_view name,
                    bool tf32_conv, bool tf32_matmul, bool cpp_loop, Time started, const OpDetail* detail) {
  check_stream(device_index, stream_id);
  const ModelCorrection correction = [this] {  // set_model may change it from another thread
    std::lock_guard lock(mutex_);
    return correction_;
  }();
  const bool forward = op.section == OpProgram::Section::Forward || op.section == OpProgram::Section::Loss;
  const bool view = op.kind == OpProgram::Kind::View;
  if (clock_->is_virtual()) {
    // The host profile's cost of the op, which folds in the Python and the
    // dispatch of a real GPU host (the script's own here run in no emulated
    // time); an op a C++ loop issues pays the C++ (autograd engine's) rate.
    const double launch =
        cpp_loop && forward && !view ? factors_.launch_backward_us * 1e-6 * op.weight : op_launch_seconds(op, factors_);
    pace_host(launch * (forward ? correction.forward_host : correction.backward_host));
  } else if (!view) {
    // The script's Python and torch's dispatch ran for real on this host
    // (and the emulator's own work, in place of the CPU dispatch's): the
    // host adds what a CUDA launch adds, counted from the op's start.
    const Time from = started >= 0 ? started : clock_->now();
    clock_->sleep_until(from + from_seconds(kCudaLaunchUs * 1e-6 * op.weight));
  }
  const double seconds = view ? 0
                              : op_kernel_seconds(op, 0, peaks(tf32_conv, tf32_matmul), factors_) *
                                    (forward ? correction.forward_gpu : correction.backward_gpu);
  {
    std::lock_guard lock(mutex_);
    if (view) {
      ++counters_.views;
      return;
    }
    ++counters_.kernels;
    (op.section == OpProgram::Section::Optimizer  ? counters_.optimizer_gpu_s
     : op.section == OpProgram::Section::Backward ? counters_.backward_gpu_s
                                                  : counters_.forward_gpu_s) += seconds;
    if (!remote() && timeline_->tracing()) {
      const std::string_view shapes = detail != nullptr ? std::string_view(detail->shapes) : std::string_view();
      auto it = shape_ids_.find(shapes);
      if (it == shape_ids_.end()) {
        it = shape_ids_.emplace(std::string(shapes), static_cast<std::uint32_t>(shapes_.size())).first;
        shapes_.emplace_back(shapes);
      }
      kernel_details_[{device_index, stream_id}].push_back(
          {it->second, static_cast<std::uint8_t>(op.section), op.bytes0});
    }
  }
  if (remote()) {
    const KernelDemand d = op_demand(op, peaks(tf32_conv, tf32_matmul));
    Remote& r = remote_of(device_index);
    std::lock_guard lock(r.mutex);
    attached(r, device_index)
        .post({{"op", "kernel"}, {"ns", from_seconds(seconds)}, {"stream", stream_id}, {"sm", d.sm}, {"bw", d.bw}});
    ++r.kernels;
    r.kernel_time += from_seconds(seconds);
    return;
  }
  stream(device_index, stream_id).launch_kernel(from_seconds(seconds), name);
}

void Runtime::copy(int device_index, std::int64_t stream_id, bool to_device, std::uint64_t bytes, bool pinned) {
  check_stream(device_index, stream_id);
  {
    std::lock_guard lock(mutex_);
    ++(to_device ? counters_.h2d : counters_.d2h);
    if (!pinned) ++counters_.blocking_syncs;
  }
  if (remote()) {
    // A pinned copy returns at once; a pageable one when done (its reply).
    const nlohmann::json m = {{"op", "copy"},
                              {"dir", to_device ? "h2d" : "d2h"},
                              {"bytes", bytes},
                              {"pinned", pinned},
                              {"stream", stream_id}};
    Remote& r = remote_of(device_index);
    std::lock_guard lock(r.mutex);
    if (pinned)
      attached(r, device_index).post(m);
    else
      attached(r, device_index).call(m);
    (to_device ? r.h2d_bytes : r.d2h_bytes) += bytes;
    return;
  }
  Stream& s = stream(device_index, stream_id);
  const HostMemoryKind kind = pinned ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
  if (to_device)
    s.copy_h2d(bytes, kind);
  else
    s.copy_d2h(bytes, kind);
}

void Runtime::synchronize(int device_index, std::int64_t stream_id) {
  check_stream(device_index, stream_id);
  {
    std::lock_guard lock(mutex_);
    ++counters_.blocking_syncs;
  }
  if (remote())
    call(device_index, {{"op", "sync"}, {"stream", stream_id}});
  else
    stream(device_index, stream_id).synchronize();
}

void Runtime::synchronize_device(int device_index) {
  check_device(device_index);
  {
    std::lock_guard lock(mutex_);
    ++counters_.blocking_syncs;
  }
  if (remote())
    call(device_index, {{"op", "sync"}, {"device", true}});
  else
    device(device_index).synchronize();
}

Duration Runtime::collective_duration(std::string_view kind, std::uint64_t bytes, int world) {
  kind = collective_name(kind);
  if (world < 1) throw InputError(fmt::format("collective {}: world size {} (expected at least 1)", kind, world));
  auto key = std::make_tuple(std::string(kind), bytes, world);
  {
    std::lock_guard lock(mutex_);
    if (const auto it = collective_durations_.find(key); it != collective_durations_.end()) return it->second;
  }
  // All the launcher's ranks of several nodes cross the network; any other
  // group (one node's ranks, a subgroup) is timed as one node's ring.
  const int nodes = settings_.nodes > 1 && world == settings_.nodes * settings_.node_ranks ? settings_.nodes : 1;
  const Duration d = collective_time_alone(*gpu_, kind, bytes, world, nodes, network_);
  std::lock_guard lock(mutex_);
  collective_durations_.emplace(std::move(key), d);
  return d;
}

void Runtime::collective(int device_index, std::int64_t stream_id, std::string_view kind, std::uint64_t bytes,
                         int world, std::int64_t start_shared_ns) {
  kind = collective_name(kind);
  const Duration d = collective_duration(kind, bytes, world);
  const auto epoch = clock_->monotonic_epoch_ns();
  if (remote()) {
    // The server orders work per client: the ring starts when the host has
    // reached the latest rank's ready time (stream_ready_shared_ns left the
    // stream drained), as a kernel of the ring's time.
    check_stream(device_index, stream_id);
    clock_->sleep_until(start_shared_ns - epoch.value_or(0));
    call(device_index, {{"op", "kernel"}, {"ns", d}, {"stream", stream_id}});
    std::lock_guard lock(mutex_);
    ++counters_.collectives;
    collective_busy_[static_cast<std::size_t>(device_index)] += d;
    return;
  }
  Stream& s = stream(device_index, stream_id);
  OpSpec spec;
  spec.lower_bound = std::max<Time>(timeline_->issue_time(), start_shared_ns - epoch.value_or(0));
  spec.duration = d;
  spec.tag.name = kind;
  spec.tag.category = "collective";
  spec.tag.device = device_index;
  spec.tag.stream = static_cast<int>(stream_id);
  s.enqueue(spec, std::nullopt);
  std::lock_guard lock(mutex_);
  ++counters_.collectives;
  collective_busy_[static_cast<std::size_t>(device_index)] += d;
}

std::int64_t Runtime::stream_ready_shared_ns(int device_index, std::int64_t stream_id) {
  if (remote()) {
    // The server's clock is not this process's: drain the stream, then it is ready now.
    call(device_index, {{"op", "sync"}, {"stream", stream_id}});
    return clock_->now() + clock_->monotonic_epoch_ns().value_or(0);
  }
  Stream& s = stream(device_index, stream_id);
  const Time ready = std::max(timeline_->issue_time(), timeline_->end_time(s.tail()));
  return ready + clock_->monotonic_epoch_ns().value_or(0);
}

RunCounters Runtime::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::string_view to_string(StepSource s) {
  switch (s) {
    case StepSource::Marker: return "step marker";
    case StepSource::Optimizer: return "optimizer.step() calls";
    case StepSource::Backward: return "backward calls";
  }
  return "";
}

void Runtime::note_optimizer_step(int device_index, std::int64_t stream_id) {
  {
    std::lock_guard lock(mutex_);
    ++counters_.optimizer_steps;
  }
  note_step(StepSource::Optimizer, device_index, stream_id);
}

void Runtime::note_step(StepSource source, int device_index, std::int64_t stream_id) {
  Time at = clock_->now();
  if (!remote() && device_index >= 0 && device_index < device_count()) {
    Stream& s = stream(device_index, stream_id);
    at = std::max(at, timeline_->end_time(s.tail()));
  }
  std::lock_guard lock(mutex_);
  step_starts_[static_cast<std::size_t>(source)].push_back(to_seconds(at));
}

std::pair<StepSource, std::vector<double>> Runtime::steps() const {
  std::lock_guard lock(mutex_);
  for (int i = 0; i < kStepSources; ++i)
    if (!step_starts_[static_cast<std::size_t>(i)].empty())
      return {static_cast<StepSource>(i), step_starts_[static_cast<std::size_t>(i)]};
  return {StepSource::Optimizer, {}};
}

void Runtime::host_span(std::string name, double start_s, double end_s) {
  const Time start = from_seconds(start_s), end = from_seconds(end_s);
  if (!timeline_->tracing() || end <= start) return;
  timeline_->add_host_span(
      {std::move(name), "loader", settings_.main_process ? "host" : "host " + rank_label(), 0, start, end});
}

void Runtime::note_generic(std::string_view op) {
  std::lock_guard lock(mutex_);
  auto it = generic_ops_.find(op);
  if (it == generic_ops_.end())
    generic_ops_.emplace(std::string(op), 1);
  else
    ++it->second;
}

bool Runtime::set_model(const std::string& model) {
  const bool known = zoo::has_model(model);
  if (!settings_.model.empty()) return known;
  const ModelCorrection c =
      known ? load_default_calibration()->correction(zoo::canonical_name(model)) : ModelCorrection{};
  std::lock_guard lock(mutex_);
  model_ = known ? model : std::string();
  correction_ = c;
  return known;
}

TorchRunRecord Runtime::record() {
  const RunCounters c = counters();
  const double elapsed = to_seconds(clock_->now());
  TorchRunRecord r;
  r.run.gpu = gpu_->id;
  r.run.gpus = settings_.gpus;
  r.run.clock = std::string(to_string(settings_.clock));
  // As gpemu train's record: the nodes the launcher's ranks span, and the network between them.
  r.run.nodes = settings_.nodes;
  r.run.network = settings_.nodes > 1 ? network_.name : std::string();
  {
    std::lock_guard lock(mutex_);
    r.run.model = model_;
  }
  if (settings_.serve) r.serve = settings_.serve->string();
  r.elapsed_s = elapsed;
  // As gpemu train's: an iteration is a step of the script (an
  // optimizer.step() call; without any, a backward call; or a --step-marker
  // call); phase times are the GPU time of the phase's kernels per iteration.
  const auto [source, starts] = steps();
  r.iterations = starts.size();
  r.optimizer_steps = c.optimizer_steps;
  r.steps.source = starts.empty() ? std::string() : std::string(to_string(source));
  r.steps.count = starts.size();
  // The time from each step's start to the next's (the last step has no next).
  for (std::size_t i = 1; i < starts.size(); ++i) r.steps.step_ms.push_back((starts[i] - starts[i - 1]) * 1e3);
  r.host_profile = host_.name;
  // Real clock: the time this machine's load kept the script's threads from
  // running (made up on the emulated timeline, seen by the script's own clocks).
  if (const auto* load = dynamic_cast<const LoadAdjustedClock*>(clock_.get()))
    r.host_load_delay_s = to_seconds(load->lost());
  const double iters = static_cast<double>(starts.size());
  if (iters > 0 && elapsed > 0) r.iterations_per_s = iters / elapsed;
  if (iters > 0) {
    r.forward_ms_mean = c.forward_gpu_s / iters * 1e3;
    r.backward_ms_mean = c.backward_gpu_s / iters * 1e3;
    r.optimizer_ms_mean = c.optimizer_gpu_s / iters * 1e3;
  }
  r.kernels = c.kernels;
  r.view_ops = c.views;
  r.h2d_copies = c.h2d;
  r.d2h_copies = c.d2h;
  r.blocking_syncs = c.blocking_syncs;
  r.collectives = c.collectives;
  double peak_alloc = 0, peak_reserved = 0, busy_sum = 0;
  int used = 0;
  for (int i = 0; i < device_count(); ++i) {
    // Attached: the server's allocator; the kernels' time alone, not what
    // the server's policy made of it (gpemu smi has the GPU's utilisation).
    AllocatorStats a;
    DeviceStats s;
    if (remote()) {
      try {
        a = memory_stats(i);
      } catch (const Error&) {  // NOLINT(bugprone-empty-catch): a server gone by the script's exit leaves 0s
      }
      Remote& rem = remote_of(i);
      std::lock_guard lock(rem.mutex);
      s.kernels = rem.kernels;
      s.busy[static_cast<int>(Engine::Compute)] = rem.kernel_time;
      s.h2d_bytes = rem.h2d_bytes;
      s.d2h_bytes = rem.d2h_bytes;
    } else {
      a = device(i).allocator().stats();
      s = device(i).stats();
    }
    RankRecord rank;
    rank.gpu = i;
    rank.compute_busy = s.busy[static_cast<int>(Engine::Compute)];
    rank.peak_allocated_bytes = a.peak_allocated_bytes;
    rank.peak_reserved_bytes = a.peak_reserved_bytes;
    TorchDeviceRecord d;
    d.kernels = s.kernels;
    d.h2d_busy = s.busy[static_cast<int>(Engine::CopyH2D)];
    d.d2h_busy = s.busy[static_cast<int>(Engine::CopyD2H)];
    {
      std::lock_guard lock(mutex_);
      d.collective_busy = collective_busy_[static_cast<std::size_t>(i)];
    }
    d.h2d_bytes = s.h2d_bytes;
    d.d2h_bytes = s.d2h_bytes;
    peak_alloc = std::max(peak_alloc, static_cast<double>(a.peak_allocated_bytes));
    peak_reserved = std::max(peak_reserved, static_cast<double>(a.peak_reserved_bytes));
    if (s.kernels > 0) {
      busy_sum += to_seconds(rank.compute_busy);
      ++used;
    }
    r.run.ranks.push_back(std::move(rank));
    r.devices.push_back(d);
  }
  // Over the GPUs that ran kernels; peaks: the largest GPU's.
  if (used > 0 && elapsed > 0) r.gpu_util_pct = 100.0 * busy_sum / used / elapsed;
  r.peak_allocated_mib = peak_alloc / (1 << 20);
  r.peak_reserved_mib = peak_reserved / (1 << 20);
  {
    std::lock_guard lock(mutex_);
    r.ops_through_meta.insert(generic_ops_.begin(), generic_ops_.end());
  }
  return r;
}

std::string Runtime::summary_json() { return to_json(record()).dump(2); }

std::pair<std::vector<TraceRecord>, std::vector<std::string>> Runtime::trace_records() const {
  std::vector<TraceRecord> records = timeline_->trace_records();
  std::vector<std::string> args(records.size());
  // Each stream's kernels run in issue order: the n-th kernel record of a
  // stream (by start) is the n-th kernel issued to it.
  std::map<std::pair<int, std::int64_t>, std::vector<std::size_t>> by_stream;
  for (std::size_t i = 0; i < records.size(); ++i) {
    TraceRecord& r = records[i];
    if (r.stream >= 0) r.engine = -1;  // drawn once: on its stream's track
    if (r.category == "kernel") by_stream[{r.device, r.stream}].push_back(i);
  }
  std::lock_guard lock(mutex_);
  for (auto& [key, idx] : by_stream) {
    const auto d = kernel_details_.find(key);
    if (d == kernel_details_.end() || d->second.size() != idx.size()) continue;  // not every kernel known: none
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t a, std::size_t b) { return records[a].start < records[b].start; });
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const KernelDetail& kd = d->second[k];
      const char* phase = "forward";
      if (kd.section == static_cast<std::uint8_t>(OpProgram::Section::Backward)) phase = "backward";
      if (kd.section == static_cast<std::uint8_t>(OpProgram::Section::Optimizer)) phase = "optimizer";
      args[idx[k]] = fmt::format(R"({{"shapes":{},"bytes":{:.0f},"phase":"{}"}})",
                                 nlohmann::json(shapes_[kd.shapes]).dump(), kd.bytes, phase);
    }
  }
  return {std::move(records), std::move(args)};
}

nlohmann::json Runtime::part_object() {
  nlohmann::json part;
  TorchRunRecord s = record();
  s.process = rank_label();
  part["summary"] = to_json(s);
  const auto epoch = clock_->monotonic_epoch_ns();
  part["epoch_ns"] = epoch ? nlohmann::json(*epoch) : nlohmann::json(nullptr);
  nlohmann::json records = nlohmann::json::array();
  if (timeline_->tracing()) {
    const auto [traced, args] = trace_records();
    for (std::size_t i = 0; i < traced.size(); ++i) {
      const TraceRecord& r = traced[i];
      records.push_back({r.name, r.category, r.device, r.stream, r.engine, r.start, r.end, args[i]});
    }
  }
  part["records"] = std::move(records);
  nlohmann::json spans = nlohmann::json::array();
  if (timeline_->tracing())
    for (const HostSpan& h : timeline_->host_spans())
      spans.push_back({h.name, h.category, h.process, h.thread, h.start, h.end});
  part["spans"] = std::move(spans);
  return part;
}

void Runtime::print_summary(const TorchRunRecord& r) const {
  // The ranks a node is the launcher's (Settings), not a figure of the record.
  std::string out =
      fmt::format("gpemu torch: {}x {}, {} clock, host {}{}\n", r.run.gpus, gpu_->name, r.run.clock, r.host_profile,
                  r.run.nodes > 1 ? fmt::format(", ranks on {} nodes of {} joined by {}", r.run.nodes,
                                                settings_.node_ranks, r.run.network)
                                  : "");
  if (const std::optional<StepStats> st = step_stats(r.steps); r.steps.count > 0 && st)
    out += fmt::format("  step time    {:.3f} ms median ({:.3f} to {:.3f} ms) over {} steps ({})\n", st->median_ms,
                       st->min_ms, st->max_ms, r.steps.count, r.steps.source);
  else
    out += fmt::format(
        "  steps        {} (no step time: a step is an optimizer.step(), a backward or a "
        "--step-marker call)\n",
        r.steps.count);
  out += fmt::format("  emulated     {:.3f} s, GPU busy {}\n", r.elapsed_s,
                     r.gpu_util_pct ? fmt::format("{:.1f} %", *r.gpu_util_pct) : std::string("n/a"));
  if (r.host_load_delay_s && *r.host_load_delay_s > 0.01 * r.elapsed_s)
    out += fmt::format(
        "  host load    {:.3f} s: this machine's other work kept the script from running; made up on the emulated "
        "GPUs, not in the script's own clocks (wall time)\n",
        *r.host_load_delay_s);
  out += fmt::format("  memory peak  {:.1f} MiB allocated, {:.1f} MiB reserved\n", r.peak_allocated_mib,
                     r.peak_reserved_mib);
  out +=
      fmt::format("  kernels      {}, copies {}, syncs {}\n", r.kernels, r.h2d_copies + r.d2h_copies, r.blocking_syncs);
  const std::optional<ExpectedError> e = expected_error(*gpu_, settings_.model, "");
  if (e)
    out += fmt::format("  model error  +-{:.0f} % per step expected for the {} ({})\n", e->pct.iteration, gpu_->name,
                       e->basis);
  else
    out += "  model error  not stated: the calibration holds no validation\n";
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
}

void Runtime::finish() {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
  }
  if (!settings_.main_process) {
    // A rank: its part, for the first process to merge (only when it used a GPU).
    const RunCounters c = counters();
    if (settings_.parts && c.kernels + c.h2d + c.d2h + c.collectives > 0)
      write_file_atomically(*settings_.parts / fmt::format("{}.json", ::getpid()), part_object().dump(),
                            "gpemu torch part");
    return;
  }
  // Each rank's part: its record and (for the trace) its timeline. A part
  // that cannot be read (a rank killed while writing it) is left out.
  struct Part {
    nlohmann::json raw;
    TorchRunRecord record;
  };
  std::vector<Part> parts;
  if (settings_.parts && std::filesystem::is_directory(*settings_.parts)) {
    for (const auto& e : std::filesystem::directory_iterator(*settings_.parts)) {
      if (e.path().extension() != ".json") continue;
      std::ifstream in(e.path());
      nlohmann::json raw = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (raw.is_discarded() || !raw.contains("summary")) continue;
      try {
        TorchRunRecord record = torch_run_record(raw["summary"]);
        parts.push_back({std::move(raw), std::move(record)});
      } catch (const InputError&) {  // NOLINT(bugprone-empty-catch): not a part this build wrote
      }
    }
    std::sort(parts.begin(), parts.end(),
              [](const Part& a, const Part& b) { return a.record.process < b.record.process; });
  }
  const TorchRunRecord main_record = record();
  std::vector<TorchRunRecord> part_records;
  for (const Part& p : parts) part_records.push_back(p.record);
  const TorchRunRecord summary = merge_records(main_record, part_records);
  if (summary.kernels + summary.h2d_copies + summary.d2h_copies > 0) print_summary(summary);
  // One output that cannot be written (a full disk) does not stop the
  // others; every failure is named, and the run fails (gpemu_torch exits 1).
  std::vector<std::string> failed;
  const auto attempt = [&failed](const char* option, const auto& write) {
    try {
      write();
    } catch (const std::exception& e) {
      failed.push_back(fmt::format("{}: {}", option, e.what()));
    }
  };
  const auto report_failures = [&failed] {
    if (failed.empty()) return;
    std::string all;
    for (const std::string& f : failed) all += (all.empty() ? "" : "\n") + f;
    throw Error(all);
  };
  if (settings_.json)
    attempt("--json",
            [&] { write_file_atomically(*settings_.json, to_json(summary).dump(2) + "\n", "gpemu torch summary"); });
  if (!settings_.trace && !settings_.report) return report_failures();

  // Every process's devices: the first process's as they are, each part's
  // on rows of its own, its times moved onto the first process's clock
  // (real clock: the epochs differ; virtual: each process's starts at 0).
  struct Row {
    std::string label;
    int device;
    const RankRecord* rank;
    const TorchDeviceRecord* stats;
  };
  auto [records, args] = trace_records();
  std::vector<TraceDeviceName> names;
  std::vector<Row> rows;
  for (int g = 0; g < process_.gpus(); ++g) {
    const int index = process_.device(g).index();
    names.push_back({index, trace_gpu_name(index, gpu_->id)});
    const auto i = static_cast<std::size_t>(index);
    rows.push_back({fmt::format("GPU {}", index), index, &main_record.run.ranks[i], &main_record.devices[i]});
  }
  const std::int64_t main_epoch = clock_->monotonic_epoch_ns().value_or(0);
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const nlohmann::json& part = parts[p].raw;
    const TorchRunRecord& rec = parts[p].record;
    const std::string& label = rec.process;
    const int base = static_cast<int>(p + 1) * kMaxTorchGpus;
    const std::int64_t shift = part["epoch_ns"].is_null() ? 0 : part["epoch_ns"].get<std::int64_t>() - main_epoch;
    for (std::size_t k = 0; k < rec.devices.size(); ++k) {
      const int i = rec.run.ranks[k].gpu;
      if (rec.devices[k].kernels == 0 && rec.devices[k].collective_busy == 0) continue;
      names.push_back({base + i, fmt::format("{}: {}", label, trace_gpu_name(i, gpu_->id))});
      rows.push_back({fmt::format("{} GPU {}", label, i), base + i, &rec.run.ranks[k], &rec.devices[k]});
    }
    for (const auto& r : part["records"]) {
      records.push_back({r[0].get<std::string>(), r[1].get<std::string>(), base + r[2].get<int>(), r[3].get<int>(),
                         r[4].get<int>(), r[5].get<Time>() + shift, r[6].get<Time>() + shift});
      args.push_back(r.size() > 7 ? r[7].get<std::string>() : std::string());
    }
  }
  std::vector<HostSpan> spans = timeline_->host_spans();
  for (const auto& [part, rec] : parts) {
    const std::int64_t shift = part["epoch_ns"].is_null() ? 0 : part["epoch_ns"].get<std::int64_t>() - main_epoch;
    if (part.contains("spans"))
      for (const auto& h : part["spans"])
        spans.push_back({h[0].get<std::string>(), h[1].get<std::string>(), h[2].get<std::string>(), h[3].get<int>(),
                         h[4].get<Time>() + shift, h[5].get<Time>() + shift});
  }
  if (settings_.trace)
    attempt("--trace", [&] { write_chrome_trace_file_with_args(records, args, spans, names, *settings_.trace); });
  if (settings_.report)
    attempt("--report", [&] {
      RunReport report;
      report.title = fmt::format("gpemu torch: {} on {}x {}", settings_.script.empty() ? "script" : settings_.script,
                                 settings_.gpus, gpu_->name);
      auto fixed = [](std::optional<double> v, const char* unit) {
        return v ? fmt::format("{:.3f}{}", *v, unit) : std::string("n/a");
      };
      report.summary = {{"GPU", gpu_->name},
                        {"clock", std::string(to_string(settings_.clock))},
                        {"emulated time", fixed(summary.elapsed_s, " s")},
                        {"iterations (steps)", fmt::format("{}", summary.iterations)},
                        {"iterations/s", fixed(summary.iterations_per_s, "")},
                        {"forward GPU time per iteration", fixed(summary.forward_ms_mean, " ms")},
                        {"backward GPU time per iteration", fixed(summary.backward_ms_mean, " ms")},
                        {"optimizer GPU time per iteration", fixed(summary.optimizer_ms_mean, " ms")},
                        {"GPU utilization", fixed(summary.gpu_util_pct, " %")},
                        {"peak allocated", fixed(summary.peak_allocated_mib, " MiB")},
                        {"peak reserved", fixed(summary.peak_reserved_mib, " MiB")},
                        {"kernels", fmt::format("{}", summary.kernels)},
                        {"collectives", fmt::format("{}", summary.collectives)}};
      const double elapsed = summary.elapsed_s;
      std::map<int, std::vector<BusyInterval>> busy;
      for (const TraceRecord& r : records)
        if (r.category == "kernel") busy[r.device].push_back({r.start, r.end});
      Time end = 0;
      for (const TraceRecord& r : records) end = std::max(end, r.end);
      for (const Row& row : rows) {
        const TorchDeviceRecord& d = *row.stats;
        if (d.kernels == 0 && d.collective_busy == 0) continue;
        const double compute = to_seconds(row.rank->compute_busy);
        report.breakdown.push_back({row.label,
                                    {{"compute", compute},
                                     {"H2D", to_seconds(d.h2d_busy)},
                                     {"D2H", to_seconds(d.d2h_busy)},
                                     {"communication", to_seconds(d.collective_busy)},
                                     {"idle", std::max(0.0, elapsed - compute)}}});
        const auto& intervals = busy[row.device];
        if (end > 0)
          report.utilization.push_back(
              utilization_from_intervals(row.label, intervals, std::max<Duration>(end / 100, 1), 0, end));
      }
      report.configuration = configuration_rows(
          nlohmann::json{{"gpu", gpu_->id},
                         {"gpus", settings_.gpus},
                         {"clock", std::string(to_string(settings_.clock))},
                         {"model_correction", settings_.model.empty() ? "none" : settings_.model},
                         {"processes", summary.processes.empty() ? std::size_t{1} : summary.processes.size()}});
      report.notes = {
          "Times are gpemu's emulated GPU times (docs/torch.md): each op priced by the analytical model, "
          "collectives by the interconnect model.",
          "Breakdown: busy time of each engine; engines and streams overlap, so the parts may sum to more than "
          "the run's time. Idle: the run's time less compute."};
      write_html_report_file(report, *settings_.report);
    });
  report_failures();
}

}  // namespace gpemu::torch_backend
