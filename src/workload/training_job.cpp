#include <algorithm>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/workload.h"

namespace gpemu {

SyncMode parse_sync_mode(std::string_view s) {
  if (s == "iteration") return SyncMode::EveryIteration;
  if (s == "end") return SyncMode::AtEnd;
  throw InputError(fmt::format("unknown sync mode '{}': accepted 'iteration' (loss.item() every iteration) or 'end'", s));
}

std::string_view to_string(SyncMode m) { return m == SyncMode::EveryIteration ? "iteration" : "end"; }

namespace {
VariationOptions with_cv(VariationOptions v, std::optional<double> measured) {
  if (measured) v.cv = *measured;
  return v;
}
constexpr std::uint64_t kForwardNoise = 1, kBackwardNoise = 2;
}  // namespace

TrainingJob::TrainingJob(Device& device, const CostModel& costs, TrainingOptions options)
    : device_(device),
      options_(std::move(options)),
      cost_(costs.step_cost(device.spec(), options_.model, options_.batch_size)),
      plan_(make_memory_plan(cost_, options_.batch_size)),
      forward_noise_(with_cv(options_.variation, cost_.forward_cv), kForwardNoise),
      backward_noise_(with_cv(options_.variation, cost_.backward_cv), kBackwardNoise) {
  if (options_.iterations < 0)
    throw InputError(fmt::format("iterations {} is impossible: it must be 0 or more", options_.iterations));
  try {
    for (std::uint64_t t : plan_.persistent_tensors) persistent_.push_back(device_.allocator().allocate(t));
  } catch (...) {
    for (auto p : persistent_) device_.allocator().free(p);
    throw;
  }
}

TrainingJob::~TrainingJob() {
  for (auto p : persistent_) device_.allocator().free(p);
}

IterationTiming TrainingJob::step() {
  Stream& s = device_.default_stream();
  CachingAllocator& alloc = device_.allocator();
  const std::int64_t it = iteration_++;
  IterationTiming timing;
  timing.start = device_.timeline().issue_time();
  if (first_issue_ < 0) first_issue_ = timing.start;

  const Time prev_tail_end = device_.timeline().end_time(s.tail());
  std::vector<CachingAllocator::Ptr> live;
  live.reserve(plan_.activation_tensors.size() + 1);
  try {
    live.push_back(alloc.allocate(plan_.input_bytes));
    // x.to(device): a measured transfer time is replayed as is; otherwise the
    // PCIe model moves the bytes.
    const auto measured = options_.host_memory == HostMemoryKind::Pinned ? cost_.transfer_pinned
                                                                          : cost_.transfer_pageable;
    Completion h2d;
    if (measured) {
      OpSpec spec;
      spec.duration = *measured;
      spec.tag.name = "H2D batch";
      spec.tag.category = "h2d";
      h2d = s.enqueue(spec, Engine::CopyH2D);
      if (options_.host_memory == HostMemoryKind::Pageable) device_.timeline().wait(h2d);
    } else {
      h2d = s.copy_h2d(plan_.input_bytes, options_.host_memory, "H2D batch");
    }
    for (std::uint64_t t : plan_.activation_tensors) live.push_back(alloc.allocate(t));
    const Duration fwd = forward_noise_.sample(cost_.forward, it);
    Completion f = s.launch_kernel(fwd, "forward");
    const Duration bwd = backward_noise_.sample(cost_.backward, it);
    Completion b = s.launch_kernel(bwd, "backward+step");
    forward_total_ += fwd;
    backward_total_ += bwd;
    // Frees are host-side and stream-ordered, as in PyTorch: the blocks can
    // be reused by later work on this stream at once.
    for (auto p = live.rbegin(); p != live.rend(); ++p) alloc.free(*p);
    live.clear();
    if (options_.sync == SyncMode::EveryIteration) s.copy_d2h(4, HostMemoryKind::Pageable, "loss.item()");
    timing.h2d_end = device_.timeline().end_time(h2d);
    timing.forward_end = device_.timeline().end_time(f);
    timing.backward_end = device_.timeline().end_time(b);
    h2d_total_ += timing.h2d_end - std::max(timing.start, prev_tail_end);
  } catch (...) {
    for (auto p = live.rbegin(); p != live.rend(); ++p) alloc.free(*p);
    throw;
  }
  return timing;
}

TrainingResult TrainingJob::run(const std::function<void(int)>& on_iteration) {
  for (int i = 0; i < options_.iterations; ++i) {
    step();
    if (on_iteration) on_iteration(i);
  }
  return summarize();
}

TrainingResult TrainingJob::summarize() {
  device_.synchronize();
  TrainingResult r;
  r.iterations = static_cast<int>(iteration_);
  r.samples = iteration_ * options_.batch_size;
  const Time end = device_.timeline().end_time(device_.default_stream().tail());
  r.elapsed = first_issue_ < 0 ? 0 : end - first_issue_;
  const double secs = to_seconds(r.elapsed);
  r.iterations_per_s = secs > 0 ? r.iterations / secs : 0;
  r.samples_per_s = secs > 0 ? static_cast<double>(r.samples) / secs : 0;
  r.gpu_busy_pct = r.elapsed > 0 ? 100.0 * static_cast<double>(device_.stats().busy[0]) / static_cast<double>(r.elapsed) : 0;
  r.forward_total = forward_total_;
  r.backward_total = backward_total_;
  r.h2d_total = h2d_total_;
  const AllocatorStats a = device_.allocator().stats();
  r.peak_allocated_bytes = a.peak_allocated_bytes;
  r.peak_reserved_bytes = a.peak_reserved_bytes;
  r.cost = cost_;
  return r;
}

}  // namespace gpemu
