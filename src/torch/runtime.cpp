#include "torch/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpemu/error.h"
#include "gpemu/zoo.h"
#include "share/serve.h"
#include "torch/load_adjusted_clock.h"
#include "torch/settings.h"

namespace gpemu::torch_backend {

namespace {

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

}  // namespace

using detail::client_name;
using detail::LoadAdjustedClock;

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

}  // namespace gpemu::torch_backend
