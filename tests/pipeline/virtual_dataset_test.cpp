// Virtual datasets (pipeline.h, "dataset"): sizes without files, the presets'
// shape against GPEmu's ImageNet file-size CDF, and the sizes file's errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/spec_error.h"
#include "support/temp_dir.h"

namespace gpemu::pipeline {
namespace {

using testing::TempDir;

std::vector<std::uint64_t> sorted_sizes(const Dataset& d) {
  std::vector<std::uint64_t> v;
  for (const Sample& s : d.samples) v.push_back(s.length);
  std::sort(v.begin(), v.end());
  return v;
}

std::string error_of(std::string_view spec) {
  try {
    virtual_dataset(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(VirtualDataset, Imagenette10gHasTheArtifactsFileCountInTenClassesWithoutFiles) {
  const Dataset d = virtual_dataset("imagenette10g");
  ASSERT_EQ(d.size(), 87'473u);
  EXPECT_EQ(d.classes.size(), 10u);
  EXPECT_EQ(d.root, "virtual:imagenette10g");
  std::set<std::int64_t> labels;
  for (const Sample& s : d.samples) {
    EXPECT_EQ(s.format, SampleFormat::Jpeg);
    EXPECT_GT(s.length, 0u);
    labels.insert(s.label);
  }
  EXPECT_EQ(labels.size(), 10u);
  EXPECT_FALSE(std::filesystem::exists(d.samples.front().path));
  // About 10 GB: between 10^10 B (the artifact's "10G") and vmtouch's page bound.
  EXPECT_GT(d.total_bytes(), 10'000'000'000u);
  EXPECT_LT(d.total_bytes(), 10'731'847'680u);
}

TEST(VirtualDataset, Imagenet1kIsIlsvrcsTrainingSet) {
  const Dataset d = virtual_dataset("imagenet1k");
  EXPECT_EQ(d.size(), 1'281'167u);
  EXPECT_EQ(d.classes.size(), 1000u);
}

TEST(VirtualDataset, TheSeedPermutesTheSameSizes) {
  const Dataset a = virtual_dataset("imagenette10g", 1), b = virtual_dataset("imagenette10g", 1),
                c = virtual_dataset("imagenette10g", 2);
  std::size_t same_a_b = 0, same_a_c = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    same_a_b += a.samples[i].length == b.samples[i].length;
    same_a_c += a.samples[i].length == c.samples[i].length;
  }
  EXPECT_EQ(same_a_b, a.size());
  EXPECT_LT(same_a_c, a.size() / 10);
  EXPECT_EQ(sorted_sizes(a), sorted_sizes(c));
}

// The presets' sizes against the CDF they come from, where the shared data is.
TEST(VirtualDataset, SizesFollowGpemusImagenetFileSizeCdf) {
  const std::filesystem::path cdf =
      std::filesystem::path(GPEMU_SHARED_DIR) / "reference" / "published" / "repro" / "imagenet_file_size_cdf.csv";
  if (!std::filesystem::exists(cdf)) GTEST_SKIP() << "shared reference data absent: " << cdf << " not found";
  std::ifstream in(cdf);
  std::string line;
  std::getline(in, line);                         // header
  std::vector<std::pair<double, double>> points;  // (size, cumulative fraction)
  while (std::getline(in, line)) {
    const auto comma = line.find(',');
    points.emplace_back(std::stod(line.substr(0, comma)), std::stod(line.substr(comma + 1)) / 100);
  }
  ASSERT_GT(points.size(), 1000u);
  double mean = 0;
  for (std::size_t i = 1; i < points.size(); ++i)
    mean += (points[i].second - points[i - 1].second) * (points[i].first + points[i - 1].first) / 2;
  auto source_quantile = [&](double q) {
    for (std::size_t i = 1; i < points.size(); ++i)
      if (points[i].second >= q)
        return points[i - 1].first + (points[i].first - points[i - 1].first) * (q - points[i - 1].second) /
                                         (points[i].second - points[i - 1].second);
    return points.back().first;
  };
  const std::vector<std::uint64_t> sizes = sorted_sizes(virtual_dataset("imagenette10g"));
  const double ours = static_cast<double>(virtual_dataset("imagenette10g").total_bytes()) / sizes.size();
  EXPECT_NEAR(ours / mean, 1.0, 0.015) << ours << " vs " << mean;
  for (const double q : {0.05, 0.25, 0.5, 0.75, 0.95, 0.99}) {
    const double s = static_cast<double>(sizes[static_cast<std::size_t>(q * sizes.size())]);
    EXPECT_NEAR(s / source_quantile(q), 1.0, 0.01) << "quantile " << q;
  }
}

TEST(VirtualDataset, ASizesFileGivesOneSamplePerLine) {
  TempDir dir;
  const auto file = dir.write("sizes.txt", "# bytes per file\n1000\n\n  2500 \r\n15737107\n");
  const Dataset d = virtual_dataset("sizes=" + file.string());
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.total_bytes(), 1000u + 2500u + 15'737'107u);
  EXPECT_EQ(sorted_sizes(d), (std::vector<std::uint64_t>{1000, 2500, 15'737'107}));
}

TEST(VirtualDataset, BadInputNamesTheFileLineAndWhatIsAccepted) {
  for (const auto& [text, line] : std::vector<std::pair<std::string, std::string>>{
           {"12\nabc\n", ":2:"}, {"0\n", ":1:"}, {"1099511627777\n", ":1:"}, {"12.5\n", ":1:"}, {"-3\n", ":1:"}}) {
    try {
      parse_sample_sizes(text, "s.txt");
      FAIL() << "accepted " << text;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("s.txt" + line), std::string::npos) << what;
      EXPECT_NE(what.find("1 to 1099511627776"), std::string::npos) << what;
    }
  }
  EXPECT_NE(std::string(error_of("imagenet22k")).find("accepted imagenet1k, imagenette10g, imagenette or sizes=FILE"),
            std::string::npos);
  EXPECT_NE(error_of("sizes=/nonexistent/s.txt").find("/nonexistent/s.txt"), std::string::npos);
  TempDir dir;
  EXPECT_NE(error_of("sizes=" + dir.write("empty.txt", "# nothing\n").string()).find("no sample sizes"),
            std::string::npos);
  EXPECT_NE(error_of("sizes=" + dir.path().string()).find(dir.path().string()), std::string::npos);
  EXPECT_NE(error_of("sizes=").find("give a file"), std::string::npos);
}

// The name is the spec's data.dataset (a SpecError), never a front end's flag:
// the CLI says --virtual-dataset, a jobs file 'dataset' (issue 29).
TEST(VirtualDataset, AnUnknownNameIsTheSpecsDatasetField) {
  for (const char* bad : {"imagenet22k", "sizes=", "sizes=/nonexistent/s.txt"}) {
    try {
      virtual_dataset(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const SpecError& e) {
      EXPECT_EQ(e.field(), "data.dataset");
      EXPECT_EQ(std::string(e.what()).rfind("job: data.dataset ", 0), 0U) << e.what();
      EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
    }
  }
  try {
    virtual_dataset("imagenet22k");
  } catch (const SpecError& e) {
    EXPECT_EQ(e.worded([](std::string_view) { return std::string("--virtual-dataset"); }).substr(0, 59),
              "--virtual-dataset 'imagenet22k': unknown; accepted imagenet");
  }
}

}  // namespace
}  // namespace gpemu::pipeline
