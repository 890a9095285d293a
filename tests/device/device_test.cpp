// Timeline semantics of emulated devices, exact under the virtual clock.
#include <gtest/gtest.h>

#include <cmath>

#include "gpemu/device.h"
#include "gpemu/error.h"
#include "support/test_gpu.h"

namespace gpemu {
namespace {

using gpemu::testing::test_gpu;
constexpr Duration ms = kMillisecond;

struct Fixture : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  Timeline timeline{*clock};
  Device gpu{timeline, test_gpu()};
};

using DeviceTimeline = Fixture;

TEST_F(DeviceTimeline, KernelLaunchIsAsynchronousAndStreamsAreFifo) {
  Stream& s = gpu.default_stream();
  Completion a = s.launch_kernel(1 * ms);
  Completion b = s.launch_kernel(2 * ms);
  Completion c = s.launch_kernel(3 * ms);
  EXPECT_EQ(clock->now(), 0);  // the host did not wait
  EXPECT_EQ(timeline.end_time(a), 1 * ms);
  EXPECT_EQ(timeline.end_time(b), 3 * ms);
  EXPECT_EQ(timeline.end_time(c), 6 * ms);
  EXPECT_FALSE(s.query());
  s.synchronize();
  EXPECT_EQ(clock->now(), 6 * ms);
  EXPECT_TRUE(s.query());
}

TEST_F(DeviceTimeline, KernelIssuedLaterStartsAtIssueTime) {
  Stream& s = gpu.default_stream();
  s.launch_kernel(1 * ms);
  clock->sleep_until(5 * ms);
  Completion k = s.launch_kernel(1 * ms);
  EXPECT_EQ(timeline.end_time(k), 6 * ms);
}

TEST_F(DeviceTimeline, CopyOnOneStreamOverlapsComputeOnAnother) {
  Stream& compute = gpu.create_stream();
  Stream& copy = gpu.create_stream();
  Completion k = compute.launch_kernel(10 * ms);
  Completion h = copy.copy_h2d(1 << 20, HostMemoryKind::Pinned);
  const PcieModel& p = gpu.pcie();
  Duration expected = p.pinned_latency + static_cast<Duration>(std::ceil((1 << 20) / (p.pinned_gbs)));
  EXPECT_EQ(timeline.end_time(h), expected);  // started at 0, not after the kernel
  EXPECT_EQ(timeline.end_time(k), 10 * ms);
}

TEST_F(DeviceTimeline, KernelsOnDifferentStreamsShareTheComputeEngine) {
  Stream& s1 = gpu.create_stream();
  Stream& s2 = gpu.create_stream();
  s1.launch_kernel(4 * ms);
  Completion k2 = s2.launch_kernel(1 * ms);
  EXPECT_EQ(timeline.end_time(k2), 5 * ms);
}

TEST_F(DeviceTimeline, LegacyDefaultStreamWaitsForBlockingStreamsAndTheyForIt) {
  Stream& s1 = gpu.create_stream();
  Stream& nb = gpu.create_stream(/*non_blocking=*/true);
  s1.copy_h2d(0, HostMemoryKind::Pinned);  // a copy on s1 ending at its latency
  Completion s1_copy = s1.tail();
  Completion d = gpu.default_stream().copy_d2h(0, HostMemoryKind::Pinned);
  // D2H uses another engine, yet starts only after s1's work (legacy ordering).
  EXPECT_EQ(timeline.end_time(d), timeline.end_time(s1_copy) + gpu.pcie().pinned_latency);
  // A blocking stream waits for the default stream's work...
  Completion after = s1.copy_h2d(0, HostMemoryKind::Pinned);
  EXPECT_EQ(timeline.end_time(after), timeline.end_time(d) + gpu.pcie().pinned_latency);
  // ...a non-blocking one does not.
  Completion free = nb.copy_d2h(0, HostMemoryKind::Pinned);
  EXPECT_EQ(timeline.end_time(free), timeline.end_time(d) + gpu.pcie().pinned_latency);  // D2H engine busy until d
  Completion kernel = gpu.create_stream(true).launch_kernel(1 * ms);
  EXPECT_EQ(timeline.end_time(kernel), 1 * ms);
}

TEST_F(DeviceTimeline, EventsOrderStreamsAndGiveExactElapsedTime) {
  Stream& producer = gpu.create_stream();
  Stream& consumer = gpu.create_stream();
  Event start, done;
  producer.record(start);
  producer.launch_kernel(5 * ms);
  producer.record(done);
  consumer.wait(done);
  Completion d2h = consumer.copy_d2h(0, HostMemoryKind::Pinned);
  EXPECT_EQ(timeline.end_time(d2h), 5 * ms + gpu.pcie().pinned_latency);
  EXPECT_FALSE(done.query());
  done.synchronize();
  EXPECT_EQ(clock->now(), 5 * ms);
  EXPECT_TRUE(done.query());
  EXPECT_EQ(Event::elapsed(start, done), 5 * ms);
}

TEST_F(DeviceTimeline, EventRecordedOnIdleStreamCompletesAtRecordTime) {
  Stream& s = gpu.create_stream();
  clock->sleep_until(7 * ms);
  Event e;
  s.record(e);
  EXPECT_TRUE(e.query());
  EXPECT_EQ(e.time(), 7 * ms);
}

TEST_F(DeviceTimeline, NeverRecordedEventQueriesTrueAndElapsedThrows) {
  Event a, b;
  EXPECT_TRUE(a.query());
  EXPECT_THROW(Event::elapsed(a, b), std::logic_error);
}

TEST_F(DeviceTimeline, PageableCopiesBlockTheHostPinnedCopiesDoNot) {
  Stream& s = gpu.default_stream();
  const std::uint64_t bytes = 64ull << 20;
  Completion pinned = s.copy_h2d(bytes, HostMemoryKind::Pinned);
  EXPECT_EQ(clock->now(), 0);
  const PcieModel& p = gpu.pcie();
  const Time pinned_end = p.pinned_latency + static_cast<Duration>(std::ceil(bytes / p.pinned_gbs));
  EXPECT_EQ(timeline.end_time(pinned), pinned_end);
  Completion pageable = s.copy_h2d(bytes, HostMemoryKind::Pageable);
  const Time pageable_end = pinned_end + p.pageable_latency + static_cast<Duration>(std::ceil(bytes / p.pageable_gbs));
  EXPECT_EQ(timeline.end_time(pageable), pageable_end);
  EXPECT_EQ(clock->now(), pageable_end);  // the host waited
}

TEST_F(DeviceTimeline, DeviceSynchronizeWaitsForEveryStream) {
  gpu.create_stream().launch_kernel(3 * ms);
  gpu.create_stream(true).copy_d2h(0, HostMemoryKind::Pinned);
  gpu.synchronize();
  EXPECT_EQ(clock->now(), 3 * ms);
  EXPECT_EQ(gpu.stats().busy[0], 3 * ms);
  EXPECT_EQ(gpu.stats().kernels, 1u);
}

TEST_F(DeviceTimeline, TraceRecordsEveryOperationOnItsStreamAndEngine) {
  timeline.enable_trace(true);
  Stream& s = gpu.create_stream();
  Event e;
  s.launch_kernel(2 * ms, "forward");
  s.record(e);
  s.copy_d2h(0, HostMemoryKind::Pinned, "loss");
  s.synchronize();
  auto records = timeline.trace_records();
  ASSERT_EQ(records.size(), 2u);  // the event marker is not drawn
  EXPECT_EQ(records[0].name, "forward");
  EXPECT_EQ(records[0].engine, static_cast<int>(Engine::Compute));
  EXPECT_EQ(records[0].stream, s.id());
  EXPECT_EQ(records[0].start, 0);
  EXPECT_EQ(records[0].end, 2 * ms);
  EXPECT_EQ(records[1].name, "loss");
  EXPECT_EQ(records[1].engine, static_cast<int>(Engine::CopyD2H));
  EXPECT_EQ(records[1].start, 2 * ms);
}

TEST(DeviceMemory, CapacityIsReportedMemoryMinusContextReserveLessTheWorkspaceMargin) {
  auto clock = make_virtual_clock();
  Timeline timeline(*clock);
  Device gpu(timeline, test_gpu(), DeviceOptions{.context_reserve_bytes = 1ull << 30, .workspace_margin = 0});
  EXPECT_EQ(gpu.allocator().capacity(), (16ull << 30) - (1ull << 30));
  Device margin(timeline, test_gpu(), DeviceOptions{.context_reserve_bytes = 1ull << 30});
  EXPECT_EQ(margin.allocator().capacity(),
            static_cast<std::uint64_t>(static_cast<double>(15ull << 30) / (1 + kDefaultWorkspaceMargin)));
  GpuSpec ecc = test_gpu();
  ecc.reported_memory_bytes = 15ull << 30;  // e.g. ECC taking 1/16
  Device reported(timeline, ecc, DeviceOptions{.context_reserve_bytes = 1ull << 30, .workspace_margin = 0});
  EXPECT_EQ(reported.allocator().capacity(), 14ull << 30);
  EXPECT_THROW(Device::tensor_capacity(ecc, 0, -0.1), InputError);
  Device dflt(timeline, test_gpu(), DeviceOptions{.index = 1});
  EXPECT_EQ(dflt.context_reserve_bytes(), Device::default_context_reserve(test_gpu()));
  EXPECT_THROW(dflt.allocator().allocate(16ull << 30), OutOfMemoryError);
}

}  // namespace
}  // namespace gpemu
