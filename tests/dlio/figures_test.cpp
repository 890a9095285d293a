// Figures derived from DLIO workloads, checked on hand-computed examples.
#include <gtest/gtest.h>

#include "gpemu/dlio.h"
#include "gpemu/error.h"
#include "support/dlio_test_util.h"

namespace gpemu::dlio {
namespace {

DlioWorkload unet3d_a100() {
  DlioWorkload w;
  w.dataset.num_files_train = 168;
  w.dataset.num_samples_per_file = 1;
  w.dataset.record_length_bytes = 146600628;
  w.reader.batch_size = 7;
  w.train.epochs = 5;
  w.train.computation_time = TimeSpec::constant(0.636);
  w.metric.au = 0.90;
  return w;
}

TEST(DlioFigures, Unet3dOnOneAccelerator) {
  const DlioFigures f = dlio_figures(unet3d_a100());
  EXPECT_EQ(f.world_size, 1);
  EXPECT_EQ(f.total_samples_train, 168u);
  EXPECT_EQ(f.samples_per_rank, 168u);
  EXPECT_EQ(f.steps_per_epoch, 24u);  // 168 / 7
  EXPECT_EQ(f.steps_per_epoch_run, 24u);
  EXPECT_EQ(f.total_train_steps, 120u);  // 5 epochs
  EXPECT_DOUBLE_EQ(f.expected_file_bytes, 146600628.0);
  EXPECT_DOUBLE_EQ(f.dataset_bytes_train, 168.0 * 146600628.0);
  EXPECT_DOUBLE_EQ(f.bytes_per_step, 7.0 * 146600628.0);
  EXPECT_DOUBLE_EQ(f.computation_time_s, 0.636);
  EXPECT_DOUBLE_EQ(f.compute_time_per_epoch_s, 24 * 0.636);
  // AU >= 0.90 needs a step every 0.636 / 0.9 s: 7 * 0.9 / 0.636 = 9.906 samples/s,
  // about 1.45 GB/s per A100 -- MLPerf Storage's well-known figure for unet3d.
  EXPECT_NEAR(f.required_samples_per_s, 9.90566, 1e-4);
  EXPECT_NEAR(f.required_bytes_per_s / 1e9, 1.4522, 1e-3);
}

TEST(DlioFigures, StepsAreSharedAmongRanksAndPartialBatchesAreDropped) {
  const DlioWorkload w = unet3d_a100();
  EXPECT_EQ(dlio_figures(w, 2).steps_per_epoch, 12u);  // 168 / (7 * 2)
  const DlioFigures five = dlio_figures(w, 5);
  EXPECT_EQ(five.steps_per_epoch, 4u);    // floor(168 / 35)
  EXPECT_EQ(five.samples_per_rank, 34u);  // ceil(168 / 5)
  EXPECT_DOUBLE_EQ(five.bytes_per_step, 35.0 * 146600628.0);
  EXPECT_NEAR(five.required_samples_per_s, 5 * 9.90566, 1e-3);
  EXPECT_EQ(dlio_figures(w, 200).steps_per_epoch, 0u);  // fewer samples than one global batch

  DlioWorkload from_config = w;
  from_config.gpemu.world_size = 2;
  EXPECT_EQ(dlio_figures(from_config).steps_per_epoch, 12u);
  EXPECT_THROW(dlio_figures(w, 0), InputError);
}

TEST(DlioFigures, Resnet50WithManySamplesPerFile) {
  DlioWorkload w;
  w.dataset.num_files_train = 1024;
  w.dataset.num_samples_per_file = 1251;
  w.dataset.record_length_bytes = 114660.07;
  w.dataset.num_files_eval = 16;
  w.reader.batch_size = 400;
  w.reader.batch_size_eval = 1000;
  const DlioFigures f = dlio_figures(w);
  EXPECT_EQ(f.total_samples_train, 1281024u);
  EXPECT_EQ(f.steps_per_epoch, 3202u);  // 1281024 / 400 = 3202.56
  EXPECT_EQ(f.total_samples_eval, 20016u);
  EXPECT_EQ(f.eval_steps_per_epoch, 20u);
  EXPECT_DOUBLE_EQ(f.expected_file_bytes, 1251 * 114660.07);
  EXPECT_EQ(f.required_samples_per_s, 0);  // no computation time given
}

TEST(DlioFigures, TotalTrainingStepsCapsAnEpoch) {
  DlioWorkload w;  // bert_v100
  w.dataset.num_files_train = 500;
  w.dataset.num_samples_per_file = 313532;
  w.reader.batch_size = 48;
  w.train.total_training_steps = 1000;
  w.train.epochs = 2;
  const DlioFigures f = dlio_figures(w);
  EXPECT_EQ(f.steps_per_epoch, 3265958u);  // 156766000 / 48
  EXPECT_EQ(f.steps_per_epoch_run, 1000u);
  EXPECT_EQ(f.total_train_steps, 2000u);
}

TEST(DlioFigures, ExpectedComputationTimeOfADistribution) {
  DlioWorkload w = unet3d_a100();
  w.train.computation_time = TimeSpec{};
  w.train.computation_time.distribution = Distribution::Uniform;
  w.train.computation_time.min = 0.5;
  w.train.computation_time.max = 0.7;
  EXPECT_DOUBLE_EQ(dlio_figures(w).computation_time_s, 0.6);
}

TEST(DlioAu, IsComputeOverTotal) {
  EXPECT_DOUBLE_EQ(accelerator_utilization(9, 10), 0.9);
  EXPECT_DOUBLE_EQ(accelerator_utilization(0, 10), 0);
  EXPECT_TRUE(meets_au_threshold(0.9, 0.90));
  EXPECT_TRUE(meets_au_threshold(accelerator_utilization(95.0, 100.0), 0.90));
  EXPECT_FALSE(meets_au_threshold(accelerator_utilization(89.0, 100.0), 0.90));
  EXPECT_TRUE(meets_au_threshold(0.71, 0.70));  // cosmoflow's threshold
  EXPECT_THROW(accelerator_utilization(1, 0), InputError);
  EXPECT_THROW(accelerator_utilization(-1, 10), InputError);
}

}  // namespace
}  // namespace gpemu::dlio
