#include "torch/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/zoo.h"

namespace gpemu::torch_backend {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// The collectives the process group charges, by name; static, as trace tags
// keep the name beyond the call.
std::string_view collective_name(std::string_view kind) {
  for (std::string_view k : {"all_reduce", "broadcast", "all_gather", "reduce_scatter"})
    if (k == kind) return k;
  throw InputError(fmt::format("collective '{}': expected all_reduce, broadcast, all_gather or reduce_scatter", kind));
}

}  // namespace

Settings Settings::from_env() {
  Settings s;
  if (auto v = env("GPEMU_TORCH_GPU")) {
    if (try_find_gpu(*v) == nullptr)
      throw InputError(fmt::format("GPEMU_TORCH_GPU '{}': not a catalogued GPU (`gpemu devices` lists them)", *v));
    s.gpu = *v;
  }
  if (auto v = env("GPEMU_TORCH_GPUS")) {
    int n = 0;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || end != v->data() + v->size() || n < 1 || n > kMaxTorchGpus)
      throw InputError(fmt::format("GPEMU_TORCH_GPUS '{}': expected a whole number from 1 to {}", *v, kMaxTorchGpus));
    s.gpus = n;
  }
  if (auto v = env("GPEMU_TORCH_CLOCK")) {
    if (*v != "real" && *v != "virtual")
      throw InputError(fmt::format("GPEMU_TORCH_CLOCK '{}': expected 'real' or 'virtual'", *v));
    s.clock = parse_clock_kind(*v);
  }
  if (auto v = env("GPEMU_TORCH_JSON")) s.json = *v;
  if (auto v = env("GPEMU_TORCH_TRACE")) s.trace = *v;
  if (auto v = env("GPEMU_TORCH_MODEL")) {
    if (!zoo::has_model(*v))
      throw InputError(fmt::format("GPEMU_TORCH_MODEL '{}': not a model of the zoo (`gpemu models` lists them)", *v));
    s.model = *v;
  }
  return s;
}

Runtime::Runtime(Settings settings)
    : settings_(std::move(settings)),
      gpu_(&find_gpu(settings_.gpu)),
      clock_(make_clock(settings_.clock)),
      timeline_(std::make_unique<Timeline>(*clock_)) {
  if (settings_.gpus < 1 || settings_.gpus > kMaxTorchGpus)
    throw InputError(fmt::format("gpus {}: expected 1 to {}", settings_.gpus, kMaxTorchGpus));
  timeline_->enable_trace(settings_.trace.has_value());
  for (int i = 0; i < settings_.gpus; ++i) {
    DeviceOptions o;
    o.index = i;
    devices_.push_back(std::make_unique<Device>(*timeline_, *gpu_, o));
    streams_.push_back({&devices_.back()->default_stream()});
  }
  const auto calibration = load_default_calibration();
  factors_ = calibration->factors(*gpu_);
  if (!settings_.model.empty()) correction_ = calibration->correction(zoo::canonical_name(settings_.model));
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
  devices_.clear();  // the devices' work ends before the timeline goes
}

Runtime& Runtime::instance() {
  // Leaked on purpose: PyTorch's tensors (and their deleters, which return
  // blocks to these devices' allocators) may outlive static destruction.
  static Runtime* runtime = new Runtime(Settings::from_env());
  return *runtime;
}

Device& Runtime::device(int index) {
  if (index < 0 || index >= device_count())
    throw InputError(fmt::format("CUDA device {}: this run emulates {} GPU{} (gpemu torch --gpus)", index,
                                 device_count(), device_count() == 1 ? "" : "s"));
  return *devices_[static_cast<std::size_t>(index)];
}

Stream& Runtime::stream(int device_index, std::int64_t id) {
  (void)device(device_index);  // InputError naming a device out of range
  std::lock_guard lock(mutex_);
  const auto& list = streams_[static_cast<std::size_t>(device_index)];
  if (id < 0 || id >= static_cast<std::int64_t>(list.size()))
    throw InputError(fmt::format("CUDA stream {} on device {}: no such stream", id, device_index));
  return *list[static_cast<std::size_t>(id)];
}

std::int64_t Runtime::create_stream(int device_index) {
  Device& d = device(device_index);
  std::lock_guard lock(mutex_);
  auto& list = streams_[static_cast<std::size_t>(device_index)];
  // PyTorch's streams (torch.cuda.Stream, the pool) are non-blocking: no
  // implicit ordering with the default stream.
  list.push_back(&d.create_stream(/*non_blocking=*/true));
  return static_cast<std::int64_t>(list.size()) - 1;
}

const GpuPeaks& Runtime::peaks(bool tf32_conv, bool tf32_matmul) const {
  return peaks_[tf32_conv ? 1 : 0][tf32_matmul ? 1 : 0];
}

void Runtime::pace_host(double seconds) {
  const Duration launch = from_seconds(seconds);
  Time until = 0;
  {
    std::lock_guard lock(mutex_);
    const Time now = clock_->now();
    if (clock_->is_virtual()) {
      // The host's emulated time is all there is: each op costs its launch.
      host_ready_ = std::max(host_ready_, now) + launch;
    } else {
      // The script's Python, torch's dispatch and the emulator's own work
      // are real time already spent on this op: the op costs the larger of
      // that and its launch cost, not their sum.
      host_ready_ = std::max(host_ready_ + launch, now);
    }
    until = host_ready_;
  }
  clock_->sleep_until(until);
}

void Runtime::issue(int device_index, std::int64_t stream_id, const OpProgram::Op& op, std::string_view name,
                    bool tf32_conv, bool tf32_matmul) {
  Stream& s = stream(device_index, stream_id);
  const bool forward = op.section == OpProgram::Section::Forward || op.section == OpProgram::Section::Loss;
  pace_host(op_launch_seconds(op, factors_) * (forward ? correction_.forward_host : correction_.backward_host));
  {
    std::lock_guard lock(mutex_);
    if (op.kind == OpProgram::Kind::View) {
      ++counters_.views;
      return;
    }
    ++counters_.kernels;
  }
  const double seconds = op_kernel_seconds(op, 0, peaks(tf32_conv, tf32_matmul), factors_) *
                         (forward ? correction_.forward_gpu : correction_.backward_gpu);
  s.launch_kernel(from_seconds(seconds), name);
}

void Runtime::copy(int device_index, std::int64_t stream_id, bool to_device, std::uint64_t bytes, bool pinned) {
  Stream& s = stream(device_index, stream_id);
  {
    std::lock_guard lock(mutex_);
    ++(to_device ? counters_.h2d : counters_.d2h);
    if (!pinned) ++counters_.blocking_syncs;
  }
  const HostMemoryKind kind = pinned ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
  if (to_device)
    s.copy_h2d(bytes, kind);
  else
    s.copy_d2h(bytes, kind);
}

void Runtime::synchronize(int device_index, std::int64_t stream_id) {
  Stream& s = stream(device_index, stream_id);
  {
    std::lock_guard lock(mutex_);
    ++counters_.blocking_syncs;
  }
  s.synchronize();
}

void Runtime::synchronize_device(int device_index) {
  Device& d = device(device_index);
  {
    std::lock_guard lock(mutex_);
    ++counters_.blocking_syncs;
  }
  d.synchronize();
}

Duration Runtime::collective_duration(std::string_view kind, std::uint64_t bytes, int world) {
  kind = collective_name(kind);
  if (world < 1) throw InputError(fmt::format("collective {}: world size {} (expected at least 1)", kind, world));
  auto key = std::make_tuple(std::string(kind), bytes, world);
  {
    std::lock_guard lock(mutex_);
    if (const auto it = collective_durations_.find(key); it != collective_durations_.end()) return it->second;
  }
  // The ranks' GPUs as one node of this run's GPU type, alone on a timeline
  // of their own: the ring's time on idle links.
  auto clock = make_virtual_clock();
  Timeline timeline(*clock);
  NodeOptions options;
  options.gpus = world;
  Node node(timeline, *gpu_, options);
  Communicator comm(node);
  std::vector<Stream*> streams;
  for (int r = 0; r < world; ++r) streams.push_back(&node.device(r).default_stream());
  if (kind == "all_reduce")
    comm.all_reduce(streams, bytes);
  else if (kind == "broadcast")
    comm.broadcast(streams, bytes, 0);
  else if (kind == "all_gather")
    comm.all_gather(streams, bytes);
  else
    comm.reduce_scatter(streams, bytes);
  const Duration d = timeline.wait_all();
  std::lock_guard lock(mutex_);
  collective_durations_.emplace(std::move(key), d);
  return d;
}

void Runtime::collective(int device_index, std::int64_t stream_id, std::string_view kind, std::uint64_t bytes,
                         int world, std::int64_t start_shared_ns) {
  kind = collective_name(kind);
  const Duration d = collective_duration(kind, bytes, world);
  Stream& s = stream(device_index, stream_id);
  const auto epoch = clock_->monotonic_epoch_ns();
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
}

std::int64_t Runtime::stream_ready_shared_ns(int device_index, std::int64_t stream_id) {
  Stream& s = stream(device_index, stream_id);
  const Time ready = std::max(timeline_->issue_time(), timeline_->end_time(s.tail()));
  return ready + clock_->monotonic_epoch_ns().value_or(0);
}

RunCounters Runtime::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void Runtime::note_generic(std::string_view op) {
  std::lock_guard lock(mutex_);
  auto it = generic_ops_.find(op);
  if (it == generic_ops_.end())
    generic_ops_.emplace(std::string(op), 1);
  else
    ++it->second;
}

std::string Runtime::summary_json() const {
  nlohmann::json j;
  j["gpu"] = gpu_->id;
  j["gpus"] = settings_.gpus;
  j["clock"] = std::string(to_string(settings_.clock));
  j["model_correction"] = settings_.model.empty() ? nlohmann::json(nullptr) : nlohmann::json(settings_.model);
  j["emulated_seconds"] = to_seconds(clock_->now());
  const RunCounters c = counters();
  j["kernels"] = c.kernels;
  j["view_ops"] = c.views;
  j["h2d_copies"] = c.h2d;
  j["d2h_copies"] = c.d2h;
  j["blocking_syncs"] = c.blocking_syncs;
  j["collectives"] = c.collectives;
  nlohmann::json devs = nlohmann::json::array();
  for (const auto& d : devices_) {
    const AllocatorStats a = d->allocator().stats();
    const DeviceStats& s = d->stats();
    devs.push_back({{"index", d->index()},
                    {"kernels", s.kernels},
                    {"compute_busy_seconds", to_seconds(s.busy[static_cast<int>(Engine::Compute)])},
                    {"h2d_bytes", s.h2d_bytes},
                    {"d2h_bytes", s.d2h_bytes},
                    {"peak_allocated_bytes", a.peak_allocated_bytes},
                    {"peak_reserved_bytes", a.peak_reserved_bytes}});
  }
  j["devices"] = devs;
  nlohmann::json generic = nlohmann::json::object();
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, n] : generic_ops_) generic[name] = n;
  }
  j["ops_through_meta"] = generic;
  return j.dump(2);
}

void Runtime::finish() {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
  }
  if (settings_.json) write_file_atomically(*settings_.json, summary_json() + "\n", "gpemu torch summary");
  if (settings_.trace) {
    std::vector<TraceDeviceName> names;
    for (const auto& d : devices_) names.push_back({d->index(), fmt::format("GPU {} ({})", d->index(), gpu_->id)});
    write_chrome_trace_file(timeline_->trace_records(), timeline_->host_spans(), names, *settings_.trace);
  }
}

}  // namespace gpemu::torch_backend
