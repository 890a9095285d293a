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
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/device/device.h"
#include "gpemu/device/pcie.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

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
