// Several GPUs: DDP all-reduce each iteration, the optimizer waits for it,
// every sample once per epoch across the GPUs, determinism.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/train.h"
#include "support/train_test_util.h"
#include "train/summary_json.h"

namespace gpemu::train {
namespace {

using testing::exact_options;
using testing::FixedCosts;
using testing::modelled_sources;

class MultiGpu : public ::testing::TestWithParam<int> {};

TEST_P(MultiGpu, AllReduceEveryIterationOptimizerWaitsEverySampleOnce) {
  const int gpus = GetParam();
  auto clock = make_virtual_clock();
  FixedCosts costs;
  costs.backward = 30 * kMillisecond;
  TrainOptions o = exact_options(gpus, 4);
  Trainer t(*clock, find_gpu("v100"), costs, o);
  t.timeline().enable_trace(true);
  const std::size_t samples = 64;
  TrainResult r = t.run(modelled_sources(*clock, t, samples, 4, 1, 1 * kMillisecond));
  const std::int64_t per_gpu = static_cast<std::int64_t>(samples) / gpus / 4;

  EXPECT_EQ(r.gpus, gpus);
  EXPECT_EQ(r.iterations, per_gpu);
  ASSERT_GT(r.buckets, 1);
  EXPECT_EQ(r.all_reduces, static_cast<std::uint64_t>(per_gpu * r.buckets));
  // The zoo graph's gradients: resnet18's parameters, 4 bytes each.
  EXPECT_EQ(r.all_reduce_bytes, 4ull * 11689512);

  // Per GPU and iteration: the all-reduce ends after backward, and the
  // optimizer step starts after the all-reduce.
  std::map<int, std::vector<TraceRecord>> optimizer;  // per device, in time order
  std::map<int, int> all_reduce_ops, backward_kernels;
  for (const TraceRecord& rec : t.timeline().trace_records()) {
    if (rec.name == "optimizer step" && rec.engine >= 0) optimizer[rec.device].push_back(rec);
    if (rec.name.starts_with("all_reduce bucket") && rec.stream >= 0) ++all_reduce_ops[rec.device];
    if (rec.name == "backward" && rec.engine >= 0) ++backward_kernels[rec.device];
  }
  // Backward runs as one kernel per bucket it completes (its chunks between
  // two buckets back to back), not one per gradient-ready point.
  for (int g = 0; g < gpus; ++g) {
    EXPECT_GE(backward_kernels[g], per_gpu) << g;
    EXPECT_LE(backward_kernels[g], per_gpu * r.buckets) << g;
  }
  ASSERT_EQ(static_cast<int>(optimizer.size()), gpus);
  for (const BatchRecord& b : r.batches) {
    EXPECT_GT(b.all_reduce_end, b.backward_end) << b.gpu << " " << b.iteration;
    const TraceRecord& opt = optimizer.at(b.gpu).at(static_cast<std::size_t>(b.iteration));
    EXPECT_GE(opt.start, b.all_reduce_end) << b.gpu << " " << b.iteration;
    EXPECT_LE(opt.end, b.step_end);  // then loss.item()
  }
  for (int g = 0; g < gpus; ++g) EXPECT_GT(all_reduce_ops[g], 0) << g;

  // The first buckets' all-reduces overlap backward: the exposed part is
  // shorter than the whole all-reduce time.
  EXPECT_GT(r.all_reduce_pct, 0);

  // Every sample exactly once across the GPUs.
  std::multiset<std::size_t> seen;
  for (const BatchRecord& b : r.batches) seen.insert(b.sample_indices.begin(), b.sample_indices.end());
  EXPECT_EQ(seen.size(), samples);
  EXPECT_EQ(std::set<std::size_t>(seen.begin(), seen.end()).size(), samples);
  EXPECT_EQ(r.samples, static_cast<std::int64_t>(samples));
  for (const GpuResult& g : r.per_gpu) {
    EXPECT_EQ(g.iterations, per_gpu);
    EXPECT_GT(g.peak_allocated_bytes, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Gpus, MultiGpu, ::testing::Values(2, 4));

TEST(MultiGpuRun, ASlowShardHoldsUpTheOthersAtTheAllReduce) {
  // GPU 1's loader is 4x slower: GPU 0 waits for it at every all-reduce, so
  // its stall is only the first batch, and its exposed all-reduce is large.
  auto clock = make_virtual_clock();
  FixedCosts costs;
  Trainer t(*clock, find_gpu("v100"), costs, exact_options(2, 4));
  std::vector<std::unique_ptr<BatchSource>> src;
  for (int g = 0; g < 2; ++g)
    src.push_back(std::make_unique<ModelledLoader>(*clock, testing::memory_dataset(32),
                                                   testing::loader_options(4, 1, 2, g, 2),
                                                   testing::per_sample_cost((g == 0 ? 2 : 8) * kMillisecond)));
  TrainResult r = t.run(std::move(src));
  ASSERT_EQ(r.per_gpu.size(), 2u);
  EXPECT_GT(r.per_gpu[1].data_stall, r.per_gpu[0].data_stall);
  EXPECT_GT(r.per_gpu[0].all_reduce_wait, r.per_gpu[1].all_reduce_wait);
  // Both GPUs end each iteration's all-reduce together.
  std::map<std::int64_t, std::vector<Time>> ends;
  for (const BatchRecord& b : r.batches) ends[b.iteration].push_back(b.all_reduce_end);
  for (const auto& [it, e] : ends) {
    ASSERT_EQ(e.size(), 2u);
    EXPECT_LT(std::abs(e[0] - e[1]), 1 * kMillisecond) << it;
  }
}

TEST(MultiGpuRun, SameSeedSameSummary) {
  auto run = [](std::uint64_t seed) {
    auto clock = make_virtual_clock();
    FixedCosts costs;
    TrainOptions o = exact_options(2, 4);
    o.variation.cv = 0.05;
    o.variation.seed = seed;
    Trainer t(*clock, find_gpu("a100"), costs, o);
    return summary_json(t.run(modelled_sources(*clock, t, 48, 4, 2, 3 * kMillisecond))).dump();
  };
  const std::string a = run(7);
  EXPECT_EQ(a, run(7));
  EXPECT_NE(a, run(8));
}

TEST(MultiGpuRun, SyncAtEndOverEpochsAndAnIterationCap) {
  auto clock = make_virtual_clock();
  FixedCosts costs;
  TrainOptions o = exact_options(2, 4);
  o.sync = SyncMode::AtEnd;
  o.epochs = 3;
  o.max_iterations = 10;  // 4 per epoch: epochs 0 and 1, then 2 of epoch 2
  Trainer t(*clock, find_gpu("a100"), costs, o);
  TrainResult r = t.run(modelled_sources(*clock, t, 32, 4, 2, 2 * kMillisecond));
  EXPECT_EQ(r.iterations, 10);
  EXPECT_EQ(r.samples, 2 * 10 * 4);
  ASSERT_EQ(r.epochs.size(), 3u);
  EXPECT_EQ(r.epochs[2].samples, 2 * 2 * 4);
  EXPECT_EQ(r.all_reduces, static_cast<std::uint64_t>(10 * r.buckets));
  for (const BatchRecord& b : r.batches) EXPECT_GT(b.all_reduce_end, b.backward_end);
}

TEST(MultiGpuRun, UnevenShardsArePaddedAsDistributedSampler) {
  // 10 samples over 4 GPUs: each gets 3 (DistributedSampler pads with the first 2).
  auto clock = make_virtual_clock();
  FixedCosts costs;
  Trainer t(*clock, find_gpu("v100"), costs, exact_options(4, 2));
  TrainResult r = t.run(modelled_sources(*clock, t, 10, 2, 1, 1 * kMillisecond));
  EXPECT_EQ(r.iterations, 2);
  EXPECT_EQ(r.samples, 12);
  std::set<std::size_t> seen;
  for (const BatchRecord& b : r.batches) seen.insert(b.sample_indices.begin(), b.sample_indices.end());
  EXPECT_EQ(seen.size(), 10u);
}

TEST(MultiGpuRun, AFailureOnOneGpuStopsTheOthers) {
  auto clock = make_virtual_clock();
  EstimateCostModel costs;
  TrainOptions o;
  o.model = "vgg16";
  o.batch_size = 1024;
  o.gpus = 2;
  Trainer t(*clock, find_gpu("t4"), costs, o);
  std::vector<std::unique_ptr<BatchSource>> src;
  for (int g = 0; g < 2; ++g)
    src.push_back(
        std::make_unique<SyntheticSource>(*clock, 2, 1024, t.cost().input_bytes_per_sample, HostMemoryKind::Pinned));
  EXPECT_THROW(t.run(std::move(src)), OutOfMemoryError);
}

}  // namespace
}  // namespace gpemu::train
