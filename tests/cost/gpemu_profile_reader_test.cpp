// Reading GPEmu's profiled_data layout: good trees, and every malformed file
// reported with its path, line and what would be accepted.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "support/cost_test_util.h"

namespace gpemu {
namespace {

using testing::TempDir;

constexpr const char* kForward = "time/compute/forward/Tesla_V100-PCIE-32GB/tinynet/time_by_batch_size.csv";
constexpr const char* kBackward = "time/compute/backward/Tesla_V100-PCIE-32GB/tinynet/time_by_batch_size.csv";
constexpr const char* kTransfer = "time/transfer/Tesla_V100-PCIE-32GB/tinynet/data_transfer_time_by_batch_size.csv";
constexpr const char* kModelTransfer = "time/transfer/Tesla_V100-PCIE-32GB/tinynet/model_transfer_time.txt";
constexpr const char* kMemory = "memory/Tesla_V100-PCIE-32GB/tinynet/memory.csv";

// 602112 bytes (one 3x224x224 FP32 image) is exactly 0.57421875 MiB.
constexpr double kImageMiB = 0.57421875;

void write_good_tree(const TempDir& dir) {
  // Rows 5..7 lie on a line GPEmu appended past the OOM point; batch sizes as floats.
  dir.write(kForward,
            "Batch_Size,Time_In_SECONDS\n1.0,0.010\n2.0,0.0125\n3.0,0.0131\n4.0,0.0162\n"
            "5.0,0.5\n6.0,0.6\n7.0,0.7\n");
  dir.write(kBackward, "Batch_Size,Time_In_SECONDS\n3,0.031\n1,0.020\n2,0.025\n4,0.043\n5,1.0\n6,1.2\n7,1.4\n");
  dir.write(kTransfer, "Batch_Size,Time_In_SECONDS\n1,0.0005\n2,0.0009\n4,0.0017\n8,0.0033\n");
  dir.write(kModelTransfer, "0.03208667039871216\n");
  dir.write(kMemory,
            "batch_size,peak,persistent\n"
            "1.0,150.0," +
                std::to_string(100 + 1 * kImageMiB) +
                "\n"
                "2.0,200.0," +
                std::to_string(100 + 2 * kImageMiB) +
                "\n"
                "4.0,300.0," +
                std::to_string(100 + 4 * kImageMiB) +
                "\n"
                "5.0,350.0," +
                std::to_string(100 + 5 * kImageMiB) +
                "\n"
                "8.0,500.0," +
                std::to_string(100 + 8 * kImageMiB) + "\n");
}

// GPEmu's complete profiled_data has fitted rows with impossible values and
// folders missing a file: read leniently, each is reported once, naming the
// file and line or the folder, and the rest is read.
TEST(GPEmuReader, LenientReadSkipsBadRowsAndFoldersAndReadsTheRest) {
  TempDir dir;
  write_good_tree(dir);
  dir.write(kMemory, "batch_size,peak,persistent\n1,150,100.6\n2,200,-3.5\n4,300,102.3\n");
  dir.write(kBackward, "Batch_Size,Time_In_SECONDS\n1,0.020\n2,lots\n2,0.025\n");
  // A second model whose forward folder has no table.
  dir.write("time/compute/forward/Tesla_V100-PCIE-32GB/othernet/notes.txt", "no table here");
  dir.write("memory/Tesla_V100-PCIE-32GB/othernet/memory.csv", "batch_size,peak,persistent\n1,50,40\n");
  // Strictly, the first problem stops the read.
  EXPECT_THROW(read_gpemu_artifact(dir.path()), InputError);

  std::vector<std::string> skipped;
  std::vector<Profile> profiles = read_gpemu_artifact(dir.path(), &skipped);
  ASSERT_EQ(skipped.size(), 3u);
  const std::string memory = (dir.path() / kMemory).string(), backward = (dir.path() / kBackward).string();
  auto said = [&](std::string_view what) {
    return std::count_if(skipped.begin(), skipped.end(),
                         [&](const std::string& s) { return s.find(what) != std::string::npos; });
  };
  EXPECT_EQ(said(memory + ":3: persistent '-3.5' is invalid"), 1);
  EXPECT_EQ(said(backward + ":3: Time_In_SECONDS 'lots' is invalid"), 1);
  EXPECT_EQ(said("time_by_batch_size.csv: missing file"), 1);
  EXPECT_EQ(said("row skipped"), 2);
  EXPECT_EQ(said("folder " + (dir.path() / "time/compute/forward/Tesla_V100-PCIE-32GB/othernet").string() + " skipped"),
            1);
  ASSERT_EQ(profiles.size(), 2u);
  const Profile& other = profiles[0].model == "othernet" ? profiles[0] : profiles[1];
  const Profile& tiny = profiles[0].model == "othernet" ? profiles[1] : profiles[0];
  EXPECT_TRUE(other.forward_s.empty());
  ASSERT_EQ(other.peak_allocated_mib.size(), 1u);
  ASSERT_EQ(tiny.peak_allocated_mib.size(), 2u);  // batch 2's row is out, 1 and 4 are in
  EXPECT_EQ(tiny.peak_allocated_mib[1].batch_size, 4);
  ASSERT_EQ(tiny.backward_s.size(), 2u);  // the bad row is out; the later row for batch 2 is read
  EXPECT_DOUBLE_EQ(tiny.backward_s[1].value, 0.025);
  EXPECT_EQ(tiny.forward_s.size(), 4u);  // untouched

  // ProfileDatabase::load reads GPEmu's layout this way and keeps the lines.
  const ProfileDatabase db = ProfileDatabase::load(dir.path());
  EXPECT_EQ(db.warnings(), skipped);
  EXPECT_EQ(db.profiles().size(), 2u);
}

TEST(GPEmuReader, ReadsAGoodTree) {
  TempDir dir;
  write_good_tree(dir);
  std::vector<Profile> profiles = read_gpemu_artifact(dir.path());
  ASSERT_EQ(profiles.size(), 1u);
  const Profile& p = profiles[0];
  EXPECT_EQ(p.gpu, "V100-PCIE-32GB");  // resolved from the GPEmu folder name
  EXPECT_EQ(p.model, "tinynet");
  EXPECT_EQ(p.precision, Precision::FP32);
  EXPECT_EQ(p.transfer_host_memory, HostMemoryKind::Pageable);
  EXPECT_EQ(p.input_bytes_per_sample, 602112u);

  // Measured rows only; the straight tail 5..7 is gone and is OOM evidence.
  EXPECT_EQ(p.forward_s, (Series{{1, 0.010}, {2, 0.0125}, {3, 0.0131}, {4, 0.0162}}));
  EXPECT_EQ(p.backward_s, (Series{{1, 0.020}, {2, 0.025}, {3, 0.031}, {4, 0.043}}));  // sorted
  ASSERT_TRUE(p.oom_batch_size.has_value());
  EXPECT_EQ(*p.oom_batch_size, 5);

  EXPECT_EQ(p.transfer_s, (Series{{1, 0.0005}, {2, 0.0009}, {4, 0.0017}, {8, 0.0033}}));
  ASSERT_TRUE(p.model_transfer_s.has_value());
  EXPECT_EQ(*p.model_transfer_s, 0.03208667039871216);

  // Memory rows at or past the OOM batch are dropped; the input batch is
  // taken out of "persistent".
  EXPECT_EQ(p.peak_allocated_mib, (Series{{1, 150.0}, {2, 200.0}, {4, 300.0}}));
  ASSERT_EQ(p.persistent_mib.size(), 3u);
  for (const ProfilePoint& q : p.persistent_mib) EXPECT_NEAR(q.value, 100.0, 1e-5) << q.batch_size;
  EXPECT_TRUE(p.peak_reserved_mib.empty());
  EXPECT_NE(p.source.find(dir.path().string()), std::string::npos);
}

TEST(GPEmuReader, AcceptsPartialTrees) {
  TempDir dir;
  dir.write(kMemory, "batch_size,peak,persistent\n1,10,5\n2,12,5\n");
  std::vector<Profile> profiles = read_gpemu_artifact(dir.path());
  ASSERT_EQ(profiles.size(), 1u);
  EXPECT_TRUE(profiles[0].forward_s.empty());
  EXPECT_EQ(profiles[0].peak_allocated_mib.size(), 2u);
  EXPECT_FALSE(profiles[0].oom_batch_size.has_value());
}

TEST(GPEmuReader, AcceptsColumnsInAnyOrderAndCaseWithBlankLinesAndCRLF) {
  TempDir dir;
  dir.write(kForward, "time_in_seconds,batch_size\r\n0.5,1\r\n\r\n0.75,2\r\n");
  std::vector<Profile> profiles = read_gpemu_artifact(dir.path());
  ASSERT_EQ(profiles.size(), 1u);
  EXPECT_EQ(profiles[0].forward_s, (Series{{1, 0.5}, {2, 0.75}}));
}

TEST(GPEmuReader, UnresolvableGpuFolderNamesThePath) {
  TempDir dir;
  dir.write("time/compute/forward/Imaginary_GPU_9000/tinynet/time_by_batch_size.csv",
            "Batch_Size,Time_In_SECONDS\n1,0.1\n");
  try {
    read_gpemu_artifact(dir.path());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("Imaginary_GPU_9000"), std::string::npos) << what;
    EXPECT_NE(what.find(dir.path().string()), std::string::npos) << what;
  }
}

TEST(GPEmuReader, TwoFoldersNamingOneGpuAreAnError) {
  TempDir dir;
  dir.write("time/compute/forward/Tesla_M40/tinynet/time_by_batch_size.csv", "Batch_Size,Time_In_SECONDS\n1,0.1\n");
  dir.write("time/compute/forward/M40/tinynet/time_by_batch_size.csv", "Batch_Size,Time_In_SECONDS\n1,0.2\n");
  try {
    read_gpemu_artifact(dir.path());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("both hold M40/tinynet"), std::string::npos) << e.what();
  }
}

TEST(GPEmuReader, MissingTableInAModelFolderNamesTheFile) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "time/compute/forward/Tesla_M40/tinynet");
  try {
    read_gpemu_artifact(dir.path());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("time_by_batch_size.csv"), std::string::npos) << e.what();
  }
}

// A malformed file: where it goes, what it holds, and what the message must say.
struct Malformed {
  std::string name;
  const char* file;
  std::string text;
  int line;
  std::string says;
};

class GPEmuReaderMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(GPEmuReaderMalformed, RaisesInputErrorWithFileAndLine) {
  const Malformed& m = GetParam();
  TempDir dir;
  std::filesystem::path file = dir.write(m.file, m.text);
  try {
    read_gpemu_artifact(dir.path());
    FAIL() << "expected InputError for " << m.name;
  } catch (const InputError& e) {
    std::string what = e.what();
    std::string where = file.string() + ":" + std::to_string(m.line) + ":";
    EXPECT_NE(what.find(where), std::string::npos) << "message lacks '" << where << "': " << what;
    EXPECT_NE(what.find(m.says), std::string::npos) << "message lacks '" << m.says << "': " << what;
    EXPECT_NE(what.find("expected"), std::string::npos) << "message does not say what is accepted: " << what;
  }
}

const std::string kHeader = "Batch_Size,Time_In_SECONDS\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, GPEmuReaderMalformed,
    ::testing::Values(
        Malformed{"EmptyFile", kForward, "", 1, "empty file"},
        Malformed{"BlankFile", kForward, "\n  \n", 1, "empty file"},
        Malformed{"MissingTimeColumn", kForward, "Batch_Size\n1\n", 1, "no column 'Time_In_SECONDS'"},
        Malformed{"MissingBatchColumn", kBackward, "size,Time_In_SECONDS\n1,0.1\n", 1, "no column 'Batch_Size'"},
        Malformed{"MissingPersistentColumn", kMemory, "batch_size,peak\n1,10\n", 1, "no column 'persistent'"},
        Malformed{"HeaderOnly", kForward, kHeader, 2, "no rows"},
        Malformed{"NonNumericTime", kForward, kHeader + "1,0.1\n2,fast\n", 3, "Time_In_SECONDS 'fast'"},
        Malformed{"NegativeTime", kForward, kHeader + "1,0.1\n2,0.2\n3,-0.3\n", 4, "'-0.3'"},
        Malformed{"NaNTime", kBackward, kHeader + "1,nan\n", 2, "'nan'"},
        Malformed{"AllZeroTimes", kForward, kHeader + "1,0\n2,0.0\n", 2, "every Time_In_SECONDS is 0"},  // S11
        Malformed{"FractionalBatch", kForward, kHeader + "1,0.1\n2.5,0.2\n", 3, "'2.5' is not a batch size"},
        Malformed{"ZeroBatch", kForward, kHeader + "0,0.1\n", 2, "'0' is not a batch size"},
        Malformed{"DuplicateBatch", kForward, kHeader + "1,0.1\n2,0.2\n2.0,0.3\n", 4,
                  "batch size 2 appears twice (first on line 3)"},
        Malformed{"TooFewFields", kTransfer, kHeader + "1,0.1\n2\n", 3, "1 fields, but the header has 2"},
        Malformed{"TooManyFields", kMemory, "batch_size,peak,persistent\n1,2,3,4\n", 2,
                  "4 fields, but the header has 3"},
        Malformed{"NegativeMemory", kMemory, "batch_size,peak,persistent\n1,10,5\n2,-1,5\n", 3, "peak '-1'"},
        Malformed{"PeakBelowPersistent", kMemory, "batch_size,peak,persistent\n1,400,300\n2,100,300\n", 3,
                  "peak 100 MiB is below persistent 300 MiB at batch size 2"},  // S11
        Malformed{"ModelTransferNotANumber", kModelTransfer, "\nabout 30 ms\n", 2, "'about 30 ms'"},
        Malformed{"ModelTransferTwoNumbers", kModelTransfer, "0.1\n0.2\n", 2, "a second value"},
        Malformed{"ModelTransferEmpty", kModelTransfer, "", 1, "empty file"}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return info.param.name; });

}  // namespace
}  // namespace gpemu
