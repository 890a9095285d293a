// A machine's measured loader scaling (loader_scaling.h): the file, the
// per-worker efficiency between and beyond the measured counts, and the
// modelled loader dividing each worker's CPU costs by it, to the nanosecond.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gpemu/clock.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/pipeline/loader_scaling.h"

namespace gpemu::pipeline {
namespace {

// torch's DataLoader on the H200's host, as loader_scaling.py writes it
// (a 0-worker row, columns besides the two read).
constexpr const char* kTorchLike =
    "workers,images_per_s,per_image_ms,cores,images\n"
    "0,190.0,5.262,16,2000\n"
    "1,100.0,10.0,16,2000\n"
    "# a comment\n"
    "4,300.0,3.3,16,2000\n"
    "2,180.0,5.5,16,2000\n";

std::string error_of(const std::string& text) {
  try {
    parse_loader_scaling(text, "f.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LoaderScaling, EfficiencyIsPerWorkerRateOverOneWorkersBetweenAndBeyondTheMeasuredCounts) {
  const LoaderScaling s = parse_loader_scaling(kTorchLike, "f.csv");
  ASSERT_EQ(s.points.size(), 3u);  // the 0-worker row skipped, sorted by workers
  EXPECT_EQ(s.points.front().first, 1);
  EXPECT_DOUBLE_EQ(s.efficiency(1), 1.0);
  EXPECT_DOUBLE_EQ(s.efficiency(0.5), 1.0);
  EXPECT_DOUBLE_EQ(s.efficiency(2), 0.9);               // 180 / (2 x 100)
  EXPECT_DOUBLE_EQ(s.efficiency(4), 0.75);              // 300 / (4 x 100)
  EXPECT_DOUBLE_EQ(s.efficiency(3), (0.9 + 0.75) / 2);  // linear between 2 and 4
  EXPECT_DOUBLE_EQ(s.efficiency(64), 0.75);             // the last count's beyond it
  EXPECT_DOUBLE_EQ(LoaderScaling{}.efficiency(16), 1.0);
}

TEST(LoaderScaling, AFileThatIsNotAScalingIsOneLineNamingTheLine) {
  EXPECT_NE(error_of("workers,rate\n1,100\n").find("f.csv:1: the header has no images_per_s column"),
            std::string::npos);
  EXPECT_NE(error_of("workers,images_per_s\n2,100\n4,150\n").find("no row of 1 worker"), std::string::npos);
  EXPECT_NE(error_of("workers,images_per_s\n1,100\n1,120\n").find("f.csv:3: a second row of 1 workers"),
            std::string::npos);
  EXPECT_NE(error_of("workers,images_per_s\n1,100\n2,-5\n").find("f.csv:3: -5 images per second"), std::string::npos);
  EXPECT_NE(error_of("workers,images_per_s\n1,100\n2.5,150\n").find("f.csv:3: 2.5 workers"), std::string::npos);
  EXPECT_NE(error_of("workers,images_per_s\n1,100\n2,fast\n").find("f.csv:3: a row needs a number"), std::string::npos);
  EXPECT_NE(error_of("workers,images_per_s\n1,nan\n").find("a row needs a number"), std::string::npos);
  EXPECT_NE(error_of("").find("no header line"), std::string::npos);
  EXPECT_NE(error_of("workers,images_per_s\n1,100\n99999,100\n").find("99999 workers"), std::string::npos);
}

TEST(LoaderScaling, AMissingFileOrAFolderIsOneLineNamingIt) {
  for (const std::string& path :
       {std::string("/nonexistent/scaling.csv"), std::filesystem::temp_directory_path().string()}) {
    try {
      read_loader_scaling(path);
      ADD_FAILURE() << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  const auto file = std::filesystem::temp_directory_path() / ("gpemu-scaling-" + std::to_string(::getpid()) + ".csv");
  std::ofstream(file) << kTorchLike;
  EXPECT_EQ(read_loader_scaling(file).points.size(), 3u);
  std::filesystem::remove(file);
}

// Eight JPEGs, 1 ms to read and 3 ms to decode each, batches of two: a batch
// costs a worker 8 ms alone.
Dataset eight_jpegs() {
  Dataset d;
  d.root = "eight";
  for (std::uint64_t i = 0; i < 8; ++i)
    d.samples.push_back({.path = "f", .offset = i * 1536, .length = 1536, .format = SampleFormat::Jpeg});
  return d;
}

Time epoch_end(int workers, int cores, std::shared_ptr<const LoaderScaling> scaling) {
  auto clock = make_virtual_clock();
  LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = workers;
  o.prefetch_factor = 2;
  o.transform.height = o.transform.width = 8;
  LoaderModelOptions m;
  m.read_per_sample = kMillisecond;
  m.read_bytes_per_s = 0;
  m.decode_per_sample = 3 * kMillisecond;
  m.decode_ns_per_byte = 0;
  m.cores = cores;
  m.scaling = std::move(scaling);
  ModelledLoader loader(*clock, eight_jpegs(), o, m);
  loader.begin_epoch(0);
  Time last = 0;
  while (auto b = loader.next({})) last = b->ready;
  return last;
}

TEST(LoaderScaling, TheModelledLoaderDividesEachWorkersCostsByTheEfficiencyOfTheWorkersBusy) {
  const auto s = std::make_shared<const LoaderScaling>(parse_loader_scaling(kTorchLike, "f.csv"));
  // One worker: efficiency 1, four batches of 8 ms.
  EXPECT_EQ(epoch_end(1, 4, nullptr), 32 * kMillisecond);
  EXPECT_EQ(epoch_end(1, 4, s), 32 * kMillisecond);
  // Two workers on 4 cores: two batches each, in parallel; at 0.9 each batch takes 8 / 0.9 ms.
  EXPECT_EQ(epoch_end(2, 4, nullptr), 16 * kMillisecond);
  // (Each read and decode is rounded to the nanosecond on its own: within 4 ns.)
  EXPECT_NEAR(epoch_end(2, 4, s), 16e6 / 0.9, 4);
  // Four workers on 2 cores, a batch each: twice oversubscribed (16 ms), and two cores busy (0.9).
  EXPECT_EQ(epoch_end(4, 2, nullptr), 16 * kMillisecond);
  EXPECT_NEAR(epoch_end(4, 2, s), 16e6 / 0.9, 4);
}

}  // namespace
}  // namespace gpemu::pipeline
