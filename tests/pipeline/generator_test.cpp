#include "gpemu/pipeline/generator.h"

#include <gtest/gtest.h>

#include <set>

#include "gpemu/pipeline/jpeg.h"
#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

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
