#include "gpemu/device.h"
#include "gpemu/sharing_policy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {

std::string_view to_string(Engine e) {
  switch (e) {
    case Engine::Compute: return "compute";
    case Engine::CopyH2D: return "copy H2D";
    case Engine::CopyD2H: return "copy D2H";
  }
  return "?";
}

std::uint64_t Device::default_context_reserve(const GpuSpec& spec) {
  // What torch.cuda.mem_get_info() shows missing right after the first CUDA
  // call, beyond the tensors: context, module images, cuBLAS/cuDNN handles.
  // It grows with newer architectures and CUDA versions; see docs/device.md.
  const std::string& a = spec.architecture;
  constexpr std::uint64_t MiB = 1ull << 20;
  if (a == "Kepler" || a == "Maxwell" || a == "Pascal") return 300 * MiB;
  if (a == "Volta" || a == "Turing") return 400 * MiB;
  if (a == "Ampere" || a == "Ada") return 500 * MiB;
  return 600 * MiB;  // Hopper, Blackwell, CDNA3
}

std::uint64_t Device::tensor_capacity(const GpuSpec& spec, std::uint64_t context_reserve, double workspace_margin) {
  if (!(workspace_margin >= 0) || !std::isfinite(workspace_margin))
    throw InputError(fmt::format("workspace/fragmentation margin {} is impossible: it must be >= 0", workspace_margin));
  const std::uint64_t total = spec.reported_memory();
  if (total <= context_reserve) return 0;
  return static_cast<std::uint64_t>(static_cast<double>(total - context_reserve) / (1.0 + workspace_margin));
}

namespace {
const MigProfile* take_mig(const DeviceOptions& o) {
  if (!o.share.gpu || !o.share.gpu->slices()) return nullptr;
  return &o.share.gpu->take_slice(o.share.mig);
}

CachingAllocator::Options allocator_options(const GpuSpec& spec, std::uint64_t reserve, const DeviceOptions& o,
                                            const MigProfile* mig) {
  CachingAllocator::Options a;
  a.capacity_bytes = Device::tensor_capacity(spec, reserve, o.workspace_margin);
  if (mig) {
    // The slice's eighths of the card's memory, less its own context.
    const std::uint64_t slice = spec.reported_memory() / 8 * static_cast<std::uint64_t>(mig->memory_eighths);
    a.capacity_bytes =
        slice <= reserve
            ? 0
            : static_cast<std::uint64_t>(static_cast<double>(slice - reserve) / (1.0 + o.workspace_margin));
  } else if (o.share.gpu) {
    a.shared = &o.share.gpu->memory();
    a.capacity_bytes = a.shared->capacity();
  }
  a.max_split_size_bytes = o.max_split_size_bytes;
  // Every process sees a GPU it shares as its own first device.
  a.device_name = fmt::format("GPU {}", o.share.gpu ? 0 : o.index);
  return a;
}
}  // namespace

Device::Device(Timeline& timeline, const GpuSpec& spec, DeviceOptions options)
    : timeline_(&timeline),
      spec_(&spec),
      index_(options.index),
      context_reserve_(options.context_reserve_bytes.value_or(default_context_reserve(spec))),
      pcie_(options.pcie.value_or(PcieModel::for_link(spec.pcie_gen, spec.pcie_lanes))),
      link_h2d_(options.share.gpu ? &options.share.gpu->host_link_h2d() : options.host_link_h2d),
      link_d2h_(options.share.gpu ? &options.share.gpu->host_link_d2h() : options.host_link_d2h),
      share_(options.share),
      mig_(take_mig(options)),
      allocator_(allocator_options(spec, context_reserve_, options, mig_)) {
  // Each process on a shared GPU holds a CUDA context of its own.
  if (share_.gpu && !mig_ && !share_.gpu->memory().take(context_reserve_)) {
    throw OutOfMemoryError(fmt::format("CUDA error: out of memory (creating GPU {}'s CUDA context of {} on the "
                                       "shared {}: {} of its {} are free)",
                                       index_, CachingAllocator::format_size(context_reserve_), spec.id,
                                       CachingAllocator::format_size(share_.gpu->memory().free()),
                                       CachingAllocator::format_size(share_.gpu->memory().capacity())),
                           context_reserve_);
  }
  // A dedicated link carries only this device's copies, which its copy
  // engine serialises, so transfers over it resolve on issue.
  if (!link_h2d_) link_h2d_ = &timeline.add_link(fmt::format("GPU{} PCIe H2D", index_), pcie_.pinned_gbs * 1e9, false);
  if (!link_d2h_) link_d2h_ = &timeline.add_link(fmt::format("GPU{} PCIe D2H", index_), pcie_.pinned_gbs * 1e9, false);
  streams_.push_back(Stream(this, 0, false));
}

Device::~Device() {
  if (!share_.gpu) return;
  if (mig_) {
    share_.gpu->give_slice(*mig_);
  } else {
    share_.gpu->memory().give(context_reserve_);
  }
}

Stream& Device::create_stream(bool non_blocking) {
  streams_.push_back(Stream(this, static_cast<int>(streams_.size()), non_blocking));
  return streams_.back();
}

Completion Device::enqueue(Stream& s, const OpSpec& in, std::optional<Engine> engine,
                           std::span<const Completion> extra) {
  // Dependencies: stream order, engine availability, legacy default stream
  // ordering, and whatever the caller adds. Kept in a small inline buffer:
  // this is the hot path of every emulated operation.
  constexpr std::size_t kInline = 8;
  Completion inline_deps[kInline];
  std::vector<Completion> heap_deps;
  std::size_t n = 0;
  auto add = [&](const Completion& c) {
    if (c.resolved() && c.known_end() == 0) return;  // an idle stream or engine: no constraint
    if (n < kInline) {
      inline_deps[n++] = c;
    } else {
      if (heap_deps.empty()) heap_deps.assign(inline_deps, inline_deps + n);
      heap_deps.push_back(c);
      ++n;
    }
  };
  add(s.tail_);
  if (engine) add(engine_tail_[static_cast<int>(*engine)]);
  if (s.is_default()) {
    for (Stream& other : streams_)
      if (!other.non_blocking() && other.id_ != 0) add(other.tail_);
  } else if (!s.non_blocking()) {
    add(streams_.front().tail_);
  }
  for (const Completion& c : extra) add(c);
  OpSpec spec = in;
  spec.lower_bound = std::max(spec.lower_bound, timeline_->clock().now());
  spec.tag.device = index_;
  spec.tag.stream = s.id_;
  spec.tag.engine = engine ? static_cast<int>(*engine) : -1;
  Completion c = heap_deps.empty() ? timeline_->issue(spec, std::span<const Completion>(inline_deps, n))
                                   : timeline_->issue(spec, heap_deps);
  s.tail_ = c;
  if (engine) {
    engine_tail_[static_cast<int>(*engine)] = c;
    if (!spec.link) stats_.busy[static_cast<int>(*engine)] += spec.duration;
  }
  return c;
}

Completion Device::copy(Stream& s, Engine engine, std::uint64_t bytes, HostMemoryKind host, std::string_view name) {
  OpSpec spec;
  spec.duration = pcie_.latency(host);
  spec.link = engine == Engine::CopyH2D ? link_h2d_ : link_d2h_;
  spec.bytes = static_cast<double>(bytes);
  spec.rate_cap = pcie_.gbs(host) * 1e9;
  spec.tag.name = name;
  spec.tag.category = engine == Engine::CopyH2D ? "h2d" : "d2h";
  Completion c = enqueue(s, spec, engine, {});
  (engine == Engine::CopyH2D ? stats_.h2d_bytes : stats_.d2h_bytes) += bytes;
  // The driver stages pageable copies through a pinned buffer and returns
  // when the copy is done.
  if (host == HostMemoryKind::Pageable) timeline_->wait(c);
  return c;
}

void Device::synchronize() {
  for (Stream& s : streams_) s.synchronize();
}

Completion Stream::launch_kernel(Duration duration, std::string_view name, KernelDemand demand) {
  OpSpec spec;
  spec.duration = duration;
  spec.tag.name = name;
  spec.tag.category = "kernel";
  ++device_->stats_.kernels;
  if (const MigProfile* mig = device_->mig_) {
    spec.duration = device_->share_.gpu->sharing().kernel_on_slice(duration, demand, *mig);
  } else if (const Link* compute = device_->share_.gpu ? device_->share_.gpu->compute_link() : nullptr) {
    // Nanoseconds of kernel time, shared out by the GPU's policy.
    spec.duration = 0;
    spec.link = compute;
    spec.bytes = static_cast<double>(duration);
    spec.priority = device_->share_.priority;
    spec.sm_demand = demand.sm;
    spec.bw_demand = demand.bw;
    device_->stats_.busy[static_cast<int>(Engine::Compute)] += duration;
  }
  return device_->enqueue(*this, spec, Engine::Compute, {});
}

Completion Stream::copy_h2d(std::uint64_t bytes, HostMemoryKind from, std::string_view name) {
  return device_->copy(*this, Engine::CopyH2D, bytes, from, name);
}

Completion Stream::copy_d2h(std::uint64_t bytes, HostMemoryKind to, std::string_view name) {
  return device_->copy(*this, Engine::CopyD2H, bytes, to, name);
}

Completion Stream::enqueue(const OpSpec& spec, std::optional<Engine> engine, std::span<const Completion> extra) {
  return device_->enqueue(*this, spec, engine, extra);
}

void Stream::record(Event& event) {
  // An event marks the point the stream has reached: a zero-length marker
  // that completes when the stream's earlier work has, or at issue time when
  // the stream is idle.
  OpSpec spec;
  spec.tag.name = "event";
  spec.tag.category = "event";
  spec.tag.device = device_->index_;
  spec.tag.stream = id_;
  spec.lower_bound = device_->timeline_->clock().now();
  spec.trace = false;  // a marker, not work
  Completion deps[1] = {tail_};
  event.completion_ = device_->timeline_->issue(spec, deps);
  event.timeline_ = device_->timeline_;
  event.recorded_ = true;
}

void Stream::wait(const Event& event) {
  if (!event.recorded_) return;  // as CUDA: waiting on a never-recorded event is a no-op
  Completion deps[2] = {tail_, event.completion_};
  OpSpec spec;
  spec.tag.name = "wait";
  spec.tag.category = "event";
  spec.trace = false;
  spec.tag.device = device_->index_;
  spec.tag.stream = id_;
  tail_ = device_->timeline_->issue(spec, deps);
}

void Stream::synchronize() { device_->timeline_->wait(tail_); }

bool Stream::query() { return device_->timeline_->query(tail_); }

bool Event::query() { return !recorded_ || timeline_->query(completion_); }

void Event::synchronize() {
  if (recorded_) timeline_->wait(completion_);
}

Time Event::time() {
  if (!recorded_) throw std::logic_error("Event::time(): event was never recorded");
  return timeline_->wait(completion_);
}

Duration Event::elapsed(Event& start, Event& end) {
  if (!start.recorded_ || !end.recorded_)
    throw std::logic_error("Event::elapsed(): both events must have been recorded");
  return end.time() - start.time();
}

}  // namespace gpemu
