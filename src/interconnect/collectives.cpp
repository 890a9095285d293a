#include "gpemu/interconnect.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {

std::string_view to_string(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::Ring: return "ring";
  }
  return "?";
}

namespace {

std::vector<int> all_positions(const Node& node) {
  std::vector<int> v(node.size());
  for (int g = 0; g < node.size(); ++g) v[g] = g;
  return v;
}

// A zero-or-fixed-cost operation marking a rank's entry into, or exit from, a collective.
Completion marker(Stream& s, Duration duration, const std::string& name, const CollectiveOptions& o,
                  std::span<const Completion> deps) {
  OpSpec spec;
  spec.duration = duration;
  spec.tag.name = name;
  spec.tag.category = "collective";
  spec.trace = duration > 0;
  return s.enqueue(spec, o.engine, deps);
}

// Reducing B bytes reads the local and the received data and writes the sum.
constexpr double kReduceTrafficPerByte = 3.0;

// The rate a reducing step is capped at (bytes/s), or 0 for none.
double reduce_rate_cap(const GpuSpec& gpu, const CollectiveOptions& o) {
  const double memory_bps = gpu.memory_bandwidth_gbs * 1e9;
  return o.reduction_cost && memory_bps > 0 ? memory_bps / kReduceTrafficPerByte : 0;
}

// A collective's per-rank `after`: empty, or one per rank.
void check_after(std::span<const Completion> after, int ranks, std::string_view what) {
  if (!after.empty() && static_cast<int>(after.size()) != ranks)
    throw InputError(fmt::format("{} over {} GPUs given {} points to start after: give none or one per rank", what,
                                 ranks, after.size()));
}
std::span<const Completion> after_of(std::span<const Completion> after, int rank) {
  return after.empty() ? std::span<const Completion>() : after.subspan(static_cast<std::size_t>(rank), 1);
}

// `steps` ring steps of chunk_bytes over one hop as one transfer: the steps'
// latencies, then their bytes, capped at the hop's rate and, when reducing,
// at reduce_cap (bytes/s; 0 for none).
OpSpec ring_transfer(const Path& hop, int steps, double chunk_bytes, double reduce_cap, const CollectiveOptions& o,
                     std::string_view name) {
  OpSpec spec;
  spec.duration = steps * o.step_latency.value_or(hop.latency);
  spec.link = hop.link;
  spec.bytes = steps * chunk_bytes;
  spec.rate_cap = hop.rate_cap;
  if (reduce_cap > 0) spec.rate_cap = spec.rate_cap > 0 ? std::min(spec.rate_cap, reduce_cap) : reduce_cap;
  spec.tag.name = name;
  spec.tag.category = "collective";
  return spec;
}

}  // namespace

AllReduceGroup::~AllReduceGroup() = default;
Communicator::~Communicator() = default;

Communicator::Communicator(Node& node) : Communicator(node, all_positions(node)) {}

Communicator::Communicator(Node& node, std::vector<int> gpus)
    : node_(&node), gpus_(std::move(gpus)), ring_(node.plan_ring(gpus_)) {
  rank_at_.resize(gpus_.size());
  for (std::size_t p = 0; p < ring_.order.size(); ++p)
    rank_at_[p] = static_cast<int>(std::find(gpus_.begin(), gpus_.end(), ring_.order[p]) - gpus_.begin());
}

void Communicator::check_streams(std::span<Stream* const> streams, std::string_view what) const {
  if (static_cast<int>(streams.size()) != size())
    throw InputError(fmt::format("{} over {} GPUs given {} streams: give one stream per GPU, in rank order", what,
                                 size(), streams.size()));
  for (int r = 0; r < size(); ++r) {
    const Device& expected = node_->device(gpus_[r]);
    if (!streams[r])
      throw InputError(
          fmt::format("{}: stream for rank {} is null: give a stream of GPU {}", what, r, expected.index()));
    if (&streams[r]->device() != &expected)
      throw InputError(fmt::format("{}: stream for rank {} belongs to GPU {}, not to the rank's GPU {}", what, r,
                                   streams[r]->device().index(), expected.index()));
  }
}

std::vector<Completion> Communicator::run_ring(std::span<Stream* const> streams, double chunk_bytes, int reduce_steps,
                                               int forward_steps, const CollectiveOptions& o, std::string_view what,
                                               std::span<const Completion> after) {
  check_streams(streams, what);
  check_after(after, size(), what);
  if (o.ring_as_flows)
    return run_ring_flows(streams, chunk_bytes, reduce_steps, forward_steps, o, what, after, true).done;
  const int n = size();
  const std::string name(o.name.empty() ? what : o.name);
  const double reduce_cap = reduce_rate_cap(node_->spec(), o);
  auto stream_at = [&](int p) -> Stream& { return *streams[rank_at_[p]]; };

  // Everything below is indexed by ring position.
  std::vector<Completion> entry(n), last(n);
  for (int p = 0; p < n; ++p)
    entry[p] = last[p] = marker(stream_at(p), o.launch_latency, name, o, after_of(after, rank_at_[p]));

  const int steps = n > 1 ? reduce_steps + forward_steps : 0;
  std::vector<Completion> current(n);
  for (int step = 0; step < steps; ++step) {
    // The data of the first reduce_steps steps is reduced into the
    // receiver's chunk as it arrives; NCCL streams the reduction with the
    // transfer (in slices), so it caps the step's rate rather than adding
    // to its time.
    const bool reducing = step < reduce_steps;
    const std::string step_name = fmt::format("{} step {}", name, step);
    for (int p = 0; p < n; ++p) {
      const OpSpec spec = ring_transfer(ring_.hops[p], 1, chunk_bytes, reducing ? reduce_cap : 0, o, step_name);
      // First step: the successor must have reached the collective to
      // receive. Later steps: the predecessor's previous send has arrived.
      const Completion dep = step == 0 ? entry[(p + 1) % n] : last[(p + n - 1) % n];
      current[p] = stream_at(p).enqueue(spec, o.engine, std::span<const Completion>(&dep, 1));
    }
    last.swap(current);
  }

  std::vector<Completion> done(n);
  for (int p = 0; p < n; ++p) {
    if (steps == 0) {
      done[rank_at_[p]] = entry[p];
      continue;
    }
    // A rank is done when its sends are (stream order) and its predecessor's last send has arrived.
    const Completion dep = last[(p + n - 1) % n];
    done[rank_at_[p]] = marker(stream_at(p), 0, name, o, std::span<const Completion>(&dep, 1));
  }
  return done;
}

// The ring's phases as one transfer per GPU each (CollectiveOptions::ring_as_flows).
Communicator::RingFlows Communicator::run_ring_flows(std::span<Stream* const> streams, double chunk_bytes,
                                                     int reduce_steps, int forward_steps, const CollectiveOptions& o,
                                                     std::string_view what, std::span<const Completion> after,
                                                     bool exits) {
  check_streams(streams, what);
  check_after(after, size(), what);
  const int n = size();
  const std::string name(o.name.empty() ? what : o.name);
  const double reduce_cap = reduce_rate_cap(node_->spec(), o);
  Timeline& timeline = node_->timeline();
  auto stream_at = [&](int p) -> Stream& { return *streams[rank_at_[p]]; };

  std::vector<Completion> each(n);
  for (int p = 0; p < n; ++p) each[p] = marker(stream_at(p), o.launch_latency, name, o, after_of(after, rank_at_[p]));
  OpSpec all;
  all.trace = false;
  all.tag.name = "ring phase barrier";
  RingFlows out;
  out.gate = timeline.issue(all, each);  // every GPU has entered
  if (n > 1) {
    for (const auto& [steps, reducing] : {std::pair{reduce_steps, true}, std::pair{forward_steps, false}}) {
      if (steps == 0) continue;
      for (int p = 0; p < n; ++p) {
        const OpSpec spec = ring_transfer(ring_.hops[p], steps, chunk_bytes, reducing ? reduce_cap : 0, o, name);
        each[p] = stream_at(p).enqueue(spec, o.engine, std::span<const Completion>(&out.gate, 1));
      }
      out.gate = timeline.issue(all, each);  // every GPU's phase is done
    }
  }
  if (exits) {
    out.done.resize(n);
    for (int p = 0; p < n; ++p)
      out.done[rank_at_[p]] = marker(stream_at(p), 0, name, o, std::span<const Completion>(&out.gate, 1));
  }
  return out;
}

std::vector<Completion> Communicator::all_reduce(std::span<Stream* const> streams, std::uint64_t bytes,
                                                 const CollectiveOptions& o, std::span<const Completion> after) {
  const int n = size();
  return run_ring(streams, static_cast<double>(bytes) / n, n - 1, n - 1, o, "all_reduce", after);
}

std::vector<Completion> Communicator::reduce_scatter(std::span<Stream* const> streams, std::uint64_t bytes,
                                                     const CollectiveOptions& o) {
  const int n = size();
  return run_ring(streams, static_cast<double>(bytes) / n, n - 1, 0, o, "reduce_scatter");
}

std::vector<Completion> Communicator::all_gather(std::span<Stream* const> streams, std::uint64_t bytes,
                                                 const CollectiveOptions& o) {
  const int n = size();
  return run_ring(streams, static_cast<double>(bytes) / n, 0, n - 1, o, "all_gather");
}

std::vector<Completion> Communicator::broadcast(std::span<Stream* const> streams, std::uint64_t bytes, int root,
                                                const CollectiveOptions& o) {
  check_streams(streams, "broadcast");
  const int n = size();
  if (root < 0 || root >= n) throw InputError(fmt::format("broadcast root {}: accepted ranks 0 to {}", root, n - 1));
  const std::string name(o.name.empty() ? std::string_view("broadcast") : o.name);
  auto stream_at = [&](int p) -> Stream& { return *streams[rank_at_[p]]; };
  const int root_pos = static_cast<int>(std::find(rank_at_.begin(), rank_at_.end(), root) - rank_at_.begin());

  std::vector<Completion> entry(n);
  for (int p = 0; p < n; ++p) entry[p] = marker(stream_at(p), o.launch_latency, name, o, {});
  std::vector<Completion> done(n);
  if (n == 1) {
    done[0] = entry[0];
    return done;
  }

  // Hop h carries data from ring position root+h to root+h+1; each chunk
  // moves on once the previous hop has delivered it.
  const std::uint64_t chunk_limit = std::max<std::uint64_t>(1, o.pipeline_chunk_bytes);
  const std::uint64_t chunks = std::max<std::uint64_t>(1, (bytes + chunk_limit - 1) / chunk_limit);
  const double chunk_bytes = static_cast<double>(bytes) / static_cast<double>(chunks);
  std::vector<Completion> delivered(n - 1);  // latest chunk over each hop
  for (std::uint64_t k = 0; k < chunks; ++k) {
    const std::string chunk_name = fmt::format("{} chunk {}", name, k);
    for (int h = 0; h < n - 1; ++h) {
      const int p = (root_pos + h) % n;
      const Path& hop = ring_.hops[p];
      OpSpec spec;
      spec.duration = o.step_latency.value_or(hop.latency);
      spec.link = hop.link;
      spec.bytes = chunk_bytes;
      spec.rate_cap = hop.rate_cap;
      spec.tag.name = chunk_name;
      spec.tag.category = "collective";
      Completion deps[2];
      std::size_t nd = 0;
      if (k == 0) deps[nd++] = entry[(p + 1) % n];
      if (h > 0) deps[nd++] = delivered[h - 1];
      delivered[h] = stream_at(p).enqueue(spec, o.engine, std::span<const Completion>(deps, nd));
    }
  }
  for (int h = 0; h < n; ++h) {
    const int p = (root_pos + h) % n;
    if (h == 0) {
      done[rank_at_[p]] = marker(stream_at(p), 0, name, o, {});
    } else {
      const Completion dep = delivered[h - 1];
      done[rank_at_[p]] = marker(stream_at(p), 0, name, o, std::span<const Completion>(&dep, 1));
    }
  }
  return done;
}

}  // namespace gpemu
