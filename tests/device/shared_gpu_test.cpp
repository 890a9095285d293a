// A GPU several processes share (device.h, "sharing"): the compute link's
// share rules, exact under the virtual clock; one card's memory drawn by
// several allocators; MIG slices.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gpemu/catalog.h"
#include "gpemu/device.h"
#include "gpemu/error.h"

namespace gpemu {
namespace {

struct ShareRules : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline{*clock};
  // One byte per ns: a "transfer" of N bytes is N ns of kernel time alone.
  Completion kernel(const Link& link, double ns, int priority = 0, float sm = 1, float bw = 1,
                    std::span<const Completion> deps = {}) {
    OpSpec o;
    o.link = &link;
    o.bytes = ns;
    o.priority = priority;
    o.sm_demand = sm;
    o.bw_demand = bw;
    o.lower_bound = clock->now();
    return timeline.issue(o, deps);
  }
};

TEST_F(ShareRules, TimeSliceSharesEquallyLessTheSwitchesWhileContended) {
  const Link& gpu = timeline.add_link("gpu", 1e9, true, {ShareRule::TimeSlice, 0.5});
  Completion a = kernel(gpu, 1000);
  Completion b = kernel(gpu, 3000);
  // Both at 0.25/ns until a ends at 4000 (1000 done each); b alone then at 1/ns for 2000.
  EXPECT_EQ(timeline.end_time(a), 4000);
  EXPECT_EQ(timeline.end_time(b), 6000);
}

TEST_F(ShareRules, DemandSlowsEveryoneByTheBusiestResource) {
  const Link& gpu = timeline.add_link("gpu", 1e9, true, {ShareRule::Demand});
  // Compute-bound beside memory-bound: SMs 1.25, bandwidth 1.25 -> 1.25x.
  Completion c = kernel(gpu, 1000, 0, 1.0F, 0.25F);
  Completion m = kernel(gpu, 1000, 0, 0.25F, 1.0F);
  EXPECT_EQ(timeline.end_time(c), 1250);
  EXPECT_EQ(timeline.end_time(m), 1250);
  // Two compute-bound: SMs 2 -> each at half speed.
  clock->sleep_until(10'000);
  Completion x = kernel(gpu, 1000, 0, 1.0F, 0.25F);
  Completion y = kernel(gpu, 1000, 0, 1.0F, 0.25F);
  EXPECT_EQ(timeline.end_time(x), 12'000);
  EXPECT_EQ(timeline.end_time(y), 12'000);
  // Small kernels that fit together do not slow each other.
  clock->sleep_until(20'000);
  Completion s = kernel(gpu, 1000, 0, 0.5F, 0.25F);
  Completion t = kernel(gpu, 1000, 0, 0.5F, 0.5F);
  EXPECT_EQ(timeline.end_time(s), 21'000);
  EXPECT_EQ(timeline.end_time(t), 21'000);
}

TEST_F(ShareRules, PriorityRunsTheHighestFirstAndNeverPreempts) {
  const Link& gpu = timeline.add_link("gpu", 1e9, true, {ShareRule::Priority});
  Completion low = kernel(gpu, 1000, 0);
  Completion high = kernel(gpu, 1000, 5);  // issued second, at the same instant: runs first
  EXPECT_EQ(timeline.end_time(high), 1000);
  EXPECT_EQ(timeline.end_time(low), 2000);

  // A running kernel keeps the GPU when a higher priority arrives.
  clock->sleep_until(10'000);
  Completion running = kernel(gpu, 1000, 0);
  EXPECT_EQ(timeline.end_time(running), 11'000);  // provisional, alone
  clock->sleep_until(10'500);
  Completion urgent = kernel(gpu, 1000, 9);
  EXPECT_EQ(timeline.end_time(running), 11'000);
  EXPECT_EQ(timeline.end_time(urgent), 12'000);
}

TEST_F(ShareRules, PriorityGivesAStreamsNextKernelTheGpuBeforeAWaitingLowerOne) {
  const Link& gpu = timeline.add_link("gpu", 1e9, true, {ShareRule::Priority});
  Completion h1 = kernel(gpu, 1000, 1);
  Completion low = kernel(gpu, 1000, 0);
  const Completion after_h1[] = {h1};
  Completion h2 = kernel(gpu, 1000, 1, 1, 1, after_h1);  // stream order: joins the instant h1 ends
  EXPECT_EQ(timeline.end_time(h1), 1000);
  EXPECT_EQ(timeline.end_time(h2), 2000);
  EXPECT_EQ(timeline.end_time(low), 3000);
}

TEST_F(ShareRules, AnImpossibleEfficiencyIsRefused) {
  EXPECT_THROW(timeline.add_link("gpu", 1e9, true, {ShareRule::TimeSlice, 0}), std::invalid_argument);
  EXPECT_THROW(timeline.add_link("gpu", 1e9, true, {ShareRule::TimeSlice, 1.5}), std::invalid_argument);
}

TEST(DeviceMemory, AllocatorsOfOneCardRunOutTogether) {
  DeviceMemory card(100ull << 20);
  CachingAllocator::Options o;
  o.shared = &card;
  o.capacity_bytes = card.capacity();
  CachingAllocator a(o), b(o);
  a.allocate(60ull << 20);  // a 60 MiB segment
  EXPECT_EQ(card.used(), 60ull << 20);
  EXPECT_THROW(b.allocate(50ull << 20), OutOfMemoryError);
  try {
    b.allocate(50ull << 20);
  } catch (const OutOfMemoryError& e) {
    // The card's free memory, not b's own view of it.
    EXPECT_NE(std::string(e.what()).find("40.00 MiB free"), std::string::npos) << e.what();
  }
  b.allocate(30ull << 20);
  CachingAllocator c(o);
  EXPECT_THROW(c.allocate(8ull << 20), OutOfMemoryError);  // a 20 MiB segment: 60 + 30 + 20 > 100
}

TEST(DeviceMemory, AProcessThatEndsGivesItsMemoryBack) {
  DeviceMemory card(100ull << 20);
  CachingAllocator::Options o;
  o.shared = &card;
  o.capacity_bytes = card.capacity();
  {
    CachingAllocator a(o);
    const auto p = a.allocate(60ull << 20);
    a.free(p);
    EXPECT_EQ(card.used(), 60ull << 20);  // cached, still reserved
  }
  EXPECT_EQ(card.used(), 0u);
  EXPECT_EQ(card.peak_used(), 60ull << 20);
}

TEST(SharedGpuMemory, EachProcessHoldsAContextOnTheCard) {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline(*clock);
  const GpuSpec& v100 = find_gpu("V100-PCIE-16GB");
  SharedGpu gpu(timeline, v100, ShareOptions{.policy = SharePolicy::Mps});
  {
    Device a(timeline, v100, DeviceOptions{.index = 0, .share = {&gpu}});
    Device b(timeline, v100, DeviceOptions{.index = 1, .share = {&gpu}});
    EXPECT_EQ(gpu.memory().used(), 2 * Device::default_context_reserve(v100));
    EXPECT_EQ(a.allocator().capacity(), gpu.memory().capacity());
  }
  EXPECT_EQ(gpu.memory().used(), 0u);
}

TEST(SharedGpuMig, SlicesHaveTheirShareOfSmsAndMemory) {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline(*clock);
  const GpuSpec& a100 = find_gpu("A100-SXM4-40GB");
  SharedGpu gpu(timeline, a100, ShareOptions{.policy = SharePolicy::Mig});
  Device small(timeline, a100, DeviceOptions{.index = 0, .share = {&gpu, 0, "1g.5gb"}});
  Device big(timeline, a100, DeviceOptions{.index = 1, .share = {&gpu, 0, "3g.20gb"}});
  // 1/8 and 4/8 of the card's memory, less a context each.
  EXPECT_LT(small.allocator().capacity(), a100.reported_memory() / 8);
  EXPECT_GT(big.allocator().capacity(), 3 * (a100.reported_memory() / 8));
  // A compute-bound kernel on 1/7 of the SMs takes 7 times as long; a
  // memory-bound one on 1/8 of the bandwidth 8 times.
  EXPECT_EQ(timeline.end_time(small.default_stream().launch_kernel(1000, "k", {1.0F, 0.5F})), 7000);
  EXPECT_EQ(timeline.end_time(big.default_stream().launch_kernel(1000, "k", {0.2F, 1.0F})), 2000);
  // 4 of 7 compute slices are taken: a 4g slice no longer fits.
  EXPECT_THROW((Device(timeline, a100, DeviceOptions{.index = 2, .share = {&gpu, 0, "4g.20gb"}})), InputError);
  EXPECT_THROW(find_mig_profile(a100, "2g.99gb"), InputError);
  EXPECT_THROW((SharedGpu(timeline, find_gpu("V100-PCIE-16GB"), ShareOptions{.policy = SharePolicy::Mig})), InputError);
}

TEST(SharePolicyNames, RoundTripAndRefuseUnknown) {
  for (SharePolicy p :
       {SharePolicy::Fifo, SharePolicy::TimeSlice, SharePolicy::Priority, SharePolicy::Mps, SharePolicy::Mig})
    EXPECT_EQ(parse_share_policy(to_string(p)), p);
  EXPECT_THROW(parse_share_policy("round-robin"), InputError);
}

}  // namespace
}  // namespace gpemu
