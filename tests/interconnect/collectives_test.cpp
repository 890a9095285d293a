// Ring collectives on emulated streams: exact times under the virtual clock,
// ordering with kernels, link sharing.
#include <gtest/gtest.h>

#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "support/round_numbers.h"

namespace gpemu {
namespace {

using gpemu::testing::round_gpu;
using gpemu::testing::round_node;
constexpr Duration us = kMicrosecond;
constexpr Duration ms = kMillisecond;

struct Collectives : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline{*clock};

  static CollectiveOptions no_launch() {
    CollectiveOptions o;
    o.launch_latency = 0;
    return o;
  }
  static std::vector<Stream*> default_streams(Node& node) {
    std::vector<Stream*> s;
    for (int g = 0; g < node.size(); ++g) s.push_back(&node.device(g).default_stream());
    return s;
  }
  static std::vector<Stream*> new_streams(Node& node) {
    std::vector<Stream*> s;
    for (int g = 0; g < node.size(); ++g) s.push_back(&node.device(g).create_stream());
    return s;
  }
};

class RingAllReduce : public Collectives, public ::testing::WithParamInterface<int> {};

TEST_P(RingAllReduce, TakesTwoNMinusOneStepsOfOneNthEach) {
  const int n = GetParam();
  Node node(timeline, round_gpu(), round_node(n));
  Communicator comm(node);
  const std::uint64_t bytes = 8'000'000;
  auto done = comm.all_reduce(default_streams(node), bytes, no_launch());
  ASSERT_EQ(done.size(), static_cast<std::size_t>(n));
  // 2(N-1)/N * bytes / (1 byte/ns) + 2(N-1) * 1 us.
  const Duration expected = 2 * (n - 1) * static_cast<Duration>(bytes) / n + 2 * (n - 1) * us;
  for (const Completion& c : done) EXPECT_EQ(timeline.end_time(c), expected);
  node.device(0).synchronize();
  EXPECT_EQ(clock->now(), expected);
}

INSTANTIATE_TEST_SUITE_P(GpuCounts, RingAllReduce, ::testing::Values(2, 4, 8));

TEST_F(Collectives, LaunchLatencyIsPaidOnce) {
  Node node(timeline, round_gpu(), round_node(4));
  Communicator comm(node);
  CollectiveOptions o;
  o.launch_latency = 10 * us;
  auto done = comm.all_reduce(default_streams(node), 4'000'000, o);
  EXPECT_EQ(timeline.end_time(done[2]), 10 * us + 6 * (1'000'000 + us));
}

TEST_F(Collectives, ReductionAtMemorySpeedCapsTheReduceScatterHalf) {
  GpuSpec slow = round_gpu();
  slow.memory_bandwidth_gbs = 1.5;  // reduces 0.5 byte/ns: slower than the 1 byte/ns link
  Node node(timeline, slow, round_node(2));
  Communicator comm(node);
  auto done = comm.all_reduce(default_streams(node), 8'000'000, no_launch());
  // Step 0 (reduced on arrival) at 0.5 byte/ns, step 1 (forwarded) at 1.
  EXPECT_EQ(timeline.end_time(done[0]), (us + 8'000'000) + (us + 4'000'000));
  CollectiveOptions off = no_launch();
  off.reduction_cost = false;
  Timeline t2{*clock};
  Node node2(t2, slow, round_node(2));
  Communicator comm2(node2);
  auto fast = comm2.all_reduce(default_streams(node2), 8'000'000, off);
  EXPECT_EQ(t2.end_time(fast[1]), 2 * (us + 4'000'000));
}

TEST_F(Collectives, WaitsForEarlierWorkAndLaterWorkWaitsForIt) {
  Node node(timeline, round_gpu(), round_node(2));
  Communicator comm(node);
  Stream& s0 = node.device(0).default_stream();
  Stream& s1 = node.device(1).default_stream();
  s0.launch_kernel(5 * ms);  // GPU0 reaches the all-reduce late; GPU1 must wait for it
  std::vector<Stream*> streams{&s0, &s1};
  auto done = comm.all_reduce(streams, 8'000'000, no_launch());
  const Time end = 5 * ms + 2 * (us + 4'000'000);
  EXPECT_EQ(timeline.end_time(done[0]), end);
  EXPECT_EQ(timeline.end_time(done[1]), end);
  Completion after0 = s0.launch_kernel(1 * ms);
  Completion after1 = s1.launch_kernel(1 * ms);
  EXPECT_EQ(timeline.end_time(after0), end + 1 * ms);
  EXPECT_EQ(timeline.end_time(after1), end + 1 * ms);
}

TEST_F(Collectives, ComputeOnOtherStreamsRunsAlongside) {
  Node node(timeline, round_gpu(), round_node(2));
  Communicator comm(node);
  auto comm_streams = new_streams(node);
  auto done = comm.all_reduce(comm_streams, 8'000'000, no_launch());
  Stream& compute = node.device(0).create_stream();
  Completion k = compute.launch_kernel(3 * ms);
  EXPECT_EQ(timeline.end_time(k), 3 * ms);  // not after the all-reduce
  Completion h2d = node.device(0).create_stream().copy_h2d(1'000'000, HostMemoryKind::Pinned);
  EXPECT_EQ(timeline.end_time(h2d), 1 * ms);  // no copy engine taken either
  EXPECT_EQ(timeline.end_time(done[0]), 2 * (us + 4'000'000));
}

TEST_F(Collectives, OnTheComputeEngineTheyExcludeKernels) {
  Node node(timeline, round_gpu(), round_node(2));
  Communicator comm(node);
  CollectiveOptions o = no_launch();
  o.engine = Engine::Compute;
  auto done = comm.all_reduce(new_streams(node), 8'000'000, o);
  Completion k = node.device(0).create_stream().launch_kernel(3 * ms);
  EXPECT_EQ(timeline.end_time(k), timeline.end_time(done[0]) + 3 * ms);
}

TEST_F(Collectives, ConcurrentCollectivesShareTheLinks) {
  Node node(timeline, round_gpu(), round_node(2));
  Communicator comm(node);
  auto a = comm.all_reduce(new_streams(node), 8'000'000, no_launch());
  auto b = comm.all_reduce(new_streams(node), 8'000'000, no_launch());
  // Each step's 4 MB moves at half a byte/ns.
  EXPECT_EQ(timeline.end_time(a[0]), 2 * (us + 8'000'000));
  EXPECT_EQ(timeline.end_time(b[1]), 2 * (us + 8'000'000));
}

TEST_F(Collectives, ReduceScatterAndAllGatherTakeNMinusOneSteps) {
  Node node(timeline, round_gpu(), round_node(4));
  Communicator comm(node);
  auto rs = comm.reduce_scatter(default_streams(node), 4'000'000, no_launch());
  EXPECT_EQ(timeline.end_time(rs[0]), 3 * (us + 1'000'000));
  auto ag = comm.all_gather(default_streams(node), 4'000'000, no_launch());  // after it, same streams
  EXPECT_EQ(timeline.end_time(ag[3]), 6 * (us + 1'000'000));
}

TEST_F(Collectives, BroadcastIsPipelinedAlongTheRing) {
  Node node(timeline, round_gpu(), round_node(4));
  Communicator comm(node);
  CollectiveOptions o = no_launch();
  o.pipeline_chunk_bytes = 1'000'000;
  auto done = comm.broadcast(default_streams(node), 4'000'000, 1, o);
  // Ring from rank 1: 1 -> 2 -> 3 -> 0, one chunk-time per chunk and hop. A
  // rank is done when it has received and passed on every chunk: the root
  // after 4 chunk-times, rank 2 after 5, rank 3 after 6, and rank 0, which
  // only receives, after 6 (chunks + hops - 1).
  const Duration chunk = us + 1'000'000;
  EXPECT_EQ(timeline.end_time(done[1]), 4 * chunk);
  EXPECT_EQ(timeline.end_time(done[2]), 5 * chunk);
  EXPECT_EQ(timeline.end_time(done[3]), 6 * chunk);
  EXPECT_EQ(timeline.end_time(done[0]), 6 * chunk);
}

TEST_F(Collectives, ASubsetOfGpusFormsItsOwnRing) {
  Node node(timeline, round_gpu(), round_node(8));
  Communicator comm(node, {2, 5, 7});
  ASSERT_EQ(comm.size(), 3);
  std::vector<Stream*> streams{&node.device(2).default_stream(), &node.device(5).default_stream(),
                               &node.device(7).default_stream()};
  auto done = comm.all_reduce(streams, 3'000'000, no_launch());
  EXPECT_EQ(timeline.end_time(done[1]), 4 * (us + 1'000'000));
}

TEST_F(Collectives, OneGpuIsANoOp) {
  Node node(timeline, round_gpu(), round_node(1));
  Communicator comm(node);
  auto done = comm.all_reduce(default_streams(node), 8'000'000, no_launch());
  EXPECT_EQ(timeline.end_time(done[0]), 0);
}

TEST_F(Collectives, Dgx1AllReduceRunsAtSixNVLinksPerGpu) {
  NodeOptions o;
  o.nvlink_efficiency = 1.0;
  o.nvlink_latency = 0;
  Node node(timeline, find_gpu("V100-SXM2-16GB"), o);
  Communicator comm(node);
  // 1.2 GB: 150 MB chunks at 150 GB/s, 1 ms per step, 14 steps.
  auto done = comm.all_reduce(default_streams(node), 1'200'000'000, no_launch());
  for (const Completion& c : done) EXPECT_EQ(timeline.end_time(c), 14 * ms);
}

TEST_F(Collectives, PcieRingCrossesSwitchUplinks) {
  // 4 GPUs, 2 per switch: hops 1->2 and 3->0 leave their switch. Each
  // uplink direction carries one of them, so nothing is shared: every hop
  // runs at the GPU's 1 byte/ns.
  Node node(timeline, round_gpu(), round_node(4, Fabric::Pcie));
  Communicator comm(node);
  auto done = comm.all_reduce(default_streams(node), 4'000'000, no_launch());
  EXPECT_EQ(timeline.end_time(done[0]), 6 * (us + 1'000'000));
}

TEST_F(Collectives, PcieRingSlowsDownHostCopiesUnderTheSameSwitch) {
  Node node(timeline, round_gpu(), round_node(4, Fabric::Pcie));
  Communicator comm(node);
  CollectiveOptions o = no_launch();
  o.step_latency = 0;
  auto done = comm.all_reduce(new_streams(node), 4'000'000, o);
  // GPU0's D2H copy shares switch 0's uplink with the ring's hop 1 -> 2.
  Completion d2h = node.device(0).create_stream().copy_d2h(3'000'000, HostMemoryKind::Pinned);
  // Both move half a byte/ns while both run: the copy takes 6 ms, in which
  // hop 1->2 makes 3 steps of 2 ms. The other hops (1 ms a step) wait for
  // it, and after the copy the last 3 steps take 1 ms each: 9 ms in all,
  // where the ring alone takes 6 (the previous test).
  EXPECT_EQ(timeline.end_time(d2h), 6 * ms);
  for (const Completion& c : done) EXPECT_EQ(timeline.end_time(c), 9 * ms);
}

// CollectiveOptions::ring_as_flows: each GPU's steps as one transfer per phase.
TEST_P(RingAllReduce, AsFlowsTakesTheStepsTimeOnAnIdleNodeInFourOperationsPerGpu) {
  const int n = GetParam();
  const std::uint64_t bytes = 8'000'000;
  const Duration expected = 10 * us + 2 * (n - 1) * static_cast<Duration>(bytes) / n + 2 * (n - 1) * us;
  for (const bool flows : {false, true}) {
    Timeline t{*clock};
    Node node(t, round_gpu(), round_node(n));
    Communicator comm(node);
    CollectiveOptions o;
    o.ring_as_flows = flows;
    const auto done = comm.all_reduce(default_streams(node), bytes, o);
    for (const Completion& c : done) EXPECT_EQ(t.end_time(c), expected) << (flows ? "flows" : "steps");
    // Per GPU: entry, a transfer per phase, exit; and three barriers. The
    // steps: entry, 2(N-1) steps, exit.
    const auto ops = static_cast<int>(t.stats().ops_issued);
    EXPECT_EQ(ops, flows ? 4 * n + 3 : 2 * n * n) << (flows ? "flows" : "steps");
  }
}

TEST_F(Collectives, AsFlowsALateGpuHoldsUpTheWholePhase) {
  // GPU 2 enters 5 ms late. With the steps, the others move their first
  // chunks meanwhile; as flows, every GPU waits for it and then takes the
  // whole phase: never earlier than the steps.
  std::vector<Time> steps_end, flows_end;
  for (const bool flows : {false, true}) {
    Timeline t{*clock};
    Node node(t, round_gpu(), round_node(4));
    Communicator comm(node);
    node.device(2).default_stream().launch_kernel(5 * ms, "late");
    CollectiveOptions o = no_launch();
    o.ring_as_flows = flows;
    for (const Completion& c : comm.all_reduce(default_streams(node), 4'000'000, o))
      (flows ? flows_end : steps_end).push_back(t.end_time(c));
  }
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(flows_end[r], 5 * ms + 6 * (us + 1'000'000)) << r;
    EXPECT_LE(steps_end[r], flows_end[r]) << r;
    EXPECT_GT(steps_end[r], 5 * ms) << r;
  }
}

TEST_F(Collectives, AfterDelaysEachRankAsAStreamWaitWouldWithoutAnOperation) {
  for (const bool flows : {false, true}) {
    Timeline t{*clock};
    Node node(t, round_gpu(), round_node(2));
    Communicator comm(node);
    const auto streams = new_streams(node);
    // Rank 1's gradients are ready after a 3 ms kernel on its compute stream.
    const std::vector<Completion> after{Completion{}, node.device(1).default_stream().launch_kernel(3 * ms, "bwd")};
    CollectiveOptions o = no_launch();
    o.ring_as_flows = flows;
    const std::uint64_t before = t.stats().ops_issued;
    const auto done = comm.all_reduce(streams, 2'000'000, o, after);
    // Both start at 3 ms (rank 0's first step sends to rank 1): 2 steps of 1 us + 1 ms.
    for (const Completion& c : done) EXPECT_EQ(t.end_time(c), 3 * ms + 2 * (us + 1'000'000));
    EXPECT_EQ(t.stats().ops_issued - before, flows ? 4u * 2 + 3 : 2u * 2 * 2);
    EXPECT_THROW(comm.all_reduce(streams, 1, o, std::span(after).first(1)), InputError);
  }
}

TEST_F(Collectives, MismatchedStreamsAreRejected) {
  Node node(timeline, round_gpu(), round_node(2));
  Communicator comm(node);
  std::vector<Stream*> one{&node.device(0).default_stream()};
  EXPECT_THROW(comm.all_reduce(one, 1), InputError);
  std::vector<Stream*> swapped{&node.device(1).default_stream(), &node.device(0).default_stream()};
  EXPECT_THROW(comm.all_reduce(swapped, 1), InputError);
  EXPECT_THROW(comm.broadcast(default_streams(node), 1, 2), InputError);
  EXPECT_THROW(Communicator(node, {0, 0}), InputError);
}

}  // namespace
}  // namespace gpemu
