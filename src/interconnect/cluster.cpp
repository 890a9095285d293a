#include "gpemu/interconnect.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/spec_error.h"
#include "interconnect/cluster_collectives.h"

namespace gpemu {

ClusterOptions plan_cluster(int gpus, int nodes, NodeOptions node, NetworkSpec network) {
  if (gpus < 1) throw SpecError("cluster.gpus", std::to_string(gpus), "it must be at least 1");
  if (nodes < 1) throw SpecError("cluster.nodes", std::to_string(nodes), "it must be at least 1");
  if (gpus % nodes != 0)
    throw SpecError("cluster.gpus", std::to_string(gpus),
                    fmt::format("every node holds the same number of GPUs; over {} {}, give a multiple of {}",
                                spec_field("cluster.nodes"), nodes, nodes));
  const int per_node = gpus / nodes;
  if (per_node > kMaxGpusPerNode) {
    const int need = (gpus + kMaxGpusPerNode - 1) / kMaxGpusPerNode;
    throw SpecError("cluster.gpus", std::to_string(gpus),
                    fmt::format("a node holds at most {} GPUs and there {} {} node{}; give {} {} or more (and {} "
                                "25gbe|100gbe|400gbe|FILE) so that each node holds at most {}",
                                kMaxGpusPerNode, nodes == 1 ? "is" : "are", nodes, nodes == 1 ? "" : "s",
                                spec_field("cluster.nodes"), need, spec_field("cluster.network"), kMaxGpusPerNode));
  }
  ClusterOptions o;
  o.nodes = nodes;
  o.node = std::move(node);
  o.node.gpus = per_node;
  o.network = std::move(network);
  return o;
}

namespace {

void check_network(const NetworkSpec& net) {
  if (!(net.line_rate_gbps > 0) || !(net.achievable_fraction > 0 && net.achievable_fraction <= 1))
    throw InputError(
        fmt::format("network '{}': line rate {} Gb/s and achievable fraction {}: need a rate above 0 and a "
                    "fraction in (0, 1]; give --network 25gbe|100gbe|400gbe|FILE",
                    net.name, net.line_rate_gbps, net.achievable_fraction));
  if (net.nics_per_node < 1 || net.switch_oversubscription < 1 || net.latency < 0)
    throw InputError(
        fmt::format("network '{}': nics_per_node {} (at least 1), switch_oversubscription {} (at least 1), "
                    "latency {} ns (at least 0)",
                    net.name, net.nics_per_node, net.switch_oversubscription, net.latency));
}

}  // namespace

NetworkLinks make_network_links(Timeline& timeline, const NetworkSpec& net, int nodes) {
  check_network(net);
  NetworkLinks links;
  links.spec = net;
  const double nic_bps = net.nic_bytes_per_s();
  links.nics.resize(static_cast<std::size_t>(nodes));
  for (int n = 0; n < nodes; ++n)
    for (int i = 0; i < net.nics_per_node; ++i)
      links.nics[n].push_back(&timeline.add_link(fmt::format("node{} NIC{}", n, i), nic_bps));
  links.network_switch =
      &timeline.add_link("network switch", nic_bps * nodes * net.nics_per_node / net.switch_oversubscription);
  return links;
}

Cluster::Cluster(Timeline& timeline, const GpuSpec& spec, ClusterOptions options)
    : timeline_(&timeline), spec_(&spec), options_(std::move(options)) {
  const int m = options_.nodes;
  if (m < 1) throw InputError(fmt::format("cluster of {} nodes: need at least 1", m));
  if (m > 1) check_network(options_.network);  // before any node is made
  for (int n = 0; n < m; ++n) {
    NodeOptions o = options_.node;
    o.first_device_index = options_.node.first_device_index + n * options_.node.gpus;
    nodes_.push_back(std::make_unique<Node>(timeline, spec, o));
  }
  if (m > 1) {
    NetworkLinks net = make_network_links(timeline, options_.network, m);
    nics_ = std::move(net.nics);
    switch_ = net.network_switch;
    for (int n = 0; n < m; ++n) {
      rail_nics_.emplace_back();
      for (int g = 0; g < options_.node.gpus; ++g) rail_nics_[n].push_back(g % options_.network.nics_per_node);
    }
  }
}

Cluster::Cluster(const ClusterGpus& on, DeviceOptions device, int first_device_index) {
  const int m = static_cast<int>(on.nodes.size());
  if (m < 2 || !on.network || on.network_nodes.size() != on.nodes.size())
    throw InputError(
        fmt::format("a cluster view of {} node(s): give two or more, each with its node in the network", m));
  const int per = static_cast<int>(on.nodes.front().gpus.size());
  for (int n = 0; n < m; ++n) {
    const NodeGpus& ng = on.nodes[static_cast<std::size_t>(n)];
    const int at = on.network_nodes[static_cast<std::size_t>(n)];
    if (!ng.node || !ng.timeline || static_cast<int>(ng.gpus.size()) != per || at < 0 ||
        at >= static_cast<int>(on.network->nics.size()))
      throw InputError(fmt::format(
          "a cluster view's node {}: {} GPU(s) (the first has {}), network node {} of {}: give every node the same "
          "GPUs of an existing node of the network",
          n, ng.gpus.size(), per, at, on.network->nics.size()));
    nodes_.push_back(std::make_unique<Node>(ng, device, first_device_index + n * per));
    nics_.push_back(on.network->nics[static_cast<std::size_t>(at)]);
    const int nics = static_cast<int>(nics_.back().size());
    rail_nics_.emplace_back();
    for (const int position : ng.gpus) rail_nics_.back().push_back(position % nics);
  }
  timeline_ = on.nodes.front().timeline;
  spec_ = &nodes_.front()->device(0).spec();
  options_.nodes = m;
  options_.node = nodes_.front()->options();
  options_.node.gpus = per;
  options_.node.first_device_index = first_device_index;
  options_.network = on.network->spec;
  switch_ = on.network->network_switch;
}

Node& Cluster::node(int n) const {
  if (n < 0 || n >= nodes()) throw InputError(fmt::format("node {}: the cluster has nodes 0 to {}", n, nodes() - 1));
  return *nodes_[n];
}

int Cluster::node_of(int rank) const {
  if (rank < 0 || rank >= size())
    throw InputError(fmt::format("GPU {}: the cluster has GPUs 0 to {}", rank, size() - 1));
  return rank / gpus_per_node();
}

int Cluster::local_of(int rank) const { return rank - node_of(rank) * gpus_per_node(); }

Device& Cluster::device(int rank) const { return nodes_[node_of(rank)]->device(local_of(rank)); }

const Link& Cluster::nic(int n, int index) const {
  if (!switch_) throw InputError("a single-node cluster has no network");
  node(n);
  return *nics_[n].at(index);
}

const Link& Cluster::rail_nic(int n, int rail) const {
  if (!switch_) throw InputError("a single-node cluster has no network");
  node(n);
  return *nics_[n].at(static_cast<std::size_t>(rail_nics_[n].at(static_cast<std::size_t>(rail))));
}

const Link& Cluster::network_switch() const {
  if (!switch_) throw InputError("a single-node cluster has no network");
  return *switch_;
}

ClusterCommunicator::ClusterCommunicator(Cluster& cluster) : cluster_(&cluster) {
  for (int n = 0; n < cluster.nodes(); ++n) local_.push_back(std::make_unique<Communicator>(cluster.node(n)));
}

ClusterCommunicator::~ClusterCommunicator() = default;

std::vector<Completion> ClusterCommunicator::all_reduce(std::span<Stream* const> streams, std::uint64_t bytes,
                                                        const CollectiveOptions& o, std::span<const Completion> after) {
  const int m = cluster_->nodes();
  const int l = cluster_->gpus_per_node();
  if (static_cast<int>(streams.size()) != size())
    throw InputError(fmt::format("all_reduce over {} GPUs given {} streams: give one stream per GPU, in rank order",
                                 size(), streams.size()));
  if (!after.empty() && static_cast<int>(after.size()) != size())
    throw InputError(fmt::format("all_reduce over {} GPUs given {} points to start after: give none or one per rank",
                                 size(), after.size()));
  if (m == 1) return local_[0]->all_reduce(streams, bytes, o, after);  // the node's ring, exactly
  for (int r = 0; r < size(); ++r)
    if (!streams[r] || &streams[r]->device() != &cluster_->device(r))
      throw InputError(fmt::format("all_reduce: stream for rank {} is not a stream of GPU {}", r, r));

  const std::string name(o.name.empty() ? std::string_view("all_reduce") : o.name);
  auto node_part = [l](auto span, int n) { return span.subspan(static_cast<std::size_t>(n) * l, l); };
  auto node_after = [&](int n) { return after.empty() ? after : node_part(after, n); };
  const double node_bytes = static_cast<double>(bytes) / l;  // each GPU's share after the reduce-scatter
  // The in-node phases as one transfer per GPU (ring_as_flows), as the network phase: O(1) operations per GPU.
  CollectiveOptions local = o;
  local.ring_as_flows = true;

  // 1. Inside each node: ring reduce-scatter; GPU g then holds 1/L of the sum.
  //    The network starts once every node is done (`scattered`).
  const std::string rs_name = name + " (node reduce-scatter)";
  local.name = rs_name;
  std::vector<Completion> scattered(m);
  for (int n = 0; n < m; ++n)
    scattered[n] =
        local_[n]
            ->run_ring_flows(node_part(streams, n), node_bytes, l - 1, 0, local, "reduce_scatter", node_after(n), false)
            .gate;
  OpSpec barrier;
  barrier.trace = false;
  barrier.tag.name = "network ring entry";
  const Completion entry = cluster_->timeline().issue(barrier, scattered);

  // 2. Across nodes, per rail: all-reduce of the 1/L share over the network.
  const std::vector<Completion> rail_done = network_phase(*cluster_, streams, entry, 2.0 * (m - 1) / m * node_bytes,
                                                          2 * (m - 1), o.engine, name + " (network)");

  // 3. Inside each node: ring all-gather, each GPU once its rail is done.
  std::vector<Completion> done(size());
  const std::string ag_name = name + " (node all-gather)";
  local.name = ag_name;
  for (int n = 0; n < m; ++n) {
    const auto gathered =
        local_[n]->run_ring_flows(node_part(streams, n), node_bytes, 0, l - 1, local, "all_gather", rail_done, true);
    std::copy(gathered.done.begin(), gathered.done.end(), done.begin() + static_cast<std::ptrdiff_t>(n) * l);
  }
  return done;
}

}  // namespace gpemu
