// Nodes joined by a network: the hierarchical all-reduce's exact times under
// the virtual clock, NIC and switch sharing, network presets and files, and
// how the work of resolving it grows with the number of GPUs.
#include <gtest/gtest.h>

#include <fstream>

#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/spec_error.h"
#include "interconnect/cluster_collectives.h"
#include "support/round_numbers.h"
#include "support/temp_dir.h"

namespace gpemu {
namespace {

using gpemu::testing::round_gpu;
using gpemu::testing::round_node;
::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// 4 Gb/s at full efficiency: 0.5 byte/ns per NIC; 2 us per network step.
NetworkSpec round_network(double oversubscription = 1) {
  NetworkSpec n;
  n.name = "round";
  n.line_rate_gbps = 4;
  n.achievable_fraction = 1;
  n.latency = 2000;
  n.switch_oversubscription = oversubscription;
  return n;
}

ClusterOptions round_cluster(int nodes, int per_node, double oversubscription = 1) {
  ClusterOptions o;
  o.nodes = nodes;
  o.node = round_node(per_node);
  o.network = round_network(oversubscription);
  return o;
}

std::vector<Stream*> default_streams(Cluster& c) {
  std::vector<Stream*> s;
  for (int r = 0; r < c.size(); ++r) s.push_back(&c.device(r).default_stream());
  return s;
}

struct ClusterTest : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline{*clock};
};

TEST_F(ClusterTest, TwoNodeHierarchicalAllReduceTakesTheHandComputedTime) {
  Cluster cluster(timeline, round_gpu(), round_cluster(2, 2));
  ClusterCommunicator comm(cluster);
  const auto done = comm.all_reduce(default_streams(cluster), 1'000'000);
  ASSERT_EQ(done.size(), 4u);
  // Node reduce-scatter (2 GPUs): launch 10 us + 1 step of (1 us + 500,000 B at 1 B/ns) = 511,000.
  // Network, per rail: 2(M-1) = 2 steps of 2 us latency, then 2(M-1)/M * B/L = 500,000 B.
  //   NIC 0.5 B/ns shared by the node's 2 rails: 0.25 B/ns each; the switch (2 NICs' worth,
  //   1 B/ns) shared by 4 flows: 0.25 each. 515,000 + 2,000,000 = 2,515,000.
  // Node all-gather: launch 10 us + 1 us + 500,000 = 3,026,000.
  for (const Completion& c : done) EXPECT_EQ(timeline.end_time(c), 3'026'000);
}

// Two jobs' clusters as views of the same two nodes and network (a
// session's): an all-reduce alone takes what it takes on a cluster of its
// own; two at once on one NIC per node share it and the switch. By hand,
// 1 GPU a node, M = 2: each node sends 2(M-1)/M x B = B bytes; alone at the
// NIC's 0.5 B/ns (the switch, 1 B/ns, carries 2 flows: 0.5 each), together
// at 0.25 B/ns (2 flows a NIC, 4 on the switch): B / 0.25 - B / 0.5 = 2B ns
// later. With 2 NICs a node and the jobs on GPUs of different positions (NIC
// 0 and NIC 1), the switch (2 B/ns) carries 4 flows at 0.5: no slower.
TEST_F(ClusterTest, JobsOnTheSameNodesShareTheirNetworksNicsAndSwitch) {
  constexpr std::uint64_t kBytes = 1'000'000;
  auto end_of = [](Timeline& t, const std::vector<Completion>& done) {
    Time end = 0;
    for (const Completion& d : done) end = std::max(end, t.end_time(d));
    return end;
  };
  Time own = 0;
  {
    auto clock2 = make_virtual_clock();
    Timeline t2(*clock2);
    Cluster alone(t2, round_gpu(), round_cluster(2, 1));
    ClusterCommunicator comm(alone);
    own = end_of(t2, comm.all_reduce(default_streams(alone), kBytes));
  }
  for (const int nics : {1, 2}) {
    for (const bool together : {false, true}) {
      auto clock2 = make_virtual_clock();
      Timeline t2(*clock2);
      NodeOptions o = round_node(2);
      o.devices = false;
      std::vector<std::unique_ptr<Node>> nodes;
      for (int n = 0; n < 2; ++n) {
        o.first_device_index = 2 * n;
        nodes.push_back(std::make_unique<Node>(t2, round_gpu(), o));
      }
      NetworkSpec net = round_network();
      net.nics_per_node = nics;
      const NetworkLinks links = make_network_links(t2, net, 2);
      auto view = [&](int position) {
        ClusterGpus on;
        for (int n = 0; n < 2; ++n) {
          on.nodes.push_back(NodeGpus{&t2, nodes[n].get(), {position}, {}});
          on.network_nodes.push_back(n);
        }
        on.network = &links;
        return std::make_unique<Cluster>(on, round_node(1).device, 4 * position);
      };
      auto a = view(0), b = view(1);
      ClusterCommunicator ca(*a), cb(*b);
      ASSERT_EQ(&a->rail_nic(1, 0), links.nics[1][0]);
      ASSERT_EQ(&b->rail_nic(1, 0), links.nics[1][nics - 1]);
      const auto done_a = ca.all_reduce(default_streams(*a), kBytes);
      const auto done_b = together ? cb.all_reduce(default_streams(*b), kBytes) : done_a;
      const Time expected = together && nics == 1 ? own + 2 * static_cast<Time>(kBytes) : own;
      EXPECT_EQ(end_of(t2, done_a), expected) << nics << " NIC(s), together " << together;
      EXPECT_EQ(end_of(t2, done_b), expected) << nics << " NIC(s), together " << together;
    }
  }
  // A view needs two nodes or more of the network's.
  EXPECT_THROW(Cluster(ClusterGpus{}, round_node(1).device), InputError);
}

TEST_F(ClusterTest, FourGpusANodeTakeTheStepsTimeInOperationsPerGpuThatDoNotGrow) {
  Cluster cluster(timeline, round_gpu(), round_cluster(2, 4));
  ClusterCommunicator comm(cluster);
  const auto done = comm.all_reduce(default_streams(cluster), 4'000'000);
  // Node reduce-scatter, as one transfer per GPU: launch 10 us + 3 steps of
  // 1 us, then 3 x 1,000,000 B at 1 B/ns = 3,013,000, as its 3 steps would.
  // Network: 2 steps of 2 us, then 2(M-1)/M * B/L = 1,000,000 B; each NIC
  // (0.5 B/ns) carries its node's 4 rails, 0.125 B/ns each, and the switch
  // (1 B/ns) 8 flows, 0.125 each: 8 ms, to 11,017,000.
  // Node all-gather: 10 us + 3 us + 3,000,000 = 14,030,000.
  for (const Completion& c : done) EXPECT_EQ(timeline.end_time(c), 14'030'000);
  // Per GPU: an entry, a transfer and (all-gather) an exit per in-node phase,
  // and its network transfer; per node four barriers, per rail one.
  EXPECT_EQ(timeline.stats().ops_issued, 8u * 6 + 2 * 4 + 1 + 4);
}

TEST_F(ClusterTest, RanksStartAfterTheirGivenPoints) {
  Cluster cluster(timeline, round_gpu(), round_cluster(2, 2));
  ClusterCommunicator comm(cluster);
  std::vector<Completion> after(4);
  after[3] = cluster.device(3).default_stream().launch_kernel(1'000'000, "backward");
  std::vector<Stream*> comm_streams;
  for (int r = 0; r < 4; ++r) comm_streams.push_back(&cluster.device(r).create_stream());
  const auto done = comm.all_reduce(comm_streams, 1'000'000, {}, after);
  // The hand-computed time above, 1 ms later: GPU 3's node waits for it,
  // and the network for every node.
  for (const Completion& c : done) EXPECT_EQ(timeline.end_time(c), 3'026'000 + 1'000'000);
  EXPECT_THROW(comm.all_reduce(comm_streams, 1, {}, std::span(after).first(2)), InputError);
}

TEST_F(ClusterTest, AnOversubscribedSwitchIsTheBottleneck) {
  Cluster cluster(timeline, round_gpu(), round_cluster(2, 2, /*oversubscription=*/2));
  ClusterCommunicator comm(cluster);
  const auto done = comm.all_reduce(default_streams(cluster), 1'000'000);
  // Switch 0.5 B/ns over 4 flows: 0.125 each, below the NICs' 0.25: 500,000 B take 4 ms.
  for (const Completion& c : done) EXPECT_EQ(timeline.end_time(c), 5'026'000);
}

TEST_F(ClusterTest, OneNodeIsTheNodeRingExactly) {
  Cluster cluster(timeline, round_gpu(), round_cluster(1, 4));
  ClusterCommunicator comm(cluster);
  const auto done = comm.all_reduce(default_streams(cluster), 4'000'000);
  // launch 10 us + 2(N-1) = 6 steps of (1 us + 1,000,000 B at 1 B/ns).
  for (const Completion& c : done) EXPECT_EQ(timeline.end_time(c), 10'000 + 6 * 1'001'000);
  EXPECT_THROW(cluster.network_switch(), InputError);
}

TEST_F(ClusterTest, GpusAreNumberedAcrossNodes) {
  Cluster cluster(timeline, round_gpu(), round_cluster(3, 2));
  EXPECT_EQ(cluster.size(), 6);
  EXPECT_EQ(cluster.device(5).index(), 5);
  EXPECT_EQ(cluster.node_of(5), 2);
  EXPECT_EQ(cluster.local_of(5), 1);
  EXPECT_DOUBLE_EQ(cluster.nic(2, 0).capacity_bytes_per_s(), 0.5e9);
  EXPECT_DOUBLE_EQ(cluster.network_switch().capacity_bytes_per_s(), 1.5e9);
  EXPECT_THROW(cluster.device(6), InputError);
}

TEST(PlanCluster, MoreGpusThanANodeHoldsIsRefusedWithWhatToGive) {
  try {
    plan_cluster(64, 1, NodeOptions{}, network_preset("100gbe"));
    FAIL() << "accepted 64 GPUs on one node";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "cluster.gpus 64"));
    EXPECT_TRUE(contains(e.what(), "cluster.nodes 8"));
  }
  EXPECT_THROW(plan_cluster(12, 5, NodeOptions{}, network_preset("100gbe")), InputError);
  EXPECT_THROW(plan_cluster(8, 0, NodeOptions{}, network_preset("100gbe")), InputError);
  const ClusterOptions o = plan_cluster(1024, 128, NodeOptions{}, network_preset("400gbe"));
  EXPECT_EQ(o.node.gpus, 8);
  EXPECT_EQ(o.nodes, 128);
}

TEST(Network, PresetsCarryLineRateFramingAndSource) {
  const NetworkSpec n = network_preset("100gbe");
  EXPECT_DOUBLE_EQ(n.line_rate_gbps, 100);
  EXPECT_NEAR(n.nic_bytes_per_s(), 12.5e9 * 4096 / 4178, 1);
  EXPECT_EQ(n.latency, 10 * kMicrosecond);
  EXPECT_FALSE(n.source.empty());
  EXPECT_NEAR(network_preset("25gbe").nic_bytes_per_s(), 3.125e9 * 1448 / 1538, 1);
  EXPECT_DOUBLE_EQ(network_preset("400gbe").line_rate_gbps, 400);
  EXPECT_NEAR(network_preset("10gbe").nic_bytes_per_s(), 1.25e9 * 1448 / 1538, 1);  // TCP over 1500-byte frames
  try {
    network_preset("1gbe");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "10gbe, 25gbe, 100gbe, 400gbe"));
  }
}

struct NetworkFile : ::testing::Test {
  gpemu::testing::TempDir dir;
  std::string write(const std::string& text) {
    const std::string p = (dir.path() / "net.json").string();
    std::ofstream(p) << text;
    return p;
  }
};

TEST_F(NetworkFile, ReadsEveryKey) {
  const NetworkSpec n = parse_network(write(
      R"({"name": "ib", "line_rate_gbps": 200, "achievable_fraction": 0.9, "latency_us": 5.5, "nics_per_node": 8,
          "switch_oversubscription": 2, "source": "our cluster"})"));
  EXPECT_EQ(n.name, "ib");
  EXPECT_DOUBLE_EQ(n.nic_bytes_per_s(), 25e9 * 0.9);
  EXPECT_EQ(n.latency, 5500);
  EXPECT_EQ(n.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(n.switch_oversubscription, 2);
  EXPECT_EQ(n.source, "our cluster");
}

TEST_F(NetworkFile, BadInputNamesTheFileAndKey) {
  auto error_of = [&](const std::string& text) {
    try {
      parse_network(write(text));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_TRUE(contains(error_of(R"({"line_rate_gbps": 100, "achievable_fraction": 0.9})"), "missing key 'latency_us'"));
  EXPECT_TRUE(contains(error_of(R"({"line_rate_gbps": 100, "achievable_fraction": 0.9, "latency_us": 1, "mtu": 9000})"),
                       "unknown key 'mtu'"));
  EXPECT_TRUE(contains(error_of(R"({"line_rate_gbps": 100, "achievable_fraction": 1.5, "latency_us": 1})"),
                       "'achievable_fraction' is 1.5"));
  EXPECT_TRUE(contains(error_of(R"({"line_rate_gbps": -1, "achievable_fraction": 1, "latency_us": 1})"),
                       "'line_rate_gbps' is -1"));
  EXPECT_TRUE(contains(error_of(R"({"line_rate_gbps": "fast", "achievable_fraction": 1, "latency_us": 1})"),
                       "'line_rate_gbps' must be a number"));
  EXPECT_TRUE(
      contains(error_of(R"({"line_rate_gbps": 100, "achievable_fraction": 1, "latency_us": 1, "nics_per_node": 1.5})"),
               "whole number"));
  EXPECT_TRUE(contains(error_of(R"({ not json)"), "not valid JSON"));
  EXPECT_TRUE(contains(error_of("[1, 2]"), "expected a JSON object"));
  EXPECT_THROW(parse_network((dir.path() / "missing.json").string()), InputError);
  // An empty name is the spec's cluster.network, not a flag (issue 29).
  try {
    parse_network("");
    ADD_FAILURE() << "an empty name is not a network";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "cluster.network");
    EXPECT_STREQ(e.what(), "job: cluster.network is empty: give 10gbe, 25gbe, 100gbe, 400gbe or a JSON file");
  }
}

// The other collectives over 2 nodes of 2 GPUs, B = 1,000,000 (by hand, as
// the all-reduce above): a node ring phase takes launch 10 us + 1 step of
// (1 us + B/L = 500,000 B at 1 B/ns) = 511,000; a network phase of all
// rails moves (M-1)/M x B/L = 250,000 B per GPU at 0.25 B/ns (2 rails on a
// NIC, 4 flows on the switch) after 1 step of 2 us: 1,002,000.
TEST_F(ClusterTest, ReduceScatterAllGatherAndBroadcastAcrossNodesTakeTheHandComputedTimes) {
  constexpr std::uint64_t kBytes = 1'000'000;
  const auto end_of = [](Timeline& t, const std::vector<Completion>& done) {
    std::vector<Time> ends;
    for (const Completion& c : done) ends.push_back(t.end_time(c));
    return ends;
  };
  {
    // Node reduce-scatter, then the network: 511,000 + 1,002,000.
    Cluster cluster(timeline, round_gpu(), round_cluster(2, 2));
    EXPECT_EQ(end_of(timeline, cluster_reduce_scatter(cluster, default_streams(cluster), kBytes)),
              std::vector<Time>(4, 1'513'000));
  }
  {
    // The network first, then the node all-gather: 1,002,000 + 511,000.
    auto clock2 = make_virtual_clock();
    Timeline t2(*clock2);
    Cluster cluster(t2, round_gpu(), round_cluster(2, 2));
    EXPECT_EQ(end_of(t2, cluster_all_gather(cluster, default_streams(cluster), kBytes)),
              std::vector<Time>(4, 1'513'000));
  }
  {
    // Root 1 (rail 1): one flow per NIC of all B at 0.5 B/ns (the switch's
    // 1 B/ns carries 2): 2 us + 2,000,000; then each node broadcasts from its
    // GPU 1: launch 10 us + 1 hop of (1 us + B at 1 B/ns) = 1,011,000.
    auto clock3 = make_virtual_clock();
    Timeline t3(*clock3);
    Cluster cluster(t3, round_gpu(), round_cluster(2, 2));
    EXPECT_EQ(end_of(t3, cluster_broadcast(cluster, default_streams(cluster), kBytes, 1)),
              std::vector<Time>(4, 3'013'000));
  }
}

// gpemu torch's ranks on 2 nodes of 1 GPU (torchrun's environment) are timed
// as gpemu train --nodes 2 --gpus-per-node 1 runs its all-reduce: a cluster
// laid out by plan_cluster, the hierarchical all-reduce of
// ClusterCommunicator; on one node, as the node's ring.
TEST(CollectiveTimeAlone, TwoNodesOfOneGpuTakeWhatTrainsModelledAllReduceTakes) {
  const GpuSpec& gpu = find_gpu("a100");
  const NetworkSpec network = parse_network("100gbe");
  constexpr std::uint64_t kBytes = 25ull << 20;
  const auto train_side = [&](int gpus, int nodes) {
    auto clock = make_virtual_clock();
    Timeline timeline(*clock);
    Cluster cluster(timeline, gpu, plan_cluster(gpus, nodes, NodeOptions{}, network));
    ClusterCommunicator(cluster).all_reduce(default_streams(cluster), kBytes);
    return timeline.wait_all();
  };
  const Duration two_nodes = collective_time_alone(gpu, "all_reduce", kBytes, 2, 2, network);
  EXPECT_EQ(two_nodes, train_side(2, 2));
  const Duration one_node = collective_time_alone(gpu, "all_reduce", kBytes, 2, 1, network);
  EXPECT_EQ(one_node, train_side(2, 1));
  EXPECT_GT(two_nodes, one_node);  // the network is slower than the node's NVSwitch
  EXPECT_THROW(collective_time_alone(gpu, "all_to_all", kBytes, 2, 2, network), InputError);
  EXPECT_THROW(collective_time_alone(gpu, "all_reduce", kBytes, 3, 2, network), InputError);
}

// Work (not time) to resolve one all-reduce bucket per GPU, over clusters of
// growing size: each GPU's host thread would wait for its result.
std::uint64_t all_reduce_work(int nodes) {
  auto clock = make_virtual_clock();
  Timeline timeline(*clock);
  Cluster cluster(timeline, round_gpu(), round_cluster(nodes, 8));
  ClusterCommunicator comm(cluster);
  const auto streams = default_streams(cluster);
  for (int bucket = 0; bucket < 4; ++bucket) comm.all_reduce(streams, 8'000'000 + bucket * 1000);
  for (Stream* s : streams) timeline.wait(s->tail());
  const TimelineStats st = timeline.stats();
  return st.ops_loaded + st.events + st.flow_rate_updates;
}

TEST(ClusterScaling, ResolutionWorkGrowsAboutLinearlyWithGpus) {
  const double w32 = static_cast<double>(all_reduce_work(4));
  const double w256 = static_cast<double>(all_reduce_work(32));
  // 8x the GPUs: a quadratic resolver does ~64x the work; allow a log factor over 8x.
  EXPECT_LT(w256 / w32, 8 * 1.5) << "work " << w32 << " -> " << w256;
  EXPECT_GT(w256 / w32, 4) << "the counters no longer see the work";
}

}  // namespace
}  // namespace gpemu
