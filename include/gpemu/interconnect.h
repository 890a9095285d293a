// GPUs connected: topologies, collectives, DDP gradient buckets and clusters of nodes.
//
// Sections: topology, collectives, gradient buckets, cluster.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/device.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

// ==== topology ====
//
// A node: N emulated GPUs of one type on one Timeline, wired the way a real
// server is. Every piece of hardware that several transfers can cross at once
// is one Link on the timeline, so concurrent transfers share it max-min fairly:
//
//  - PCIe: GPUs sit in groups under PCIe switches (2 per switch by default, as
//    in DGX-1, DGX A100 and common 8-GPU PCIe servers). The switch's uplink to
//    the host root port is one x16 link, so the H2D copies of the GPUs under
//    one switch share one Link, and their D2H copies another. Each GPU's own
//    x16 link is a per-transfer rate cap.
//  - GPU-to-GPU fabric (Fabric): NVSwitch (all-to-all, SXM4/SXM5-class parts),
//    the DGX-1 hybrid cube-mesh of NVLinks (SXM2 V100), NVLink bridges joining
//    pairs of PCIe cards, a full mesh (MI300X Infinity Fabric), or PCIe
//    peer-to-peer through the switch or the host when there is no NVLink.
//    Each GPU's NVLink ports are one egress Link (its total NVLink bandwidth
//    in one direction); a transfer to one peer is capped at the bandwidth of
//    the links to that peer. Peer traffic over PCIe crosses the sending GPU's
//    own lanes (same switch) or its switch's uplink (other switches), the same
//    Link its switch-mates' D2H copies use.
//
// What is simplified and why, with sources: docs/interconnect.md.
//
// Thread safety: as Device. The topology itself is immutable once built.

namespace gpemu {

enum class Fabric {
  Auto,            // from the GpuSpec (see default_fabric)
  NVSwitch,        // every GPU reaches every other through NVSwitches at its full NVLink bandwidth
  HybridCubeMesh,  // DGX-1 (V100 SXM2): 6 NVLinks per GPU in a hybrid cube-mesh, at most 8 GPUs
  NVLinkBridge,    // PCIe cards joined in pairs (0-1, 2-3, ...) by NVLink bridges
  FullMesh,        // a direct link between every pair (MI300X Infinity Fabric), at most 8 GPUs
  Pcie,            // no GPU-to-GPU links: peer traffic over PCIe
};
std::string_view to_string(Fabric f);

// The fabric a server of these GPUs has: Pcie without NVLink, FullMesh for
// AMD parts with Infinity Fabric, NVLinkBridge for PCIe cards with an NVLink
// figure, HybridCubeMesh for Volta/Pascal SXM2, NVSwitch otherwise.
Fabric default_fabric(const GpuSpec& spec);

struct NodeOptions {
  int gpus = 8;
  // GPUs under one PCIe switch, sharing its x16 uplink to the host (GPUs
  // 0-1 under switch 0, 2-3 under switch 1, ...). 1: every GPU has its own
  // root port. The last switch may hold fewer.
  int gpus_per_switch = 2;
  Fabric fabric = Fabric::Auto;
  // Template for every device; index, host_link_h2d and host_link_d2h are set
  // by the node (index = first_device_index + position).
  DeviceOptions device;
  int first_device_index = 0;
  // Switch uplink bandwidth per direction, GB/s. Default: what pinned copies
  // reach on one x16 link of the devices' PCIe generation.
  std::optional<double> switch_uplink_gbs;
  // Total NVLink bandwidth per GPU, both directions summed, GB/s, as
  // GpuSpec::nvlink_gbs. Default: the spec's.
  std::optional<double> nvlink_gbs;
  // Share of the NVLink peak that transfers reach (protocol overhead; NCCL's
  // measured bus bandwidth). Applied to nvlink_gbs, default or given.
  double nvlink_efficiency = 0.8;
  // Latency of one collective step or peer transfer, before its bytes flow.
  Duration nvlink_latency = 3 * kMicrosecond;
  Duration pcie_p2p_latency = 5 * kMicrosecond;
  // false: the links only, no devices (a session's node, session.h: the
  // jobs placed on its GPUs make their devices on views of it, NodeGpus).
  bool devices = true;
};

// What carries the bytes from one GPU to another.
enum class PathKind { Self, NVLink, PcieSwitch, PcieHost };
std::string_view to_string(PathKind k);

struct Path {
  PathKind kind = PathKind::Self;
  const Link* link = nullptr;  // the shared Link the transfer is charged to
  double rate_cap = 0;         // bytes/s this pair reaches alone (0: the link's capacity)
  Duration latency = 0;
  int nvlinks = 0;  // NVLink connections between the pair (0 for NVSwitch: all of them)
};

enum class LinkKind { SwitchUplinkH2D, SwitchUplinkD2H, PcieP2P, NVLink };
std::string_view to_string(LinkKind k);

struct NodeLink {
  LinkKind kind;
  int owner;  // switch index for uplinks, GPU position for the others
  const Link* link;
};

// The ring a collective over a set of GPUs runs on: hops[p] carries data from
// GPU order[p] to GPU order[(p + 1) % n]. Positions are node GPU positions.
struct RingPlan {
  std::vector<int> order;
  std::vector<Path> hops;
  // NVLinks per GPU and direction the ring's traffic spreads over: NCCL runs
  // several rings (channels) over disjoint links, in both directions; the
  // plan stands for all of them with one ring whose hops are capped at this
  // many links' bandwidth. 0 on NVSwitch (the whole egress) and when a hop
  // is not NVLink. See docs/interconnect.md.
  int nvlinks_per_gpu = 0;
};

class Node;

// GPUs of an existing node that a job runs on (a session's, session.h): the
// job's ranks are processes of their own on them, over the node's links.
struct NodeGpus {
  Timeline* timeline = nullptr;  // the GPUs' timeline; null: the job builds its own GPUs
  // The node's links (Node with NodeOptions::devices false, or any node);
  // needed by a job whose ranks move bytes between GPUs (a DDP step). Null:
  // each rank's device has PCIe links of its own (or its shared GPU's).
  const Node* node = nullptr;
  std::vector<int> gpus;  // the node's GPU positions, one per rank, in rank order
  // Per rank, the shared GPU (device.h) its device is a process on; empty:
  // whole cards (a device's memory and compute are its own).
  std::vector<ShareContext> shares;
};

class Node {
 public:
  // InputError for an impossible option (no GPUs, a fabric the GPU lacks the
  // links for, more GPUs than the fabric has places).
  Node(Timeline& timeline, const GpuSpec& spec, NodeOptions options = {});
  // A job's view of some GPUs of another node (`on`): its positions 0..k-1
  // are on.gpus, reached over that node's links (switch uplinks, NVLink,
  // PCIe peer lanes), so two jobs on one node share them; its devices are
  // new (the job's processes), made from `device` with index
  // first_device_index + position, on on.shares' shared GPUs when given.
  // The same node as `on.node` when on.gpus is all of it, in order.
  // InputError for a position out of range or repeated.
  Node(const NodeGpus& on, DeviceOptions device, int first_device_index = 0);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  Timeline& timeline() const { return *timeline_; }
  const GpuSpec& spec() const { return *spec_; }
  const NodeOptions& options() const { return options_; }
  Fabric fabric() const { return fabric_; }
  int size() const { return static_cast<int>(switch_.size()); }
  Device& device(int gpu) const;
  // The GPU position of a device of this node; InputError for a foreign device.
  int position_of(const Device& device) const;

  int switch_count() const { return static_cast<int>(uplink_h2d_.size()); }
  int switch_of(int gpu) const;
  const Link& switch_uplink_h2d(int sw) const;
  const Link& switch_uplink_d2h(int sw) const;
  // The GPU's NVLink egress; nullptr on a Pcie fabric.
  const Link* nvlink_egress(int gpu) const;
  // NVLink connections between two GPUs (0 when none, or on NVSwitch).
  int nvlinks_between(int a, int b) const;
  // NVLink bandwidth per direction of one GPU, and of one of its NVLinks, bytes/s (after efficiency).
  double nvlink_bytes_per_s() const { return nvlink_bps_; }
  double nvlink_link_bytes_per_s() const { return brick_bps_; }

  // Every link the node created, for inspection and tests.
  std::span<const NodeLink> links() const { return links_; }
  int link_count(LinkKind kind) const;

  // The path point-to-point traffic from one GPU to another takes.
  Path path(int from, int to) const;
  // The ring collectives over these GPUs use (node positions, distinct).
  RingPlan plan_ring(std::span<const int> gpus) const;

  // A peer copy (cudaMemcpyPeerAsync) from the stream's device to GPU `to`,
  // on the sender's D2H copy engine.
  Completion copy_peer(Stream& stream, int to, std::uint64_t bytes, std::string_view name = "P2P");

 private:
  void check_gpu(int gpu) const;

  Timeline* timeline_;
  const GpuSpec* spec_;
  NodeOptions options_;
  Fabric fabric_;
  PcieModel pcie_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<int> switch_;  // per GPU
  std::vector<const Link*> uplink_h2d_, uplink_d2h_;
  std::vector<const Link*> egress_;       // per GPU, NVLink
  std::vector<const Link*> p2p_tx_;       // per GPU, PCIe lanes for same-switch peer traffic (may be null)
  std::vector<std::vector<int>> bricks_;  // NVLink connections per pair
  double nvlink_bps_ = 0;
  double brick_bps_ = 0;
  std::vector<NodeLink> links_;
};

}  // namespace gpemu

// ==== collectives ====
//
// Collectives (all-reduce, reduce-scatter, all-gather, broadcast) among GPUs
// of a Node, issued as operations on one stream per GPU, as NCCL does: each
// GPU's part waits for earlier work on its stream, later work on the stream
// waits for it, and work on other streams runs alongside.
//
// Ring algorithm. The GPUs form the node's ring (Node::plan_ring). An
// all-reduce of B bytes over N GPUs takes 2(N-1) steps; in each step every GPU
// sends B/N bytes to its successor over that hop's path, first reducing
// (N-1 steps, reduce-scatter), then forwarding (N-1 steps, all-gather). A
// step on a GPU starts when its own previous step is done and its
// predecessor's previous step (the data it forwards) has arrived, so a late
// GPU delays the whole ring, as with NCCL. The first step also waits for the
// successor to reach the collective (it must be receiving), and a GPU's part
// ends when its last step is done and its last data has arrived.
// Time, on idle links: launch_latency + 2(N-1) * (step_latency + B/N / bw).
//
// Collective transfers use no copy engine (NCCL moves data with SM threads)
// and, by default, no compute engine either: NCCL kernels take a few SMs and
// run concurrently with compute kernels, which is what lets gradient
// all-reduce overlap backward. CollectiveOptions::engine puts them on an
// engine instead. Details and what is left out: docs/interconnect.md.
//
// Thread safety: as Stream; a Communicator is used by one host thread at a time.

namespace gpemu {

enum class CollectiveAlgorithm { Ring };
std::string_view to_string(CollectiveAlgorithm a);

struct CollectiveOptions {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
  // Fixed cost of starting the collective on each GPU (kernel launch, setup).
  Duration launch_latency = 10 * kMicrosecond;
  // Latency of each step before its bytes flow. Default: the hop's path latency.
  std::optional<Duration> step_latency;
  // Reduction steps read the local and the received chunk and write the
  // result: 3 bytes of memory traffic per byte reduced, which caps a reducing
  // step at memory bandwidth / 3. Off: data moves at link speed only.
  bool reduction_cost = true;
  // Engine the steps occupy; none by default (see top of file).
  std::optional<Engine> engine;
  // Ring collectives (all_reduce, reduce_scatter, all_gather) emulated as one
  // transfer per GPU and phase instead of one per step: each GPU moves its
  // phase's bytes, steps x B/N, over its ring hop after steps x the step
  // latency, starting when every GPU has entered the phase and done, for
  // every GPU, when all have. The same time as the steps when the GPUs enter
  // together and each hop's rate holds for the phase; a late GPU then delays
  // the whole phase rather than the steps after it. O(1) operations per GPU
  // instead of O(N): the cluster's in-node phases use it (docs/interconnect.md).
  bool ring_as_flows = false;
  // Broadcast is pipelined in chunks of this size along the ring.
  std::uint64_t pipeline_chunk_bytes = 4ull << 20;
  // Trace name; default the collective's ("all_reduce", ...).
  std::string_view name;
};

// What data-parallel training needs of a group of GPUs: its ranks' devices
// and an all-reduce over them (one node's ring, or a cluster's hierarchy).
class AllReduceGroup {
 public:
  virtual ~AllReduceGroup();
  virtual int size() const = 0;
  virtual Device& device(int rank) const = 0;
  // Sum of `bytes` on every rank, result on every rank; one Completion per rank.
  // With `after` (one per rank, or empty), rank r also starts only after
  // after[r], as if its stream had waited for it (DDP: the point where the
  // rank's backward produced the bucket), without an operation for the wait.
  virtual std::vector<Completion> all_reduce(std::span<Stream* const> streams, std::uint64_t bytes,
                                             const CollectiveOptions& options = {},
                                             std::span<const Completion> after = {}) = 0;
};

// The GPUs a collective runs among, in rank order, and the ring it uses (like
// an ncclComm). Streams are passed per call, one per rank.
class Communicator : public AllReduceGroup {
 public:
  // All GPUs of the node, rank = position.
  explicit Communicator(Node& node);
  // These node positions as ranks 0..n-1 (InputError for unknown or repeated GPUs).
  Communicator(Node& node, std::vector<int> gpus);
  ~Communicator() override;

  Node& node() const { return *node_; }
  int size() const override { return static_cast<int>(gpus_.size()); }
  Device& device(int rank) const override { return node_->device(gpus_.at(rank)); }
  const std::vector<int>& gpus() const { return gpus_; }
  const RingPlan& ring() const { return ring_; }

  // Each returns one Completion per rank: when that rank's part is done (its
  // stream's tail afterwards). streams[r] must be a stream of rank r's device.
  //
  // Sum of `bytes` on every rank, result on every rank.
  std::vector<Completion> all_reduce(std::span<Stream* const> streams, std::uint64_t bytes,
                                     const CollectiveOptions& options = {},
                                     std::span<const Completion> after = {}) override;
  // Each rank ends with the reduction of its 1/N share of `bytes` (the input size).
  std::vector<Completion> reduce_scatter(std::span<Stream* const> streams, std::uint64_t bytes,
                                         const CollectiveOptions& options = {});
  // Each rank contributes bytes/N; every rank ends with all `bytes` (the output size).
  std::vector<Completion> all_gather(std::span<Stream* const> streams, std::uint64_t bytes,
                                     const CollectiveOptions& options = {});
  // `bytes` from rank `root` to every rank, pipelined along the ring from the root.
  std::vector<Completion> broadcast(std::span<Stream* const> streams, std::uint64_t bytes, int root,
                                    const CollectiveOptions& options = {});

 private:
  friend class ClusterCommunicator;
  void check_streams(std::span<Stream* const> streams, std::string_view what) const;
  // Ranks enter after their stream's tail and after[r] (when `after` is not empty).
  std::vector<Completion> run_ring(std::span<Stream* const> streams, double chunk_bytes, int reduce_steps,
                                   int forward_steps, const CollectiveOptions& options, std::string_view what,
                                   std::span<const Completion> after = {});
  // The ring as flows (CollectiveOptions::ring_as_flows). `gate` completes
  // when every rank's part has; with exits, each rank's stream then gets a
  // marker that ends there (`done`, per rank); without, the streams' tails
  // are their own last transfer and a caller composing a larger collective
  // orders what follows after the gate.
  struct RingFlows {
    std::vector<Completion> done;
    Completion gate;
  };
  RingFlows run_ring_flows(std::span<Stream* const> streams, double chunk_bytes, int reduce_steps, int forward_steps,
                           const CollectiveOptions& options, std::string_view what, std::span<const Completion> after,
                           bool exits);

  Node* node_;
  std::vector<int> gpus_;
  RingPlan ring_;
  std::vector<int> rank_at_;  // ring position -> rank
};

}  // namespace gpemu

// ==== gradient buckets ====
//
// Gradient bucketing as PyTorch DistributedDataParallel does it: gradients,
// in the order backward produces them, are grouped into buckets of about
// bucket_cap bytes (25 MiB by default; the first bucket 1 MiB, so
// communication starts early), and each bucket is all-reduced on a
// communication stream as soon as the backward kernels that produce its
// gradients have run, so communication overlaps the rest of backward.
//
// A training loop, per iteration and on every GPU's compute stream:
//
//   for each gradient g in backward order:
//     launch the backward kernel(s) producing g      (each rank's compute stream)
//     buckets.gradient_ready(g);
//   std::vector<Completion> done = buckets.finish();
//   launch the optimizer step                         (waits for `done` by stream order)
//
// gradient_ready records an event on each compute stream; the bucket's
// all-reduce waits for those events on the communication streams. Buckets are
// launched in order, as DDP does. finish() makes each compute stream wait for
// the communication stream (as DDP's end of backward does), so the optimizer
// step orders after the all-reduces without blocking the host, and returns
// each rank's last all-reduce completion. Then the next iteration may start.
//
// Thread safety: one host thread at a time, as the streams it uses.

namespace gpemu {

struct GradientBucket {
  std::vector<int> gradients;  // gradient indices, in backward order
  std::uint64_t bytes = 0;
};

// PyTorch DDP's rule (steady state, after its first-iteration rebuild): walk
// the gradients in backward order adding each to the open bucket; when the
// bucket reaches its limit (>=) it closes, so a bucket may exceed its limit by
// its last gradient. The first bucket's limit is first_bucket_cap_bytes, every
// later one's bucket_cap_bytes. What remains forms the last bucket.
std::vector<GradientBucket> assign_buckets(std::span<const std::uint64_t> gradient_bytes,
                                           std::uint64_t first_bucket_cap_bytes, std::uint64_t bucket_cap_bytes);

struct BucketOptions {
  std::uint64_t bucket_cap_bytes = 25ull << 20;       // DDP bucket_cap_mb=25
  std::uint64_t first_bucket_cap_bytes = 1ull << 20;  // DDP's default first bucket
  CollectiveOptions collective;                       // name is set per bucket
};

class GradientBuckets {
 public:
  // compute_streams[r] and comm_streams[r] are streams of rank r's device.
  // gradient_bytes: per gradient (a parameter tensor, or a layer's gradients
  // together), in backward order. InputError for mismatched streams.
  GradientBuckets(Communicator& comm, std::vector<Stream*> compute_streams, std::vector<Stream*> comm_streams,
                  std::vector<std::uint64_t> gradient_bytes, BucketOptions options = {});
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  int gradient_count() const { return static_cast<int>(bucket_of_.size()); }
  int bucket_of(int gradient) const;

  // The kernels producing `gradient` have been issued on every compute
  // stream. Launches every bucket that is now complete and whose predecessors
  // have been launched. std::logic_error when called twice for one gradient
  // in an iteration; InputError for an unknown gradient.
  void gradient_ready(int gradient);

  // Ends the iteration (see top of file). std::logic_error if some gradient
  // was never reported ready.
  std::vector<Completion> finish();

  // Per-rank completions of a bucket's all-reduce in the current iteration
  // (or the last finished one); empty before the bucket was launched.
  const std::vector<Completion>& all_reduce_of(int bucket) const { return results_.at(bucket); }

 private:
  void launch(int bucket);

  Communicator* comm_;
  std::vector<Stream*> compute_;
  std::vector<Stream*> comm_streams_;
  BucketOptions options_;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<bool> ready_;
  std::vector<std::size_t> ready_count_;          // per bucket
  std::vector<std::vector<Event>> events_;        // [bucket][rank]: compute stream after its gradients
  std::vector<std::vector<Completion>> results_;  // [bucket][rank]
  int next_ = 0;                                  // next bucket to launch
};

}  // namespace gpemu

// ==== cluster ====
//
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
// Thread safety: as Node.

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

 private:
  Timeline* timeline_;
  const GpuSpec* spec_;
  ClusterOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::vector<const Link*>> nics_;
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
