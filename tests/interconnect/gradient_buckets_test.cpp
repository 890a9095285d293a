// DDP-style gradient buckets: PyTorch's grouping rule, and all-reduce of each
// bucket overlapping the rest of backward, with exact times.
#include <gtest/gtest.h>

#include <stdexcept>

#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "support/round_numbers.h"

namespace gpemu {
namespace {

using gpemu::testing::round_gpu;
using gpemu::testing::round_node;
constexpr std::uint64_t MiB = 1ull << 20;
constexpr Duration ms = kMillisecond;

std::vector<std::vector<int>> groups(const std::vector<GradientBucket>& buckets) {
  std::vector<std::vector<int>> g;
  for (const auto& b : buckets) g.push_back(b.gradients);
  return g;
}

TEST(BucketRule, MatchesDdpOnAHandExample) {
  // Backward order. First limit 1 MiB: 0.5 + 0.25 + 0.5 reaches it at the
  // third gradient. Then 25 MiB: 10 + 10 + 10 reaches it at 30; 3 + 30 at 33
  // (a bucket overshoots by its last gradient); the last 1 MiB remains.
  std::vector<std::uint64_t> sizes{MiB / 2, MiB / 4, MiB / 2, 10 * MiB, 10 * MiB, 10 * MiB, 3 * MiB, 30 * MiB, MiB};
  auto buckets = assign_buckets(sizes, MiB, 25 * MiB);
  EXPECT_EQ(groups(buckets), (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}, {6, 7}, {8}}));
  EXPECT_EQ(buckets[0].bytes, MiB + MiB / 4);
  EXPECT_EQ(buckets[1].bytes, 30 * MiB);
  EXPECT_EQ(buckets[2].bytes, 33 * MiB);
  EXPECT_EQ(buckets[3].bytes, MiB);
}

TEST(BucketRule, ABucketClosesWhenItReachesItsLimitExactly) {
  std::vector<std::uint64_t> sizes{MiB, 25 * MiB, 1, 25 * MiB - 1};
  EXPECT_EQ(groups(assign_buckets(sizes, MiB, 25 * MiB)), (std::vector<std::vector<int>>{{0}, {1}, {2, 3}}));
}

TEST(BucketRule, NoGradientsNoBuckets) { EXPECT_TRUE(assign_buckets({}, MiB, 25 * MiB).empty()); }

struct Buckets : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline{*clock};
  Node node{timeline, round_gpu(), [] {
              NodeOptions o = round_node(2);
              o.nvlink_latency = 0;
              return o;
            }()};
  Communicator comm{node};
  std::vector<Stream*> compute{&node.device(0).create_stream(), &node.device(1).create_stream()};
  std::vector<Stream*> comm_streams{&node.device(0).create_stream(), &node.device(1).create_stream()};

  static BucketOptions options() {
    // All-reducing B bytes over 2 GPUs at 1 byte/ns takes B ns (2 steps of B/2).
    BucketOptions o;
    o.first_bucket_cap_bytes = 2'000'000;
    o.bucket_cap_bytes = 2'000'000;
    o.collective.launch_latency = 0;
    return o;
  }
  void backward(GradientBuckets& buckets, Duration per_layer) {
    for (int g = 0; g < buckets.gradient_count(); ++g) {
      for (Stream* s : compute) s->launch_kernel(per_layer, "backward");
      buckets.gradient_ready(g);
    }
  }
};

TEST_F(Buckets, AllReduceOfEarlyBucketsOverlapsLaterBackward) {
  // Gradients 1, 1, 2, 2 MB: buckets {0,1}, {2}, {3}, 2 MB each (2 ms to all-reduce).
  GradientBuckets buckets(comm, compute, comm_streams, {1'000'000, 1'000'000, 2'000'000, 2'000'000}, options());
  ASSERT_EQ(groups(buckets.buckets()), (std::vector<std::vector<int>>{{0, 1}, {2}, {3}}));
  backward(buckets, 1 * ms);  // layers end at 1, 2, 3, 4 ms
  std::vector<Completion> done = buckets.finish();
  // Bucket 0 is ready at 2 ms (not at 1: it waits for gradient 1) and runs
  // 2-4 ms while layers 2 and 3 compute; bucket 1, ready at 3 ms, waits for
  // the communication stream: 4-6 ms; bucket 2, ready at 4 ms: 6-8 ms.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(timeline.end_time(buckets.all_reduce_of(0)[r]), 4 * ms);
    EXPECT_EQ(timeline.end_time(buckets.all_reduce_of(1)[r]), 6 * ms);
    EXPECT_EQ(timeline.end_time(buckets.all_reduce_of(2)[r]), 8 * ms);
    EXPECT_EQ(timeline.end_time(done[r]), 8 * ms);
  }
  // Serially, backward and communication would take 4 + 6 = 10 ms.
  // The optimizer step on the compute stream waits for the all-reduces.
  Completion step = compute[0]->launch_kernel(ms / 2, "optimizer");
  EXPECT_EQ(timeline.end_time(step), 8 * ms + ms / 2);
}

TEST_F(Buckets, CommunicationBoundBackwardEndsWithTheLastAllReduce) {
  // 1 ms layers, 4 MB buckets (4 ms all-reduce each): the communication
  // stream is the bottleneck from the first bucket on.
  BucketOptions o = options();
  o.first_bucket_cap_bytes = o.bucket_cap_bytes = 4'000'000;
  GradientBuckets buckets(comm, compute, comm_streams, {4'000'000, 4'000'000, 4'000'000, 4'000'000}, o);
  ASSERT_EQ(buckets.buckets().size(), 4u);
  backward(buckets, 1 * ms);
  std::vector<Completion> done = buckets.finish();
  EXPECT_EQ(timeline.end_time(done[0]), 1 * ms + 4 * 4 * ms);
}

TEST_F(Buckets, AStragglerDelaysEveryRank) {
  GradientBuckets buckets(comm, compute, comm_streams, {2'000'000, 2'000'000, 2'000'000, 2'000'000}, options());
  compute[1]->launch_kernel(3 * ms, "slow data");  // GPU1 starts backward 3 ms late
  backward(buckets, 1 * ms);                       // GPU0 layers end 1..4 ms, GPU1 4..7 ms
  std::vector<Completion> done = buckets.finish();
  // Each bucket can start only when GPU1's layer is done: 4, 5, 6, 7 ms; the
  // communication stream runs them back to back from 4 ms, 2 ms each.
  EXPECT_EQ(timeline.end_time(done[0]), 4 * ms + 4 * 2 * ms);
  EXPECT_EQ(timeline.end_time(done[1]), 4 * ms + 4 * 2 * ms);
}

TEST_F(Buckets, BucketsCanBeReusedForTheNextIteration) {
  GradientBuckets buckets(comm, compute, comm_streams, {1'000'000, 1'000'000, 2'000'000, 2'000'000}, options());
  backward(buckets, 1 * ms);
  buckets.finish();
  backward(buckets, 1 * ms);  // layers at 9..12 ms: the compute stream waited for iteration 1's all-reduce
  std::vector<Completion> done = buckets.finish();
  EXPECT_EQ(timeline.end_time(done[0]), 8 * ms + 8 * ms);
}

TEST_F(Buckets, MisuseIsReported) {
  GradientBuckets buckets(comm, compute, comm_streams, {1'000'000, 1'000'000}, options());
  buckets.gradient_ready(0);
  EXPECT_THROW(buckets.gradient_ready(0), std::logic_error);
  EXPECT_THROW(buckets.gradient_ready(2), InputError);
  EXPECT_THROW(buckets.finish(), std::logic_error);
  std::vector<Stream*> wrong{compute[1], compute[0]};
  EXPECT_THROW(GradientBuckets(comm, wrong, comm_streams, {1}), InputError);
}

}  // namespace
}  // namespace gpemu
