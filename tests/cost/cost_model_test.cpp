// Composing step costs: measured profiles first, estimates for the rest, each
// figure flagged with where it came from.
#include <gtest/gtest.h>

#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "support/cost_test_util.h"

namespace gpemu {
namespace {

using testing::TempDir;

// A tiny GPEmu tree: V100 tinynet measured at 1, 2, 4, 8 (tail 16, 32, 64);
// V100 resnet50 with compute times only.
void write_profiles(const TempDir& dir) {
  const std::string fwd = "time/compute/forward/Tesla_V100-PCIE-32GB/";
  const std::string bwd = "time/compute/backward/Tesla_V100-PCIE-32GB/";
  dir.write(fwd + "tinynet/time_by_batch_size.csv",
            "Batch_Size,Time_In_SECONDS\n1,0.010\n2,0.012\n4,0.020\n8,0.031\n16,0.5\n32,1.0\n64,2.0\n");
  dir.write(bwd + "tinynet/time_by_batch_size.csv",
            "Batch_Size,Time_In_SECONDS\n1,0.020\n2,0.024\n4,0.040\n8,0.066\n16,1.0\n32,2.0\n64,4.0\n");
  dir.write("time/transfer/Tesla_V100-PCIE-32GB/tinynet/data_transfer_time_by_batch_size.csv",
            "Batch_Size,Time_In_SECONDS\n1,0.0005\n8,0.004\n");
  dir.write("time/transfer/Tesla_V100-PCIE-32GB/tinynet/model_transfer_time.txt", "0.25\n");
  dir.write("memory/Tesla_V100-PCIE-32GB/tinynet/memory.csv",
            "batch_size,peak,persistent\n1,100,50.57421875\n2,150,51.1484375\n4,250,52.296875\n8,450,54.59375\n");
  dir.write(fwd + "resnet50/time_by_batch_size.csv", "Batch_Size,Time_In_SECONDS\n32,0.030\n64,0.060\n");
  dir.write(bwd + "resnet50/time_by_batch_size.csv", "Batch_Size,Time_In_SECONDS\n32,0.070\n64,0.140\n");
}

const GpuSpec& v100() { return find_gpu("V100-PCIE-32GB"); }

TEST(CostModel, WithoutProfilesRunsOnEstimates) {
  std::unique_ptr<CostModel> model = make_cost_model(std::nullopt);
  StepCost c = model->step_cost(v100(), kDefaultModel, 32);
  EXPECT_EQ(c.forward_provenance, Provenance::Estimated);
  EXPECT_GT(c.forward, 0);
  EXPECT_GT(c.backward, c.forward);
  EXPECT_GT(c.peak_bytes, c.persistent_bytes);
  EXPECT_NE(model->describe().find("built-in estimates"), std::string::npos);
  auto names = model->models();
  EXPECT_NE(std::find(names.begin(), names.end(), "resnet18"), names.end());
}

TEST(CostModel, ReplaysAMeasuredBatchSizeExactly) {
  TempDir dir;
  write_profiles(dir);
  std::unique_ptr<CostModel> model = make_cost_model(dir.path());
  StepCost c = model->step_cost(v100(), "tinynet", 4);
  EXPECT_EQ(c.forward, 20 * kMillisecond);
  EXPECT_EQ(c.backward, 40 * kMillisecond);
  EXPECT_EQ(c.forward_provenance, Provenance::Measured);
  EXPECT_EQ(c.backward_provenance, Provenance::Measured);
  EXPECT_EQ(c.memory_provenance, Provenance::Measured);
  EXPECT_EQ(c.peak_bytes, 250u * 1048576);
  EXPECT_EQ(c.persistent_bytes, 50u * 1048576);  // the input batch is not persistent
  EXPECT_EQ(c.input_bytes_per_sample, 602112u);
  ASSERT_TRUE(c.transfer_pageable.has_value());
  EXPECT_FALSE(c.transfer_pinned.has_value());
  EXPECT_EQ(c.model_transfer, 250 * kMillisecond);
  EXPECT_EQ(c.oom_evidence_batch, 16);
  EXPECT_NE(c.note.find("forward measured"), std::string::npos) << c.note;
  EXPECT_NE(c.note.find(dir.path().string()), std::string::npos) << c.note;
  EXPECT_NE(c.note.find("batch 16 did not fit"), std::string::npos) << c.note;
}

TEST(CostModel, InterpolatesTheMidpointExactly) {
  TempDir dir;
  write_profiles(dir);
  std::unique_ptr<CostModel> model = make_cost_model(dir.path());
  StepCost c = model->step_cost(v100(), "tinynet", 3);
  EXPECT_EQ(c.forward, 16 * kMillisecond);
  EXPECT_EQ(c.backward, 32 * kMillisecond);
  EXPECT_EQ(c.peak_bytes, 200u * 1048576);
  EXPECT_EQ(c.forward_provenance, Provenance::Interpolated);
  EXPECT_EQ(c.memory_provenance, Provenance::Interpolated);
  StepCost r = model->step_cost(v100(), "resnet50", 48);
  EXPECT_EQ(r.forward, 45 * kMillisecond);
  EXPECT_EQ(r.backward, 105 * kMillisecond);
}

TEST(CostModel, FlagsExtrapolationPastTheMeasuredSizes) {
  TempDir dir;
  write_profiles(dir);
  std::unique_ptr<CostModel> model = make_cost_model(dir.path());
  // Batch 32 was in GPEmu's table, but as an extrapolated tail row: never replayed.
  StepCost c = model->step_cost(v100(), "tinynet", 32);
  EXPECT_EQ(c.forward_provenance, Provenance::Extrapolated);
  EXPECT_EQ(c.backward_provenance, Provenance::Extrapolated);
  EXPECT_EQ(c.memory_provenance, Provenance::Extrapolated);
  EXPECT_NE(c.forward, 1 * kSecond);
  EXPECT_EQ(c.oom_evidence_batch, 16);
  EXPECT_NE(c.note.find("forward extrapolated beyond batch 8"), std::string::npos) << c.note;
  StepCost r = model->step_cost(v100(), "resnet50", 128);
  EXPECT_EQ(r.forward, 120 * kMillisecond);
  EXPECT_EQ(r.forward_provenance, Provenance::Extrapolated);
}

TEST(CostModel, FillsWhatAProfileLacksWithEstimates) {
  TempDir dir;
  write_profiles(dir);
  std::unique_ptr<CostModel> model = make_cost_model(dir.path());
  StepCost c = model->step_cost(v100(), "resnet50", 64);  // times measured, memory not
  EXPECT_EQ(c.forward_provenance, Provenance::Measured);
  EXPECT_EQ(c.memory_provenance, Provenance::Estimated);
  EXPECT_EQ(c.peak_bytes, estimate_step_cost(v100(), "resnet50", 64).peak_bytes);
  EXPECT_NE(c.note.find("memory estimated"), std::string::npos) << c.note;

  // No profile on this GPU: the whole step is estimated.
  StepCost a = model->step_cost(find_gpu("A100-SXM4-40GB"), "resnet50", 64);
  EXPECT_EQ(a.forward_provenance, Provenance::Estimated);
  EXPECT_EQ(a.note.rfind("estimate: no measured profile for A100-SXM4-40GB/resnet50", 0), 0u) << a.note;
}

TEST(CostModel, UnknownModelListsTheKnownOnes) {
  TempDir dir;
  write_profiles(dir);
  std::unique_ptr<CostModel> model = make_cost_model(dir.path());
  try {
    model->step_cost(v100(), "gpt3", 8);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("unknown model 'gpt3'"), std::string::npos) << what;
    EXPECT_NE(what.find("tinynet"), std::string::npos) << what;
    EXPECT_NE(what.find("resnet18"), std::string::npos) << what;
  }
  // A model profiled only on another GPU, with no built-in figures.
  try {
    model->step_cost(find_gpu("M40"), "tinynet", 8);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("profiles for it exist on V100-PCIE-32GB"), std::string::npos) << e.what();
  }
  auto names = model->models();
  EXPECT_NE(std::find(names.begin(), names.end(), "tinynet"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "vgg16"), names.end());
}

TEST(CostModel, RejectsBatchSizesBelowOne) {
  TempDir dir;
  write_profiles(dir);
  std::unique_ptr<CostModel> measured = make_cost_model(dir.path());
  std::unique_ptr<CostModel> estimated = make_cost_model(std::nullopt);
  EXPECT_THROW(measured->step_cost(v100(), "tinynet", 0), InputError);
  EXPECT_THROW(estimated->step_cost(v100(), "resnet50", -1), InputError);
}

TEST(CostModel, AMissingProfileFolderIsAnInputError) {
  TempDir dir;
  EXPECT_THROW(make_cost_model(dir.path() / "nowhere"), InputError);
}

TEST(CostModel, PinnedTransferRowsFillTheirOwnField) {
  TempDir dir;
  Profile p;
  p.gpu = "V100-PCIE-32GB";
  p.model = "resnet18";
  p.transfer_host_memory = HostMemoryKind::Pinned;
  p.forward_s = {{64, 0.02}};
  p.backward_s = {{64, 0.05}};
  p.transfer_s = {{64, 0.004}};
  p.peak_reserved_mib = {{64, 3000}};
  p.forward_cv = {{64, 0.02}};
  write_native_profile(p, dir.path());
  StepCost c = make_cost_model(dir.path())->step_cost(v100(), "resnet18", 64);
  EXPECT_EQ(c.transfer_pinned, 4 * kMillisecond);
  EXPECT_FALSE(c.transfer_pageable.has_value());
  EXPECT_EQ(c.peak_reserved_bytes, 3000u * 1048576);
  EXPECT_EQ(c.forward_cv, 0.02);
  EXPECT_FALSE(c.backward_cv.has_value());
}

TEST(CostModel, ReplaysTheSharedGPEmuProfiles) {
  GPEMU_REQUIRE_SHARED_PROFILES(shared);
  std::unique_ptr<CostModel> model = make_cost_model(shared);
  StepCost c = model->step_cost(v100(), "resnet50", 256);
  EXPECT_EQ(c.forward, from_seconds(0.23559343814849854));
  EXPECT_EQ(c.forward_provenance, Provenance::Measured);
  ASSERT_TRUE(c.transfer_pageable.has_value());
  EXPECT_FALSE(c.oom_evidence_batch.has_value());

  // ResNet-50 did not fit at 125 on the M40: 200 is extrapolated, with evidence.
  StepCost m = model->step_cost(find_gpu("Tesla_M40"), "resnet50", 200);
  EXPECT_EQ(m.forward_provenance, Provenance::Extrapolated);
  EXPECT_EQ(m.memory_provenance, Provenance::Extrapolated);
  EXPECT_EQ(m.oom_evidence_batch, 125);
  EXPECT_NE(model->describe().find("120 GPU/model pairs on 4 GPUs"), std::string::npos) << model->describe();
}

}  // namespace
}  // namespace gpemu
