// How a node is wired: which links exist, which transfers share them, and
// which path and ring traffic takes. Times are exact under the virtual clock.
#include <gtest/gtest.h>

#include <set>

#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "support/round_numbers.h"

namespace gpemu {
namespace {

using gpemu::testing::round_node;

NodeOptions with_gpus(int n) {
  NodeOptions o;
  o.gpus = n;
  return o;
}

NodeOptions with_fabric(Fabric f) {
  NodeOptions o;
  o.fabric = f;
  return o;
}

struct Topology : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline{*clock};
};

TEST_F(Topology, DefaultFabricFollowsTheGpu) {
  EXPECT_EQ(default_fabric(find_gpu("V100-SXM2-32GB")), Fabric::HybridCubeMesh);
  EXPECT_EQ(default_fabric(find_gpu("A100-SXM4-40GB")), Fabric::NVSwitch);
  EXPECT_EQ(default_fabric(find_gpu("H100-SXM5-80GB")), Fabric::NVSwitch);
  EXPECT_EQ(default_fabric(find_gpu("B200")), Fabric::NVSwitch);
  EXPECT_EQ(default_fabric(find_gpu("V100-PCIE-32GB")), Fabric::Pcie);
  EXPECT_EQ(default_fabric(find_gpu("T4")), Fabric::Pcie);
  EXPECT_EQ(default_fabric(find_gpu("A100-PCIE-80GB")), Fabric::NVLinkBridge);
  EXPECT_EQ(default_fabric(find_gpu("RTX6000")), Fabric::NVLinkBridge);
  EXPECT_EQ(default_fabric(find_gpu("MI300X")), Fabric::FullMesh);
}

TEST_F(Topology, EightV100Sxm2FormADgx1HybridCubeMesh) {
  Node node(timeline, find_gpu("V100-SXM2-32GB"));
  EXPECT_EQ(node.size(), 8);
  EXPECT_EQ(node.fabric(), Fabric::HybridCubeMesh);
  // 4 PCIe switches with an uplink each way, one NVLink egress per GPU.
  EXPECT_EQ(node.switch_count(), 4);
  EXPECT_EQ(node.link_count(LinkKind::SwitchUplinkH2D), 4);
  EXPECT_EQ(node.link_count(LinkKind::SwitchUplinkD2H), 4);
  EXPECT_EQ(node.link_count(LinkKind::NVLink), 8);
  EXPECT_EQ(node.link_count(LinkKind::PcieP2P), 0);  // switch-mates are NVLink neighbours
  EXPECT_EQ(node.links().size(), 16u);
  // 150 GB/s per direction, 80% of it reached; 6 NVLinks of 25 GB/s.
  EXPECT_DOUBLE_EQ(node.nvlink_egress(0)->capacity_bytes_per_s(), 120e9);
  EXPECT_DOUBLE_EQ(node.nvlink_link_bytes_per_s(), 20e9);
  // Every GPU has 6 NVLinks to 4 neighbours.
  std::set<int> per_gpu;
  int neighbour_pairs = 0;
  for (int a = 0; a < 8; ++a) {
    int links = 0;
    for (int b = 0; b < 8; ++b) {
      links += node.nvlinks_between(a, b);
      EXPECT_EQ(node.nvlinks_between(a, b), node.nvlinks_between(b, a));
      if (a < b && node.nvlinks_between(a, b) > 0) ++neighbour_pairs;
    }
    per_gpu.insert(links);
  }
  EXPECT_EQ(per_gpu, std::set<int>{6});
  EXPECT_EQ(neighbour_pairs, 16);  // 12 cube edges + 4 face diagonals
  Path p03 = node.path(0, 3);
  EXPECT_EQ(p03.kind, PathKind::NVLink);
  EXPECT_EQ(p03.nvlinks, 2);
  EXPECT_DOUBLE_EQ(p03.rate_cap, 40e9);
  EXPECT_EQ(p03.link, node.nvlink_egress(0));
  Path p05 = node.path(0, 5);  // not NVLink neighbours: through the host
  EXPECT_EQ(p05.kind, PathKind::PcieHost);
  EXPECT_EQ(p05.link, &node.switch_uplink_d2h(0));
}

TEST_F(Topology, EightA100Sxm4SitOnNVSwitch) {
  Node node(timeline, find_gpu("A100-SXM4-40GB"));
  EXPECT_EQ(node.fabric(), Fabric::NVSwitch);
  EXPECT_EQ(node.link_count(LinkKind::NVLink), 8);
  EXPECT_EQ(node.link_count(LinkKind::SwitchUplinkH2D), 4);
  EXPECT_EQ(node.link_count(LinkKind::SwitchUplinkD2H), 4);
  EXPECT_EQ(node.link_count(LinkKind::PcieP2P), 0);
  EXPECT_EQ(node.links().size(), 16u);
  EXPECT_DOUBLE_EQ(node.nvlink_egress(3)->capacity_bytes_per_s(), 240e9);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      Path p = node.path(a, b);
      EXPECT_EQ(p.kind, PathKind::NVLink);
      EXPECT_EQ(p.link, node.nvlink_egress(a));
      EXPECT_EQ(p.rate_cap, 0);  // the whole egress
    }
  // Gen4 x16 uplink: 31.5 GB/s raw, 80% for pinned copies.
  EXPECT_NEAR(node.switch_uplink_h2d(0).capacity_bytes_per_s(), 0.8 * 16 * 1.969e9, 1);
}

TEST_F(Topology, EightV100PcieTalkOverPcie) {
  Node node(timeline, find_gpu("V100-PCIE-32GB"));
  EXPECT_EQ(node.fabric(), Fabric::Pcie);
  EXPECT_EQ(node.link_count(LinkKind::NVLink), 0);
  EXPECT_EQ(node.link_count(LinkKind::PcieP2P), 8);
  EXPECT_EQ(node.link_count(LinkKind::SwitchUplinkD2H), 4);
  EXPECT_EQ(node.path(0, 1).kind, PathKind::PcieSwitch);
  EXPECT_EQ(node.path(1, 2).kind, PathKind::PcieHost);
  EXPECT_EQ(node.path(1, 2).link, &node.switch_uplink_d2h(0));
  RingPlan ring = node.plan_ring(std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(ring.nvlinks_per_gpu, 0);
  EXPECT_EQ(ring.hops[0].kind, PathKind::PcieSwitch);
  EXPECT_EQ(ring.hops[1].kind, PathKind::PcieHost);
}

TEST_F(Topology, BridgedPcieCardsUseNVLinkWithinAPairOnly) {
  Node node(timeline, find_gpu("A100-PCIE-80GB"), with_gpus(4));
  EXPECT_EQ(node.fabric(), Fabric::NVLinkBridge);
  EXPECT_EQ(node.path(0, 1).kind, PathKind::NVLink);
  EXPECT_EQ(node.path(2, 3).kind, PathKind::NVLink);
  EXPECT_EQ(node.path(1, 2).kind, PathKind::PcieHost);
  RingPlan pair = node.plan_ring(std::vector<int>{0, 1});
  EXPECT_EQ(pair.nvlinks_per_gpu, 1);
  RingPlan all = node.plan_ring(std::vector<int>{0, 1, 2, 3});
  EXPECT_EQ(all.nvlinks_per_gpu, 0);  // no all-NVLink ring: hops mix NVLink and PCIe
  EXPECT_EQ(all.hops[0].kind, PathKind::NVLink);
  EXPECT_EQ(all.hops[1].kind, PathKind::PcieHost);
}

TEST_F(Topology, RingsOverTheCubeMeshUseEveryNVLinkTheyCan) {
  NodeOptions o;
  o.nvlink_efficiency = 1.0;
  Node node(timeline, find_gpu("V100-SXM2-16GB"), o);
  // All 8: three disjoint Hamiltonian cycles, each run both ways: 6 links.
  RingPlan all = node.plan_ring(std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(all.nvlinks_per_gpu, 6);
  for (int p = 0; p < 8; ++p) {
    EXPECT_EQ(all.hops[p].kind, PathKind::NVLink);
    EXPECT_GT(node.nvlinks_between(all.order[p], all.order[(p + 1) % 8]), 0);
    EXPECT_DOUBLE_EQ(all.hops[p].rate_cap, 150e9);
  }
  // One quad: cycles 0-1-2-3 and 0-2-1-3 fit; a third does not.
  EXPECT_EQ(node.plan_ring(std::vector<int>{0, 1, 2, 3}).nvlinks_per_gpu, 4);
  // A pair: all connections between them.
  EXPECT_EQ(node.plan_ring(std::vector<int>{0, 1}).nvlinks_per_gpu, 1);
  EXPECT_EQ(node.plan_ring(std::vector<int>{0, 3}).nvlinks_per_gpu, 2);
  EXPECT_DOUBLE_EQ(node.plan_ring(std::vector<int>{0, 3}).hops[0].rate_cap, 50e9);
  // Not neighbours: PCIe.
  EXPECT_EQ(node.plan_ring(std::vector<int>{0, 5}).hops[0].kind, PathKind::PcieHost);
}

TEST_F(Topology, Mi300xFullMeshRingsUseSixOfSevenLinks) {
  Node node(timeline, find_gpu("MI300X"));
  EXPECT_EQ(node.fabric(), Fabric::FullMesh);
  RingPlan all = node.plan_ring(std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(all.nvlinks_per_gpu, 6);  // K8 = 3 Hamiltonian cycles + a perfect matching
}

TEST_F(Topology, TwoGpusUnderOneSwitchShareItsHostLink) {
  NodeOptions o = round_node(2);
  Node node(timeline, testing::round_gpu(), o);
  ASSERT_EQ(node.switch_of(0), node.switch_of(1));
  Completion a = node.device(0).default_stream().copy_h2d(1'000'000, HostMemoryKind::Pinned);
  Completion b = node.device(1).default_stream().copy_h2d(1'000'000, HostMemoryKind::Pinned);
  // Each alone would take 1 ms at 1 byte/ns; together they get half each.
  EXPECT_EQ(timeline.end_time(a), 2'000'000);
  EXPECT_EQ(timeline.end_time(b), 2'000'000);
}

TEST_F(Topology, GpusOnTheirOwnRootPortsDoNotShare) {
  NodeOptions o = round_node(2);
  o.gpus_per_switch = 1;
  Node node(timeline, testing::round_gpu(), o);
  Completion a = node.device(0).default_stream().copy_h2d(1'000'000, HostMemoryKind::Pinned);
  Completion b = node.device(1).default_stream().copy_h2d(1'000'000, HostMemoryKind::Pinned);
  EXPECT_EQ(timeline.end_time(a), 1'000'000);
  EXPECT_EQ(timeline.end_time(b), 1'000'000);
}

TEST_F(Topology, PeerTrafficLeavingASwitchSharesItsUplinkWithD2HCopies) {
  NodeOptions o = round_node(4, Fabric::Pcie);
  o.pcie_p2p_latency = 0;
  Node node(timeline, testing::round_gpu(), o);
  // GPU1 -> GPU2 crosses switch 0's uplink, as GPU0's D2H copy does.
  Completion peer = node.copy_peer(node.device(1).default_stream(), 2, 1'000'000);
  Completion d2h = node.device(0).default_stream().copy_d2h(1'000'000, HostMemoryKind::Pinned);
  EXPECT_EQ(timeline.end_time(peer), 2'000'000);
  EXPECT_EQ(timeline.end_time(d2h), 2'000'000);
  // GPU2 -> GPU3 stays inside switch 1.
  Completion local = node.copy_peer(node.device(2).default_stream(), 3, 1'000'000);
  EXPECT_EQ(timeline.end_time(local), 1'000'000);
}

TEST_F(Topology, PeerCopiesOverTheCubeMeshRunAtTheirPairsBandwidth) {
  NodeOptions o;
  o.nvlink_efficiency = 1.0;
  o.nvlink_latency = 0;
  Node node(timeline, find_gpu("V100-SXM2-16GB"), o);
  Stream& a = node.device(0).create_stream();
  Stream& b = node.device(0).create_stream();
  // One NVLink (25 GB/s) to GPU1, two to GPU3; the copies run concurrently
  // on different streams but serialise on GPU0's outgoing copy engine.
  Completion c1 = node.copy_peer(a, 1, 25'000'000);
  EXPECT_EQ(timeline.end_time(c1), 1'000'000);
  Completion c3 = node.copy_peer(b, 3, 25'000'000);
  EXPECT_EQ(timeline.end_time(c3), 1'500'000);
}

TEST_F(Topology, ImpossibleOptionsAreRejected) {
  EXPECT_THROW(Node(timeline, find_gpu("V100-PCIE-32GB"), with_fabric(Fabric::NVSwitch)), InputError);
  EXPECT_THROW(Node(timeline, find_gpu("V100-SXM2-32GB"), with_gpus(16)), InputError);
  EXPECT_THROW(Node(timeline, find_gpu("A100-SXM4-40GB"), with_gpus(0)), InputError);
  Node node(timeline, find_gpu("A100-SXM4-40GB"), with_gpus(2));
  EXPECT_THROW(node.device(2), InputError);
  EXPECT_THROW(node.plan_ring(std::vector<int>{0, 0}), InputError);
  EXPECT_THROW(node.copy_peer(node.device(0).default_stream(), 0, 1), InputError);
}

}  // namespace
}  // namespace gpemu
