// Several emulated GPUs copying over one host link share its bandwidth
// max-min fairly; times are exact under the virtual clock.
#include <gtest/gtest.h>

#include <cmath>

#include "gpemu/device.h"
#include "support/test_gpu.h"

namespace gpemu {
namespace {

using gpemu::testing::test_gpu;

// A model with round numbers: 1 byte/ns per device alone, no latency.
PcieModel simple_pcie(double gbs) {
  PcieModel p = PcieModel::for_link(3, 16);
  p.pinned_gbs = gbs;
  p.pageable_gbs = gbs / 2;
  p.pinned_latency = p.pageable_latency = 0;
  return p;
}

struct SharedLink : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline{*clock};
  // Host link of 1.5 GB/s shared by devices that reach 1 GB/s each alone.
  const Link& host = timeline.add_link("host", 1.5e9);
  Device make(int i, double gbs = 1.0) {
    return Device(timeline, test_gpu(), DeviceOptions{.index = i, .pcie = simple_pcie(gbs), .host_link_h2d = &host});
  }
};

TEST_F(SharedLink, AloneATransferRunsAtItsOwnCap) {
  Device a = make(0);
  Completion c = a.default_stream().copy_h2d(1'000'000, HostMemoryKind::Pinned);
  EXPECT_EQ(timeline.end_time(c), 1'000'000);
}

TEST_F(SharedLink, TwoConcurrentTransfersSplitTheLinkEvenly) {
  Device a = make(0), b = make(1);
  Completion ca = a.default_stream().copy_h2d(1'500'000, HostMemoryKind::Pinned);
  Completion cb = b.default_stream().copy_h2d(1'500'000, HostMemoryKind::Pinned);
  // 0.75 bytes/ns each.
  EXPECT_EQ(timeline.end_time(ca), 2'000'000);
  EXPECT_EQ(timeline.end_time(cb), 2'000'000);
}

// A dead process's work (N3): cancelled at 500 us, a's transfer gives the link
// back at once, its kernel behind it ends as soon as it may start, and b runs
// alone from then on.
TEST_F(SharedLink, ACancelledTransferEndsNowAndGivesItsShareBack) {
  Device a = make(0), b = make(1);
  Completion ca = a.default_stream().copy_h2d(1'500'000, HostMemoryKind::Pinned);
  Completion ka = a.default_stream().launch_kernel(100'000'000);
  Completion cb = b.default_stream().copy_h2d(1'500'000, HostMemoryKind::Pinned);
  EXPECT_EQ(timeline.end_time(cb), 2'000'000);  // shared to the end, so far
  clock->sleep_until(500'000);
  timeline.cancel(ka);  // not started: ends when ca does
  timeline.cancel(ca);
  EXPECT_EQ(timeline.end_time(ca), 500'000);
  EXPECT_EQ(timeline.end_time(ka), 500'000);
  // b moved 375,000 bytes at 0.75 B/ns, then the rest alone at 1 B/ns.
  EXPECT_EQ(timeline.end_time(cb), 500'000 + 1'125'000);
  // Cancelling what has ended changes nothing.
  clock->sleep_until(2'000'000);
  timeline.cancel(cb);
  EXPECT_EQ(timeline.end_time(cb), 1'625'000);
}

TEST_F(SharedLink, ALaterTransferSlowsAnEarlierOneAndItsDependents) {
  Device a = make(0), b = make(1);
  Completion ca = a.default_stream().copy_h2d(1'000'000, HostMemoryKind::Pinned);
  Completion ka = a.default_stream().launch_kernel(100'000);
  EXPECT_EQ(timeline.end_time(ca), 1'000'000);  // provisional: alone so far
  clock->sleep_until(500'000);
  Completion cb = b.default_stream().copy_h2d(375'000, HostMemoryKind::Pinned);
  // From 500 us both run at 0.75 B/ns: a has 500,000 left; b finishes its
  // 375,000 at 1,000,000; then a runs alone at 1 B/ns for its last 125,000.
  EXPECT_EQ(timeline.end_time(cb), 1'000'000);
  EXPECT_EQ(timeline.end_time(ca), 1'125'000);
  EXPECT_EQ(timeline.end_time(ka), 1'225'000);
  a.synchronize();
  EXPECT_EQ(clock->now(), 1'225'000);
}

TEST_F(SharedLink, MaxMinFairGivesASlowTransferItsCapAndTheRestToOthers) {
  Device slow = make(0, 0.25), f1 = make(1), f2 = make(2);
  Completion cs = slow.default_stream().copy_h2d(250'000, HostMemoryKind::Pinned);
  Completion c1 = f1.default_stream().copy_h2d(625'000, HostMemoryKind::Pinned);
  Completion c2 = f2.default_stream().copy_h2d(625'000, HostMemoryKind::Pinned);
  // slow gets 0.25, the others (1.5-0.25)/2 = 0.625 each.
  EXPECT_EQ(timeline.end_time(cs), 1'000'000);
  EXPECT_EQ(timeline.end_time(c1), 1'000'000);
  EXPECT_EQ(timeline.end_time(c2), 1'000'000);
}

TEST_F(SharedLink, TransferWaitingOnAKernelJoinsWhenTheKernelEnds) {
  Device a = make(0), b = make(1);
  a.default_stream().launch_kernel(1'000'000);
  Completion ca = a.default_stream().copy_h2d(750'000, HostMemoryKind::Pinned);  // joins at 1 ms
  Completion cb = b.default_stream().copy_h2d(1'750'000, HostMemoryKind::Pinned);
  // b alone at 1 B/ns until 1 ms (1,000,000 moved), then both at 0.75:
  // a needs 1 ms, b's remaining 750,000 take 1 ms too.
  EXPECT_EQ(timeline.end_time(ca), 2'000'000);
  EXPECT_EQ(timeline.end_time(cb), 2'000'000);
}

TEST_F(SharedLink, HostThreadsUnderTheVirtualClockShareTheLinkDeterministically) {
  Device a = make(0), b = make(1);
  Time end_a = 0, end_b = 0;
  clock->run_concurrently({
      [&] {
        a.default_stream().copy_h2d(1'500'000, HostMemoryKind::Pinned);
        a.synchronize();
        end_a = clock->now();
      },
      [&] {
        b.default_stream().copy_h2d(1'500'000, HostMemoryKind::Pinned);
        b.synchronize();
        end_b = clock->now();
      },
  });
  EXPECT_EQ(end_a, 2'000'000);
  EXPECT_EQ(end_b, 2'000'000);
}

TEST_F(SharedLink, CommittedProgressSurvivesLaterResolutions) {
  Device a = make(0), b = make(1);
  Completion ca = a.default_stream().copy_h2d(2'000'000, HostMemoryKind::Pinned);
  Completion cb = b.default_stream().copy_h2d(750'000, HostMemoryKind::Pinned);
  // Both at 0.75 B/ns: b ends at 1 ms having moved 750,000; a has 1,250,000
  // left and finishes alone at 1 B/ns at 2.25 ms.
  b.synchronize();
  EXPECT_EQ(clock->now(), 1'000'000);
  EXPECT_TRUE(cb.resolved());
  EXPECT_FALSE(ca.resolved());
  EXPECT_EQ(timeline.end_time(ca), 2'250'000);
  a.synchronize();
  EXPECT_EQ(clock->now(), 2'250'000);
  EXPECT_TRUE(ca.resolved());
}

}  // namespace
}  // namespace gpemu
