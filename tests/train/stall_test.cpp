// Data stalls, H2D share and the single-GPU loop, exact under the virtual
// clock with the modelled loader and round-number GPU costs.
#include <gtest/gtest.h>

#include <set>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/job.h"
#include "gpemu/train.h"
#include "support/train_test_util.h"

namespace gpemu::train {
namespace {

using testing::exact_options;
using testing::FixedCosts;
using testing::modelled_sources;

// 8 batches of 4; GPU: 1 ms H2D (replayed), 10 ms forward, 10 ms backward;
// the host issues without waiting (SyncMode::AtEnd) so every number is round.
struct Rig {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  FixedCosts costs;
  TrainOptions options = exact_options();
  Rig() {
    costs.transfer_pinned = 1 * kMillisecond;
    options.sync = SyncMode::AtEnd;
  }
};

TEST(Stall, ALoaderSlowerThanTheGpuGivesTheExpectedStallExactly) {
  Rig s;
  Trainer t(*s.clock, find_gpu("v100"), s.costs, s.options);
  // One worker, 10 ms per sample: a batch every 40 ms; the GPU needs 21 ms.
  TrainResult r = t.run(modelled_sources(*s.clock, t, 32, 4, /*workers=*/1, 10 * kMillisecond));
  ASSERT_EQ(r.iterations, 8);
  ASSERT_EQ(r.batches.size(), 8u);
  // Batch i is ready at 40(i+1) ms; the GPU finished batch i-1 at 40i + 21 ms.
  EXPECT_EQ(r.batches[0].data_stall, 40 * kMillisecond);
  for (std::size_t i = 1; i < 8; ++i) {
    EXPECT_EQ(r.batches[i].delivered, static_cast<Time>(40 * (i + 1)) * kMillisecond) << i;
    EXPECT_EQ(r.batches[i].gpu_idle_since, static_cast<Time>(40 * i + 21) * kMillisecond) << i;
    EXPECT_EQ(r.batches[i].data_stall, 19 * kMillisecond) << i;
  }
  EXPECT_EQ(r.elapsed, (8 * 40 + 21) * kMillisecond);
  EXPECT_EQ(r.per_gpu[0].data_stall, (40 + 7 * 19) * kMillisecond);
  EXPECT_DOUBLE_EQ(r.data_stall_pct, 100.0 * 173.0 / 341.0);
  EXPECT_DOUBLE_EQ(r.gpu_util_pct, 100.0 * 160.0 / 341.0);
  EXPECT_DOUBLE_EQ(r.h2d_pct, 100.0 * 8.0 / 341.0);
  // All of the modelled cost is decode: the stall is prep stall.
  EXPECT_DOUBLE_EQ(r.prep_stall_pct, r.data_stall_pct);
  EXPECT_EQ(r.fetch_stall_pct, 0);
  EXPECT_EQ(r.samples, 32);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_DOUBLE_EQ(r.mean_epoch_s(), 0.341);
}

TEST(Stall, AFasterLoaderGivesNoStallAfterTheFirstBatch) {
  for (SyncMode sync : {SyncMode::AtEnd, SyncMode::EveryIteration}) {
    Rig s;
    s.options.sync = sync;
    Trainer t(*s.clock, find_gpu("v100"), s.costs, s.options);
    // Two workers, 1 ms per sample: a batch every 2 ms on average, well ahead of the GPU.
    TrainResult r = t.run(modelled_sources(*s.clock, t, 32, 4, /*workers=*/2, 1 * kMillisecond));
    ASSERT_EQ(r.batches.size(), 8u);
    EXPECT_EQ(r.batches[0].data_stall, 4 * kMillisecond) << to_string(sync);
    for (std::size_t i = 1; i < 8; ++i) EXPECT_EQ(r.batches[i].data_stall, 0) << i << " " << to_string(sync);
    if (sync == SyncMode::AtEnd) {
      // The GPU runs back to back after the first batch.
      EXPECT_EQ(r.elapsed, (4 + 8 * 21) * kMillisecond);
      EXPECT_DOUBLE_EQ(r.data_stall_pct, 100.0 * 4.0 / 172.0);
    }
  }
}

TEST(Stall, TheStallIsTheGpuIdleTimeWhileTheHostWaitsForData) {
  Rig s;
  s.options.sync = SyncMode::EveryIteration;  // loss.item(): the host waits for the GPU every iteration
  Trainer t(*s.clock, find_gpu("v100"), s.costs, s.options);
  TrainResult r = t.run(modelled_sources(*s.clock, t, 32, 4, 1, 10 * kMillisecond));
  ASSERT_EQ(r.batches.size(), 8u);
  for (std::size_t i = 1; i < 8; ++i) {
    const BatchRecord& b = r.batches[i];
    // The GPU's previous work ends with loss.item(), which the host waited for.
    EXPECT_EQ(b.gpu_idle_since, r.batches[i - 1].step_end);
    EXPECT_EQ(b.next_called, r.batches[i - 1].step_end);
    EXPECT_EQ(b.data_stall, b.delivered - b.gpu_idle_since);
    EXPECT_EQ(b.h2d_start, b.delivered);
    EXPECT_EQ(b.h2d_end - b.h2d_start, 1 * kMillisecond);
  }
}

TEST(Stall, H2dShareFollowsTheBatchBytesAndTheHostMemoryKind) {
  // No measured transfer: the PCIe model moves the real batch bytes.
  auto run = [](bool pinned) {
    auto clock = make_virtual_clock();
    FixedCosts costs;
    TrainOptions o = exact_options(1, 8);
    Trainer t(*clock, find_gpu("v100"), costs, o);
    std::vector<std::unique_ptr<BatchSource>> src;
    auto lo = testing::loader_options(8, 2);
    lo.pin_memory = pinned;
    src.push_back(std::make_unique<ModelledLoader>(*clock, testing::memory_dataset(64), lo,
                                                   testing::per_sample_cost(100 * kMicrosecond), &t.timeline()));
    TrainResult r = t.run(std::move(src));
    const PcieModel& pcie = t.device(0).pcie();
    const HostMemoryKind kind = pinned ? HostMemoryKind::Pinned : HostMemoryKind::Pageable;
    const double bytes = 8.0 * kImageNetInputBytes;
    const double expected_ns = static_cast<double>(pcie.latency(kind)) + bytes / (pcie.gbs(kind) * 1e9) * 1e9;
    for (const BatchRecord& b : r.batches) {
      EXPECT_EQ(b.bytes, 8 * kImageNetInputBytes);
      EXPECT_NEAR(static_cast<double>(b.h2d), expected_ns, 2.0);
    }
    Duration h2d = 0;
    for (const BatchRecord& b : r.batches) h2d += b.h2d;
    EXPECT_DOUBLE_EQ(r.h2d_pct, 100.0 * static_cast<double>(h2d) / static_cast<double>(r.elapsed));
    return r.h2d_pct;
  };
  const double pinned = run(true);
  const double pageable = run(false);
  EXPECT_GT(pinned, 0);
  EXPECT_GT(pageable, 2 * pinned);
}

TEST(Stall, AShortLastBatchCopiesItsOwnBytes) {
  Rig s;
  s.costs.transfer_pinned.reset();  // the PCIe model moves the bytes
  Trainer t(*s.clock, find_gpu("v100"), s.costs, s.options);
  // 10 samples in batches of 4: 4, 4, 2.
  TrainResult r = t.run(modelled_sources(*s.clock, t, 10, 4, 1, 1 * kMillisecond));
  ASSERT_EQ(r.batches.size(), 3u);
  EXPECT_EQ(r.batches[0].bytes, 4 * kImageNetInputBytes);
  EXPECT_EQ(r.batches[2].samples, 2);
  EXPECT_EQ(r.batches[2].bytes, 2 * kImageNetInputBytes);
  EXPECT_LT(r.batches[2].h2d, r.batches[0].h2d * 6 / 10);
  EXPECT_EQ(r.samples, 10);
}

TEST(Stall, EpochsAndTheIterationCap) {
  Rig s;
  s.options.epochs = 3;
  {
    Trainer t(*s.clock, find_gpu("v100"), s.costs, s.options);
    TrainResult r = t.run(modelled_sources(*s.clock, t, 16, 4, 2, 1 * kMillisecond));
    EXPECT_EQ(r.iterations, 12);
    ASSERT_EQ(r.epochs.size(), 3u);
    for (std::size_t e = 0; e < 3; ++e) {
      EXPECT_EQ(r.epochs[e].samples, 16);
      if (e > 0) {
        EXPECT_GE(r.epochs[e].start, r.epochs[e - 1].end);
      }
      // Every sample once per epoch, in another order each epoch.
      std::multiset<std::size_t> seen;
      for (const BatchRecord& b : r.batches)
        if (b.epoch == e) seen.insert(b.sample_indices.begin(), b.sample_indices.end());
      EXPECT_EQ(seen.size(), 16u);
      EXPECT_EQ(std::set<std::size_t>(seen.begin(), seen.end()).size(), 16u);
    }
    EXPECT_NE(r.batches[0].sample_indices, r.batches[4].sample_indices);
  }
  s.options.max_iterations = 6;
  auto clock = make_virtual_clock();
  Trainer t(*clock, find_gpu("v100"), s.costs, s.options);
  TrainResult r = t.run(modelled_sources(*clock, t, 16, 4, 2, 1 * kMillisecond));
  EXPECT_EQ(r.iterations, 6);
  EXPECT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.samples, 24);
}

TEST(Stall, OutOfMemoryReachesTheCaller) {
  auto clock = make_virtual_clock();
  EstimateCostModel costs;
  TrainOptions o;
  o.model = "vgg16";
  o.batch_size = 4096;
  Trainer t(*clock, find_gpu("t4"), costs, o);
  std::vector<std::unique_ptr<BatchSource>> src;
  src.push_back(
      std::make_unique<SyntheticSource>(*clock, 1, 4096, t.cost().input_bytes_per_sample, HostMemoryKind::Pinned));
  EXPECT_THROW(t.run(std::move(src)), OutOfMemoryError);
}

}  // namespace
}  // namespace gpemu::train
