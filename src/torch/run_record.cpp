// What the torch runtime counts of the process's run (ops, copies, syncs,
// steps, ops through the meta path) and the run as a typed record
// (TorchRunRecord, torch/summary.h).
#include "torch/runtime.h"

#include <fmt/format.h>

#include <algorithm>

#include "gpemu/error.h"
#include "torch/load_adjusted_clock.h"

namespace gpemu::torch_backend {

using detail::LoadAdjustedClock;

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

void Runtime::note_generic(std::string_view op) {
  std::lock_guard lock(mutex_);
  auto it = generic_ops_.find(op);
  if (it == generic_ops_.end())
    generic_ops_.emplace(std::string(op), 1);
  else
    ++it->second;
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

}  // namespace gpemu::torch_backend
