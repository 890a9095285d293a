#include "interconnect/cluster_collectives.h"

#include <memory>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/interconnect.h"

namespace gpemu {
namespace {

// One zero-time operation on every stream after `deps` (untraced): the
// streams' later work waits for them.
std::vector<Completion> wait_on_streams(std::span<Stream* const> streams, std::span<const Completion> deps,
                                        std::string_view name) {
  std::vector<Completion> done;
  OpSpec marker;
  marker.trace = false;
  marker.tag.name = name;
  for (Stream* s : streams) done.push_back(s->enqueue(marker, std::nullopt, deps));
  return done;
}

// When every stream has reached the collective (their tails so far).
Completion all_entered(Timeline& timeline, std::span<Stream* const> streams, std::string_view name) {
  std::vector<Completion> tails;
  for (Stream* s : streams) tails.push_back(s->tail());
  OpSpec barrier;
  barrier.trace = false;
  barrier.tag.name = name;
  return timeline.issue(barrier, tails);
}

void check_cluster_streams(const Cluster& cluster, std::span<Stream* const> streams, std::string_view what) {
  if (static_cast<int>(streams.size()) != cluster.size())
    throw InputError(fmt::format("{} over {} GPUs given {} streams: give one stream per GPU, in rank order", what,
                                 cluster.size(), streams.size()));
  for (int r = 0; r < cluster.size(); ++r)
    if (!streams[r] || &streams[r]->device() != &cluster.device(r))
      throw InputError(fmt::format("{}: stream for rank {} is not a stream of GPU {}", what, r, r));
}

std::span<Stream* const> node_streams(std::span<Stream* const> streams, const Cluster& cluster, int n) {
  const auto l = static_cast<std::size_t>(cluster.gpus_per_node());
  return streams.subspan(static_cast<std::size_t>(n) * l, l);
}

std::string named(const CollectiveOptions& o, std::string_view what) {
  return std::string(o.name.empty() ? what : o.name);
}

// Each GPU's stream waits for its rail's network phase.
std::vector<Completion> after_rails(const Cluster& cluster, std::span<Stream* const> streams,
                                    const std::vector<Completion>& rail_done, std::string_view name) {
  std::vector<Completion> done;
  for (int r = 0; r < cluster.size(); ++r) {
    const Completion& rail = rail_done[static_cast<std::size_t>(cluster.local_of(r))];
    done.push_back(wait_on_streams(streams.subspan(static_cast<std::size_t>(r), 1), {&rail, 1}, name).front());
  }
  return done;
}

}  // namespace

std::vector<Completion> network_phase(Cluster& cluster, std::span<Stream* const> streams, const Completion& entry,
                                      double bytes, int steps, std::optional<Engine> engine, const std::string& name,
                                      int only_rail) {
  const int m = cluster.nodes();
  const int l = cluster.gpus_per_node();
  const NetworkSpec& net = cluster.options().network;
  std::vector<Completion> rail_done(static_cast<std::size_t>(l));
  std::vector<Completion> sent(static_cast<std::size_t>(m));
  for (int g = 0; g < l; ++g) {
    if (only_rail >= 0 && g != only_rail) continue;
    for (int n = 0; n < m; ++n) {
      Stream& s = *streams[static_cast<std::size_t>(n) * l + g];
      OpSpec flow;
      flow.duration = steps * net.latency;
      flow.link = &cluster.rail_nic(n, g);
      flow.link2 = &cluster.network_switch();
      flow.bytes = bytes;
      // GPUDirect RDMA reads and writes the GPU's memory over its own PCIe lanes.
      flow.rate_cap = s.device().pcie().pinned_gbs * 1e9;
      flow.tag.name = name;
      flow.tag.category = "collective";
      sent[static_cast<std::size_t>(n)] = s.enqueue(flow, engine, std::span<const Completion>(&entry, 1));
    }
    OpSpec all_sent;
    all_sent.trace = false;
    all_sent.tag.name = "network ring exit";
    rail_done[static_cast<std::size_t>(g)] = cluster.timeline().issue(all_sent, sent);
  }
  return rail_done;
}

std::vector<Completion> cluster_reduce_scatter(Cluster& cluster, std::span<Stream* const> streams, std::uint64_t bytes,
                                               const CollectiveOptions& o) {
  check_cluster_streams(cluster, streams, "reduce_scatter");
  const int m = cluster.nodes();
  if (m == 1) return Communicator(cluster.node(0)).reduce_scatter(streams, bytes, o);
  const std::string name = named(o, "reduce_scatter");
  const double share = static_cast<double>(bytes) / cluster.gpus_per_node();
  CollectiveOptions local = o;
  local.ring_as_flows = true;
  const std::string node_name = name + " (node reduce-scatter)";  // local.name is a view: the text must outlive it
  local.name = node_name;
  for (int n = 0; n < m; ++n)
    Communicator(cluster.node(n)).reduce_scatter(node_streams(streams, cluster, n), bytes, local);
  const Completion entry = all_entered(cluster.timeline(), streams, "network ring entry");
  const auto rail_done =
      network_phase(cluster, streams, entry, (m - 1.0) / m * share, m - 1, o.engine, name + " (network)");
  return after_rails(cluster, streams, rail_done, name);
}

std::vector<Completion> cluster_all_gather(Cluster& cluster, std::span<Stream* const> streams, std::uint64_t bytes,
                                           const CollectiveOptions& o) {
  check_cluster_streams(cluster, streams, "all_gather");
  const int m = cluster.nodes();
  if (m == 1) return Communicator(cluster.node(0)).all_gather(streams, bytes, o);
  const std::string name = named(o, "all_gather");
  const double share = static_cast<double>(bytes) / cluster.gpus_per_node();
  const Completion entry = all_entered(cluster.timeline(), streams, "network ring entry");
  const auto rail_done =
      network_phase(cluster, streams, entry, (m - 1.0) / m * share, m - 1, o.engine, name + " (network)");
  after_rails(cluster, streams, rail_done, name);
  CollectiveOptions local = o;
  local.ring_as_flows = true;
  const std::string node_name = name + " (node all-gather)";  // local.name is a view: the text must outlive it
  local.name = node_name;
  std::vector<Completion> done;
  for (int n = 0; n < m; ++n) {
    const auto part = Communicator(cluster.node(n)).all_gather(node_streams(streams, cluster, n), bytes, local);
    done.insert(done.end(), part.begin(), part.end());
  }
  return done;
}

std::vector<Completion> cluster_broadcast(Cluster& cluster, std::span<Stream* const> streams, std::uint64_t bytes,
                                          int root, const CollectiveOptions& o) {
  check_cluster_streams(cluster, streams, "broadcast");
  const int m = cluster.nodes();
  if (root < 0 || root >= cluster.size())
    throw InputError(fmt::format("broadcast root {}: accepted ranks 0 to {}", root, cluster.size() - 1));
  if (m == 1) return Communicator(cluster.node(0)).broadcast(streams, bytes, root, o);
  const std::string name = named(o, "broadcast");
  const int rail = cluster.local_of(root);
  const Completion entry = all_entered(cluster.timeline(), streams, "network ring entry");
  const auto rail_done =
      network_phase(cluster, streams, entry, static_cast<double>(bytes), m - 1, o.engine, name + " (network)", rail);
  wait_on_streams(streams, {&rail_done[static_cast<std::size_t>(rail)], 1}, name);
  CollectiveOptions local = o;
  const std::string node_name = name + " (node broadcast)";  // local.name is a view: the text must outlive it
  local.name = node_name;
  std::vector<Completion> done;
  for (int n = 0; n < m; ++n) {
    const auto part = Communicator(cluster.node(n)).broadcast(node_streams(streams, cluster, n), bytes, rail, local);
    done.insert(done.end(), part.begin(), part.end());
  }
  return done;
}

Duration collective_time_alone(const GpuSpec& gpu, std::string_view kind, std::uint64_t bytes, int ranks, int nodes,
                               const NetworkSpec& network) {
  if (kind != "all_reduce" && kind != "broadcast" && kind != "all_gather" && kind != "reduce_scatter")
    throw InputError(
        fmt::format("collective '{}': expected all_reduce, broadcast, all_gather or reduce_scatter", kind));
  ClusterOptions layout;
  if (nodes == 1) {
    layout.node.gpus = ranks;
  } else {
    layout = plan_cluster(ranks, nodes, NodeOptions{}, network);
  }
  auto clock = make_virtual_clock();
  Timeline timeline(*clock);
  Cluster cluster(timeline, gpu, layout);
  std::vector<Stream*> streams;
  for (int r = 0; r < cluster.size(); ++r) streams.push_back(&cluster.device(r).default_stream());
  if (kind == "all_reduce")
    ClusterCommunicator(cluster).all_reduce(streams, bytes);
  else if (kind == "broadcast")
    cluster_broadcast(cluster, streams, bytes, 0);
  else if (kind == "all_gather")
    cluster_all_gather(cluster, streams, bytes);
  else
    cluster_reduce_scatter(cluster, streams, bytes);
  return timeline.wait_all();
}

}  // namespace gpemu
