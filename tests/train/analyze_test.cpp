// The DataStall differential analysis (train/analyze.h) under the virtual
// clock, with the modelled loader: exact epoch times and shares.
#include <gtest/gtest.h>

#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/train.h"
#include "support/train_test_util.h"

namespace gpemu::train {
namespace {

// 16 samples of 100,000 bytes, batches of 4 on one GPU, the loader inside
// next() (no workers): every load is exposed, so the epochs differ by exactly
// the loads. Cached: 1 ms decode per sample, free reads. Cold: + 1 ms per file
// + 100,000 B at 100 MB/s = 3 ms per sample.
DataStallOptions serial_configuration() {
  DataStallOptions o;
  o.job = job_spec(testing::exact_options(1, 4), find_gpu("v100"));
  o.dataset = testing::memory_dataset(16, 100000);
  o.loader.batch_size = 4;
  o.loader.num_workers = 0;
  o.loader.shuffle = false;
  o.model = testing::per_sample_cost(kMillisecond);
  o.storage.read_per_sample = kMillisecond;
  o.storage.bytes_per_s = 1e8;
  return o;
}

testing::FixedCosts costs_with_h2d() {
  testing::FixedCosts c;
  c.transfer_pinned = kMillisecond;
  return c;
}

TEST(Analyze, TheThreePassesDifferByTheLoadsExactly) {
  const testing::FixedCosts costs = costs_with_h2d();
  const DataStallResult r = analyze_data_stalls(costs, serial_configuration());
  // GPU-bound: 4 iterations; each adds 16 ms of loads when cached (4 batches x
  // 4 samples x 1 ms) and 32 ms more when cold (x 2 ms of reads).
  EXPECT_GT(r.gpu_bound.epoch, 4 * 20 * kMillisecond);
  EXPECT_EQ(r.cached.epoch - r.gpu_bound.epoch, 16 * kMillisecond);
  EXPECT_EQ(r.cold.epoch - r.cached.epoch, 32 * kMillisecond);
  const double t_cold = static_cast<double>(r.cold.epoch);
  EXPECT_DOUBLE_EQ(r.prep_stall_pct, 100.0 * static_cast<double>(16 * kMillisecond) / t_cold);
  EXPECT_DOUBLE_EQ(r.fetch_stall_pct, 100.0 * static_cast<double>(32 * kMillisecond) / t_cold);
  EXPECT_EQ(r.gpu_bound.samples, 16);
  EXPECT_EQ(r.cached.samples, 16);
  EXPECT_EQ(r.cold.samples, 16);
  EXPECT_DOUBLE_EQ(r.cold.samples_per_s, 16.0 / to_seconds(r.cold.epoch));
  EXPECT_EQ(r.gpu_bound.name, "gpu-bound");
  EXPECT_EQ(r.cold.name, "cold");
  EXPECT_EQ(r.model, "resnet18");
}

TEST(Analyze, TheMeasuredEpochHasNoWarmUpIteration) {
  // The second epoch is measured: with a warm-up factor of 3 the gpu-bound
  // epoch is the same as without one.
  const testing::FixedCosts costs = costs_with_h2d();
  DataStallOptions o = serial_configuration();
  const DataStallResult plain = analyze_data_stalls(costs, o);
  o.job.compute.variation.warmup_factor = 3;
  const DataStallResult warm = analyze_data_stalls(costs, o);
  EXPECT_EQ(warm.gpu_bound.epoch, plain.gpu_bound.epoch);
  EXPECT_EQ(warm.cold.epoch, plain.cold.epoch);
}

TEST(Analyze, AGpuBoundConfigurationStallsOnlyForTheFirstBatch) {
  // Two prefetching workers, 100 us per sample: a batch is ready in 0.4 ms,
  // the GPU needs ~21 ms per batch. Only the first batch of the measured epoch
  // is waited for: 0.4 ms cached, 4 x (0.1 + 0.05 + 0.002) ms cold (the
  // 100 GB/s storage shared by the two workers).
  const testing::FixedCosts costs = costs_with_h2d();
  DataStallOptions o = serial_configuration();
  o.dataset = testing::memory_dataset(64, 100000);
  o.loader.num_workers = 2;
  o.model = testing::per_sample_cost(100 * kMicrosecond);
  o.storage.read_per_sample = 50 * kMicrosecond;
  o.storage.bytes_per_s = 1e11;  // 100,000 B at 50 GB/s per worker: 2 us
  const DataStallResult r = analyze_data_stalls(costs, o);
  EXPECT_EQ(r.cached.epoch - r.gpu_bound.epoch, 400 * kMicrosecond);
  EXPECT_EQ(r.cold.epoch - r.cached.epoch, 4 * 52 * kMicrosecond);
  EXPECT_LT(r.prep_stall_pct, 0.2);
  EXPECT_LT(r.fetch_stall_pct, 0.1);
}

TEST(Analyze, AFreeLoaderGivesZeroStalls) {
  const testing::FixedCosts costs = costs_with_h2d();
  DataStallOptions o = serial_configuration();
  o.loader.num_workers = 2;
  o.model = testing::per_sample_cost(0);
  o.storage.read_per_sample = 0;
  o.storage.bytes_per_s = 1e18;  // rounds to 0 ns per file
  const DataStallResult r = analyze_data_stalls(costs, o);
  EXPECT_EQ(r.cached.epoch, r.gpu_bound.epoch);
  EXPECT_EQ(r.cold.epoch, r.cached.epoch);
  EXPECT_EQ(r.prep_stall_pct, 0.0);
  EXPECT_EQ(r.fetch_stall_pct, 0.0);
}

TEST(Analyze, SharesAreClampedAtZero) {
  EXPECT_EQ(prep_stall_share(10, 8, 20), 0.0);  // cached faster than gpu-bound (noise)
  EXPECT_EQ(fetch_stall_share(20, 18), 0.0);    // cold faster than cached
  EXPECT_DOUBLE_EQ(prep_stall_share(10, 15, 20), 25.0);
  EXPECT_DOUBLE_EQ(fetch_stall_share(15, 20), 25.0);
  EXPECT_EQ(prep_stall_share(0, 0, 0), 0.0);
}

TEST(Analyze, TheColdModelSharesTheStorageBandwidthAmongConcurrentReaders) {
  LoaderModelOptions cached;
  cached.cores = 4;
  StorageModel s{.read_per_sample = 7 * kMicrosecond, .bytes_per_s = 800e6};
  EXPECT_DOUBLE_EQ(cold_loader_model(cached, s, 2).read_bytes_per_s, 400e6);   // 2 threads, 4 cores
  EXPECT_DOUBLE_EQ(cold_loader_model(cached, s, 16).read_bytes_per_s, 200e6);  // 4 run at once
  EXPECT_EQ(cold_loader_model(cached, s, 16).read_per_sample, 7 * kMicrosecond);
  EXPECT_EQ(cold_loader_model(cached, s, 16).decode_per_sample, cached.decode_per_sample);
  EXPECT_THROW(cold_loader_model(cached, StorageModel{.bytes_per_s = 0}, 1), InputError);
}

TEST(Analyze, RejectsAnInvalidJobAndAnEmptyDataset) {
  const testing::FixedCosts costs;
  DataStallOptions o = serial_configuration();
  o.job.batch_size = 0;
  EXPECT_THROW(analyze_data_stalls(costs, o), InputError);
  o = serial_configuration();
  o.dataset.samples.clear();
  EXPECT_THROW(analyze_data_stalls(costs, o), InputError);
}

}  // namespace
}  // namespace gpemu::train
