// The torch runtime's collectives: the emulated NCCL process group's
// all_reduce, broadcast, all_gather and reduce_scatter, timed by the
// interconnect model and placed on the streams, and the ready times the
// rank processes share.
#include "torch/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "interconnect/cluster_collectives.h"

namespace gpemu::torch_backend {

namespace {

// The collectives the process group charges, by name; static, as trace tags
// keep the name beyond the call.
std::string_view collective_name(std::string_view kind) {
  for (std::string_view k : {"all_reduce", "broadcast", "all_gather", "reduce_scatter"})
    if (k == kind) return k;
  throw InputError(fmt::format("collective '{}': expected all_reduce, broadcast, all_gather or reduce_scatter", kind));
}

}  // namespace

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

}  // namespace gpemu::torch_backend
