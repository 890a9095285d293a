// DLIO checkpointing: when checkpoints are due (pure rules), what files a rank
// writes, and writing/reading them on real storage.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpemu/dlio.h"
#include "gpemu/error.h"
#include "support/dlio_test_util.h"

namespace gpemu::dlio {
namespace {

namespace fs = std::filesystem;

DlioWorkload with_checkpoints(int epochs, int after, int between, std::int64_t steps_between = -1) {
  DlioWorkload w;
  w.workflow.checkpoint = true;
  w.train.epochs = epochs;
  w.checkpoint.checkpoint_after_epoch = after;
  w.checkpoint.epochs_between_checkpoints = between;
  w.checkpoint.steps_between_checkpoints = steps_between;
  w.dataset.num_files_train = 100;
  w.reader.batch_size = 10;  // 10 steps per epoch
  return w;
}

std::vector<int> epochs_of(const std::vector<CheckpointEvent>& events) {
  std::vector<int> out;
  for (const CheckpointEvent& e : events) out.push_back(e.epoch);
  return out;
}

std::vector<char> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// --- Schedule ---------------------------------------------------------------------

TEST(DlioCheckpointSchedule, EpochRuleAsInMlperfUnet3d) {
  // unet3d: checkpoint_after_epoch 5, epochs_between_checkpoints 2, 5 epochs: only after epoch 5.
  const DlioWorkload unet = with_checkpoints(5, 5, 2);
  EXPECT_EQ(epochs_of(checkpoint_schedule(unet)), std::vector<int>{5});
  const auto events = checkpoint_schedule(unet);
  EXPECT_EQ(events[0], (CheckpointEvent{5, 10, true}));
  EXPECT_EQ(epochs_of(checkpoint_schedule(with_checkpoints(10, 5, 2))), (std::vector<int>{5, 7, 9}));
  EXPECT_EQ(epochs_of(checkpoint_schedule(with_checkpoints(3, 1, 1))), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(checkpoint_schedule(with_checkpoints(4, 5, 1)).empty());

  const DlioWorkload w = with_checkpoints(10, 3, 4);
  EXPECT_FALSE(checkpoint_after_epoch(w, 2));
  EXPECT_TRUE(checkpoint_after_epoch(w, 3));
  EXPECT_FALSE(checkpoint_after_epoch(w, 5));
  EXPECT_TRUE(checkpoint_after_epoch(w, 7));
  EXPECT_FALSE(checkpoint_after_step(w, 3, 10));  // epoch rule only
}

TEST(DlioCheckpointSchedule, NothingWithoutWorkflowCheckpoint) {
  DlioWorkload w = with_checkpoints(5, 1, 1, 2);
  w.workflow.checkpoint = false;
  EXPECT_TRUE(checkpoint_schedule(w).empty());
  EXPECT_FALSE(checkpoint_after_epoch(w, 1));
  EXPECT_FALSE(checkpoint_after_step(w, 1, 2));
}

TEST(DlioCheckpointSchedule, StepRuleRestartsEachEpochAndIgnoresTheEpochRule) {
  const DlioWorkload w = with_checkpoints(2, 5, 3, /*steps_between=*/4);
  EXPECT_TRUE(checkpoint_after_step(w, 1, 4));
  EXPECT_TRUE(checkpoint_after_step(w, 1, 8));
  EXPECT_FALSE(checkpoint_after_step(w, 1, 6));
  EXPECT_FALSE(checkpoint_after_epoch(w, 5));
  const std::vector<CheckpointEvent> expected = {{1, 4, false}, {1, 8, false}, {2, 4, false}, {2, 8, false}};
  EXPECT_EQ(checkpoint_schedule(w), expected);
}

TEST(DlioCheckpointSchedule, BertEveryTwoHundredFiftySteps) {
  DlioWorkload w = with_checkpoints(1, 1, 1, 250);
  w.dataset.num_files_train = 500;
  w.dataset.num_samples_per_file = 313532;
  w.reader.batch_size = 48;
  w.train.total_training_steps = 1000;
  std::vector<std::uint64_t> steps;
  for (const CheckpointEvent& e : checkpoint_schedule(w)) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<std::uint64_t>{250, 500, 750, 1000}));
}

TEST(DlioCheckpointSchedule, CheckpointOnlyMode) {
  DlioWorkload w;
  w.workflow.train = false;
  w.workflow.checkpoint = true;
  w.checkpoint.num_checkpoints_write = 3;
  const std::vector<CheckpointEvent> expected = {{0, 1, false}, {0, 2, false}, {0, 3, false}};
  EXPECT_EQ(checkpoint_schedule(w), expected);
}

// --- Layout ----------------------------------------------------------------------------

TEST(DlioCheckpointLayout, RankZeroOrAllRanks) {
  DlioWorkload w;
  w.model.model_size_bytes = 1000;
  EXPECT_TRUE(rank_writes_checkpoint(w, 0));
  EXPECT_FALSE(rank_writes_checkpoint(w, 1));
  EXPECT_TRUE(checkpoint_files(w, 1, 2, 1, 0).empty());
  const auto files = checkpoint_files(w, 0, 2, 3, 40);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].path, fs::path("epoch3-step40/rank0-model.bin"));
  EXPECT_EQ(files[0].bytes, 1000u);
  w.checkpoint.type = CheckpointType::AllRanks;
  EXPECT_EQ(checkpoint_files(w, 1, 2, 3, 40).at(0).path, fs::path("epoch3-step40/rank1-model.bin"));
  EXPECT_EQ(checkpoint_bytes_per_rank(w, 1, 2), 1000u);
}

TEST(DlioCheckpointLayout, LayersSplitByTensorAndPipelineParallelism) {
  DlioWorkload w;
  w.checkpoint.type = CheckpointType::AllRanks;
  w.model.layer_parameters = {1024, 2048};
  w.model.num_layers = 4;
  w.model.parallelism.tensor = 2;
  w.model.parallelism.pipeline = 2;
  w.model.optimization_groups = {1024, 528};
  w.gpemu.world_size = 4;
  validate(w);
  // rank 0: pipeline stage 0 holds layers 0 and 1; each is (1024 + 2048) / 2 fp16 elements.
  auto files = checkpoint_files(w, 0, 4, 1, 0);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].path.filename(), "rank0-layer0-model.bin");
  EXPECT_EQ(files[0].bytes, 3072u);
  EXPECT_EQ(files[1].path.filename(), "rank0-layer1-model.bin");
  EXPECT_EQ(files[2].path.filename(), "rank0-optimizer.bin");
  EXPECT_EQ(files[2].bytes, 2u * (1024 + 528) * 4);  // two fp32 tensors per group
  // rank 2 is in pipeline stage 1: layers 2 and 3.
  files = checkpoint_files(w, 2, 4, 1, 0);
  EXPECT_EQ(files[0].path.filename(), "rank2-layer2-model.bin");
  EXPECT_EQ(files[1].path.filename(), "rank2-layer3-model.bin");
  EXPECT_EQ(checkpoint_bytes_per_rank(w, 2, 4), 2u * 3072 + 12416);
}

TEST(DlioCheckpointLayout, FolderResolution) {
  DlioWorkload w;
  w.checkpoint.checkpoint_folder = "checkpoints/unet3d";
  EXPECT_EQ(resolve_checkpoint_folder(w, "/base"), fs::path("/base/checkpoints/unet3d"));
  w.storage.storage_root = "/mnt/nvme";
  EXPECT_EQ(resolve_checkpoint_folder(w, "/base"), fs::path("/mnt/nvme/checkpoints/unet3d"));
  w.checkpoint.checkpoint_folder = "/abs/ckpt/";
  EXPECT_EQ(resolve_checkpoint_folder(w, "/base"), fs::path("/abs/ckpt/"));
}

// --- Writing and reading ------------------------------------------------------------------

TEST(DlioCheckpointIo, WritesExactlyTheModelSizeAndReadsItBack) {
  testing::TempDir dir;
  DlioWorkload w;
  w.checkpoint.checkpoint_folder = (dir.path() / "ckpt").string();
  w.model.model_size_bytes = 1000003;  // not a multiple of the page or the block
  CheckpointIoOptions o;
  o.epoch = 2;
  o.step = 7;
  o.read_back = true;
  o.block_bytes = 64 << 10;
  o.fsync = true;
  const CheckpointResult r = write_checkpoint(w, o);
  ASSERT_EQ(r.files.size(), 1u);
  const fs::path file = dir.path() / "ckpt" / "epoch2-step7" / "rank0-model.bin";
  EXPECT_EQ(r.files[0].path, file);
  EXPECT_EQ(r.directory, dir.path() / "ckpt" / "epoch2-step7");
  EXPECT_EQ(fs::file_size(file), 1000003u);
  EXPECT_EQ(r.bytes_written, 1000003u);
  EXPECT_EQ(r.bytes_read, 1000003u);
  EXPECT_TRUE(r.verified);
  EXPECT_GE(r.write_seconds, 0);
  EXPECT_GE(r.write_gbs, 0);

  // Reading again, with another block size, verifies the same bytes.
  CheckpointIoOptions again = o;
  again.block_bytes = 1 << 20;
  const CheckpointResult rr = read_checkpoint(w, again);
  EXPECT_EQ(rr.bytes_read, 1000003u);
  EXPECT_TRUE(rr.verified);

  // No two 4 KiB pages are the same, even 1 MiB apart (the random base's period).
  const std::vector<char> bytes = read_all(file);
  ASSERT_EQ(bytes.size(), 1000003u);
  EXPECT_NE(std::string(bytes.begin(), bytes.begin() + 4096), std::string(bytes.begin() + 4096, bytes.begin() + 8192));

  // A changed byte is found and named.
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(500000);
    const char c = static_cast<char>(bytes[500000] ^ 0x5A);
    f.write(&c, 1);
  }
  try {
    read_checkpoint(w, again);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), file.string());
    EXPECT_CONTAINS(e.what(), "at byte 500000");
  }
}

TEST(DlioCheckpointIo, LargeFilesRepeatNoPage) {
  testing::TempDir dir;
  DlioWorkload w;
  w.checkpoint.checkpoint_folder = (dir.path() / "ckpt").string();
  w.model.model_size_bytes = (1 << 20) + 8192;
  const CheckpointResult r = write_checkpoint(w);
  const std::vector<char> bytes = read_all(r.files.at(0).path);
  ASSERT_EQ(bytes.size(), (1u << 20) + 8192);
  EXPECT_NE(std::string(bytes.begin(), bytes.begin() + 4096),
            std::string(bytes.begin() + (1 << 20), bytes.begin() + (1 << 20) + 4096));
}

TEST(DlioCheckpointIo, OnesWhenTensorsAreNotRandomized) {
  testing::TempDir dir;
  DlioWorkload w;
  w.checkpoint.checkpoint_folder = dir.path().string();
  w.checkpoint.randomize_tensor = false;
  w.model.model_size_bytes = 10000;
  CheckpointIoOptions o;
  o.read_back = true;
  const CheckpointResult r = write_checkpoint(w, o);
  EXPECT_TRUE(r.verified);
  const std::vector<char> bytes = read_all(r.files.at(0).path);
  ASSERT_EQ(bytes.size(), 10000u);
  for (char b : bytes) ASSERT_EQ(b, 1);
}

TEST(DlioCheckpointIo, EveryLayerFileOfARank) {
  testing::TempDir dir;
  DlioWorkload w;
  w.checkpoint.checkpoint_folder = dir.path().string();
  w.checkpoint.type = CheckpointType::AllRanks;
  w.model.layer_parameters = {100, 28};
  w.model.num_layers = 3;
  w.model.optimization_groups = {64};
  w.gpemu.world_size = 2;
  CheckpointIoOptions o;
  o.rank = 1;
  o.read_back = true;
  const CheckpointResult r = write_checkpoint(w, o);
  ASSERT_EQ(r.files.size(), 4u);
  std::uint64_t total = 0;
  for (const CheckpointFile& f : r.files) {
    EXPECT_EQ(fs::file_size(f.path), f.bytes) << f.path;
    total += f.bytes;
  }
  EXPECT_EQ(total, 3u * 128 * 2 + 2u * 64 * 4);
  EXPECT_EQ(r.bytes_written, total);
  EXPECT_TRUE(r.verified);
}

TEST(DlioCheckpointIo, ARankThatDoesNotWriteTouchesNothing) {
  testing::TempDir dir;
  DlioWorkload w;
  w.checkpoint.checkpoint_folder = (dir.path() / "ckpt").string();
  w.gpemu.world_size = 2;
  CheckpointIoOptions o;
  o.rank = 1;
  const CheckpointResult r = write_checkpoint(w, o);
  EXPECT_TRUE(r.files.empty());
  EXPECT_EQ(r.bytes_written, 0u);
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt"));
  o.rank = 2;
  EXPECT_THROW(write_checkpoint(w, o), InputError);
}

TEST(DlioCheckpointIo, AnUnwritableFolderIsAnInputErrorNamingThePath) {
  testing::TempDir dir;
  dir.write("plain-file", "x");
  DlioWorkload w;
  w.checkpoint.checkpoint_folder = (dir.path() / "plain-file" / "ckpt").string();
  try {
    write_checkpoint(w);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), (dir.path() / "plain-file" / "ckpt").string());
    EXPECT_CONTAINS(e.what(), "checkpoint.checkpoint_folder");
  }
}

TEST(DlioCheckpointIo, AMissingCheckpointIsAnInputErrorNamingTheFile) {
  testing::TempDir dir;
  DlioWorkload w;
  w.checkpoint.checkpoint_folder = dir.path().string();
  try {
    read_checkpoint(w);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), (dir.path() / "epoch1-step0" / "rank0-model.bin").string());
  }
}

}  // namespace
}  // namespace gpemu::dlio
