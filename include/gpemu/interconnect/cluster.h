// Several nodes joined by a network, on one Timeline: multi-node
// data-parallel training under the virtual clock.
//
// Each node is a Node (topology.h) with its own NVLink/PCIe fabric. Each node
// has `nics_per_node` NICs, each one Link (its send direction), and all NICs
// hang off one network switch, itself a Link whose capacity is the sum of
// the NICs' divided by the switch's oversubscription. A transfer between
// nodes crosses its sender's NIC and the switch at once (OpSpec::link2), so
// both are shared max-min fairly with every other transfer in the same flow
// simulation as the nodes' own links.
//
// ClusterCommunicator's all-reduce is hierarchical, as in NCCL's and
// Horovod's hierarchical all-reduce: a ring reduce-scatter inside each node,
// then for each local GPU index ("rail") an all-reduce of its 1/L share
// among the nodes over the network, then a ring all-gather inside each node.
// The cross-node ring of M nodes is emulated as one transfer per GPU of the
// ring's total bytes, 2(M-1)/M of the share, after 2(M-1) step latencies,
// started when every node of the rail has arrived and finished for the rail
// when every node's transfer has: the ring's time on links that all the
// rail's nodes load alike, with O(1) operations per GPU instead of O(M).
// docs/interconnect.md has the model, the presets and their sources.
//
// A cluster can also be a job's view of GPUs of nodes that exist already,
// joined by a network that exists already (a session's, session.h): its
// nodes are views of those nodes (Node(NodeGpus, ...)) and its transfers
// cross that network's NICs and switch, so two jobs on the same nodes share
// them max-min as the flows of one job do.
//
// Thread safety: as Node.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/device/device.h"
#include "gpemu/interconnect/collectives.h"
#include "gpemu/interconnect/topology.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

namespace gpemu {

// One NIC type and the switch joining the nodes.
struct NetworkSpec {
  std::string name;                    // preset name, or the file it came from
  double line_rate_gbps = 0;           // per NIC, Gbit/s
  double achievable_fraction = 0;      // of the line rate that payload reaches
  Duration latency = 0;                // per cross-node ring step
  int nics_per_node = 1;               // rail g uses NIC g % nics_per_node
  double switch_oversubscription = 1;  // 1: non-blocking
  std::string source;                  // where the figures come from
  // Payload bandwidth of one NIC, bytes/s.
  double nic_bytes_per_s() const { return line_rate_gbps * 1e9 / 8 * achievable_fraction; }
};

// "10gbe", "25gbe", "100gbe" or "400gbe"; InputError naming the accepted ones.
NetworkSpec network_preset(std::string_view name);
// The names network_preset accepts.
std::vector<std::string_view> network_presets();
// A JSON object with line_rate_gbps, achievable_fraction, latency_us and
// optionally name, nics_per_node, switch_oversubscription, source.
// InputError naming the file and key for anything missing, unknown or out of range.
NetworkSpec load_network_file(const std::string& path);
// A preset name, else a JSON file.
NetworkSpec parse_network(std::string_view preset_or_file);

// A network's links on a timeline: each node's NICs (send direction) and
// the switch joining them, of capacity the NICs' sum / oversubscription.
struct NetworkLinks {
  NetworkSpec spec;
  std::vector<std::vector<const Link*>> nics;  // per node, per NIC
  const Link* network_switch = nullptr;
};
// Adds the links of `network` joining `nodes` nodes to `timeline`.
// InputError for an impossible network (no rate, a fraction outside (0, 1],
// no NIC, an oversubscription below 1, a negative latency).
NetworkLinks make_network_links(Timeline& timeline, const NetworkSpec& network, int nodes);

// GPUs of existing nodes joined by an existing network, that a job's
// cluster is a view of: per job node, the GPUs of one node (NodeGpus with
// its node set, the same count on every node, rank order) and that node's
// index in the network.
struct ClusterGpus {
  std::vector<NodeGpus> nodes;
  std::vector<int> network_nodes;
  const NetworkLinks* network = nullptr;  // null: not a view
};

// Most GPUs one node holds: DGX/HGX baseboards and 8-GPU PCIe servers have 8.
inline constexpr int kMaxGpusPerNode = 8;

struct ClusterOptions {
  int nodes = 1;
  NodeOptions node;     // every node; node.gpus is GPUs per node
  NetworkSpec network;  // used with nodes > 1
};

// Splits `gpus` GPUs over `nodes` nodes. InputError, saying what to give
// instead, when they do not divide evenly or a node would hold more than
// kMaxGpusPerNode.
ClusterOptions plan_cluster(int gpus, int nodes, NodeOptions node, NetworkSpec network);

class Cluster {
 public:
  // InputError for impossible options (see plan_cluster and Node).
  Cluster(Timeline& timeline, const GpuSpec& spec, ClusterOptions options);
  // A view of `on` (top of the file): job node n is on.nodes[n], its devices
  // new, made from `device` with index first_device_index + rank; a rail's
  // NIC is the NIC of its GPU's position in its node. InputError for fewer
  // than two nodes, unequal GPU counts, or a node out of the network's.
  Cluster(const ClusterGpus& on, DeviceOptions device, int first_device_index = 0);
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  Timeline& timeline() const { return *timeline_; }
  const ClusterOptions& options() const { return options_; }
  int nodes() const { return static_cast<int>(nodes_.size()); }
  int gpus_per_node() const { return options_.node.gpus; }
  int size() const { return nodes() * gpus_per_node(); }
  Node& node(int n) const;
  // Global rank = node * gpus_per_node + local index; device indices are global ranks.
  Device& device(int rank) const;
  int node_of(int rank) const;
  int local_of(int rank) const;
  // A node's NIC (send direction); the switch. Only with nodes > 1.
  const Link& nic(int node, int index) const;
  const Link& network_switch() const;
  // The NIC that rail `rail` (a local GPU index) of node `node` sends on.
  const Link& rail_nic(int node, int rail) const;

 private:
  Timeline* timeline_;
  const GpuSpec* spec_;
  ClusterOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::vector<const Link*>> nics_;
  std::vector<std::vector<int>> rail_nics_;  // per node, per rail: its NIC's index
  const Link* switch_ = nullptr;
};

// All GPUs of a cluster, rank = global rank; hierarchical all-reduce (top of file).
class ClusterCommunicator : public AllReduceGroup {
 public:
  explicit ClusterCommunicator(Cluster& cluster);
  ~ClusterCommunicator() override;

  Cluster& cluster() const { return *cluster_; }
  int size() const override { return cluster_->size(); }
  Device& device(int rank) const override { return cluster_->device(rank); }
  std::vector<Completion> all_reduce(std::span<Stream* const> streams, std::uint64_t bytes,
                                     const CollectiveOptions& options = {},
                                     std::span<const Completion> after = {}) override;

 private:
  Cluster* cluster_;
  std::vector<std::unique_ptr<Communicator>> local_;  // per node
};

}  // namespace gpemu
