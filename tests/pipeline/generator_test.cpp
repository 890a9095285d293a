#include "gpemu/pipeline.h"

#include <gtest/gtest.h>

#include <csignal>
#include <set>

#include "common/interrupt.h"
#include "pipeline/dataset_folder.h"
#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

// H4: a SIGTERM took 9.5 s to end a run that was drawing and writing a 3 GB
// record; both now look for a signal every 64 MiB, and no file is left.
TEST(Generator, ASignalStopsALargeRecordAndLeavesNoFile) {
  request_interrupt(SIGTERM);
  EXPECT_THROW(dlio_record_bytes(1, 0, 0, 1 << 20), Interrupted);
  testing::TempDir dir;
  const std::vector<std::byte> body(1 << 20);
  EXPECT_THROW(write_dataset_file(dir.path() / "f.npy", {}, body), Interrupted);
  clear_interrupt();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_EQ(dlio_record_bytes(1, 0, 0, 16).size(), 16u);
}

TEST(Generator, ImageNetLikeSizesHaveAMedianNear110KBAndALongTail) {
  testing::TempDir dir;
  const auto s = generate_image_dataset(dir.path(), 4, 48, 1, 110.0);
  EXPECT_EQ(s.images, 48u);
  EXPECT_GT(s.median_bytes, 110'000 * 0.7);
  EXPECT_LT(s.median_bytes, 110'000 * 1.4);
  EXPECT_GT(s.p90_bytes, s.median_bytes * 1.3);  // right tail
  EXPECT_GE(s.max_bytes, s.p90_bytes);

  const auto ds = open_image_folder(dir.path());
  ASSERT_EQ(ds.size(), 48u);
  JpegDecoder d;
  std::set<std::pair<int, int>> dims;
  for (const auto& sample : ds.samples) {
    const auto bytes = testing::read_all(sample.path);
    const auto info = d.read_info(std::as_bytes(std::span(bytes.data(), bytes.size())));
    dims.insert({info.width, info.height});
  }
  EXPECT_GT(dims.size(), 20u);  // resolutions vary
}

TEST(Generator, IsDeterministicForASeed) {
  testing::TempDir a, b, c;
  generate_image_dataset(a.path(), 2, 4, 5, 4.0);
  generate_image_dataset(b.path(), 2, 4, 5, 4.0);
  generate_image_dataset(c.path(), 2, 4, 6, 4.0);
  const auto name = "class_0001/img_00000003.JPEG";
  EXPECT_EQ(testing::read_all(a / name), testing::read_all(b / name));
  EXPECT_NE(testing::read_all(a / name), testing::read_all(c / name));
}

}  // namespace
}  // namespace gpemu::pipeline

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/interrupt.h"

namespace gpemu::pipeline {
namespace {

namespace fs = std::filesystem;

// D5: an interrupted synth left a partial folder later runs trained on.
TEST(SynthesizeImageFolder, AnInterruptedRunRemovesWhatItCreated) {
  testing::TempDir d;
  request_interrupt(SIGINT);
  EXPECT_THROW(synthesize_image_folder(d / "new", 2, 10, 0, 4.0), Interrupted);
  fs::create_directory(d / "empty");
  EXPECT_THROW(synthesize_image_folder(d / "empty", 2, 10, 0, 4.0), Interrupted);
  clear_interrupt();
  EXPECT_FALSE(fs::exists(d / "new"));
  EXPECT_TRUE(fs::is_empty(d / "empty")) << "an empty folder the user made stays, empty";
}

TEST(SynthesizeImageFolder, ANonEmptyFolderIsRefusedAndAKilledRunIsNotTrainedOn) {
  testing::TempDir d;
  d.write("mine/notes.txt", "x");
  EXPECT_THROW(synthesize_image_folder(d / "mine", 2, 4, 0, 4.0), InputError);
  const auto s = synthesize_image_folder(d / "ok", 2, 4, 0, 4.0);
  EXPECT_EQ(open_image_folder(d / "ok").size(), 4u);
  EXPECT_EQ(s.images, 4u);
  // What a SIGKILLed run leaves: its marker is still there.
  d.write(std::string("ok/") + kIncompleteDatasetMarker, "");
  try {
    open_image_folder(d / "ok");
    FAIL() << "an incomplete dataset must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is incomplete"), std::string::npos) << e.what();
  }
}

// U4: a failed write said "write failed" without the OS reason.
TEST(SynthesizeImageFolder, AFailedWriteNamesTheOsReason) {
  testing::TempDir d;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{2000, 2000};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      synthesize_image_folder(d / "s", 1, 3, 0, 40.0);
      ::_exit(1);
    } catch (const InputError& e) {
      ::_exit(std::string(e.what()).find("File too large") != std::string::npos ? 0 : 2);
    } catch (...) {
      ::_exit(3);
    }
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_FALSE(fs::exists(d / "s"));
}

}  // namespace
}  // namespace gpemu::pipeline
