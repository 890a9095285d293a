// How the work of resolving shared-link transfers grows: counted, not timed
// (TimelineStats), so the tests hold on any machine.
#include <gtest/gtest.h>

#include "gpemu/device.h"
#include "support/test_gpu.h"

namespace gpemu {
namespace {

using gpemu::testing::test_gpu;

PcieModel one_byte_per_ns() {
  PcieModel p = PcieModel::for_link(3, 16);
  p.pinned_gbs = 1;
  p.pageable_gbs = 0.5;
  p.pinned_latency = p.pageable_latency = 0;
  return p;
}

// `devices` GPUs, two per host link, each copying `copies` batches of
// slightly different sizes (so finishes fall at distinct times), then every
// completion is asked for at one instant, as host threads waiting would.
TimelineStats run(int devices, int copies) {
  auto clock = make_virtual_clock();
  Timeline timeline(*clock);
  std::vector<const Link*> links;
  std::vector<std::unique_ptr<Device>> gpus;
  for (int d = 0; d < devices; ++d) {
    if (d % 2 == 0) links.push_back(&timeline.add_link("uplink", 1.5e9));
    gpus.push_back(std::make_unique<Device>(
        timeline, test_gpu(), DeviceOptions{.index = d, .pcie = one_byte_per_ns(), .host_link_h2d = links.back()}));
  }
  std::vector<Completion> last;
  for (auto& g : gpus) {
    for (int k = 0; k < copies; ++k) {
      g->default_stream().copy_h2d(100'000 + 37 * g->index() + k, HostMemoryKind::Pinned);
      g->default_stream().launch_kernel(5'000);
    }
    last.push_back(g->default_stream().tail());
  }
  for (const Completion& c : last) EXPECT_GT(timeline.end_time(c), 0);
  return timeline.stats();
}

TEST(TimelineScale, ResolutionWorkGrowsLinearlyWithConcurrentTransfers) {
  const TimelineStats small = run(32, 10), large = run(256, 10);
  auto work = [](const TimelineStats& s) { return static_cast<double>(s.ops_loaded + s.events + s.flow_rate_updates); };
  // 8x the transfers: near-linear resolution does about 8x the work, the
  // former full scan per event about 64x.
  EXPECT_LT(work(large) / work(small), 8 * 1.25) << work(small) << " -> " << work(large);
  EXPECT_GT(work(large) / work(small), 6);
  // Each link is water-filled only when one of its two flows joins or leaves.
  EXPECT_LE(large.flow_rate_updates, 2 * 3 * large.ops_pending_path);
}

TEST(TimelineScale, AskingAtOneInstantReusesOneSimulation) {
  const TimelineStats s = run(64, 4);
  EXPECT_EQ(s.resolutions, 64u);
  EXPECT_EQ(s.restarts, 1u);  // the other 63 questions continue the first simulation
}

}  // namespace
}  // namespace gpemu
