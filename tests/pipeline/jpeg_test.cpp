#include "gpemu/pipeline/jpeg.h"

#include <gtest/gtest.h>

#include <cmath>

#include "gpemu/pipeline/transform.h"

namespace gpemu::pipeline {
namespace {

std::vector<std::uint8_t> gradient(int w, int h) {
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      auto* p = &rgb[(static_cast<std::size_t>(y) * w + x) * 3];
      p[0] = static_cast<std::uint8_t>(x * 255 / w);
      p[1] = static_cast<std::uint8_t>(y * 255 / h);
      p[2] = 128;
    }
  }
  return rgb;
}

TEST(Jpeg, RoundTripsSizeAndApproximatePixels) {
  const auto rgb = gradient(64, 48);
  const auto jpeg = encode_jpeg(rgb.data(), 64, 48, 95);
  JpegDecoder d;
  const auto info = d.read_info(jpeg);
  EXPECT_EQ(info.width, 64);
  EXPECT_EQ(info.height, 48);
  const auto img = d.decode(jpeg);
  ASSERT_EQ(img.width, 64);
  ASSERT_EQ(img.height, 48);
  double err = 0;
  for (std::size_t i = 0; i < rgb.size(); ++i) err += std::abs(int(rgb[i]) - int(img.rgb[i]));
  EXPECT_LT(err / rgb.size(), 3.0);
}

TEST(Jpeg, DctScalingDecodesSmaller) {
  const auto rgb = gradient(200, 100);
  const auto jpeg = encode_jpeg(rgb.data(), 200, 100, 90);
  JpegDecoder d;
  const auto half = d.decode(jpeg, 4);
  EXPECT_EQ(half.width, 100);
  EXPECT_EQ(half.height, 50);
  const auto eighth = d.decode(jpeg, 1);
  EXPECT_EQ(eighth.width, 25);
  EXPECT_EQ(eighth.height, 13);  // ceil(100 / 8)
}

TEST(Jpeg, CropDecodePicksTheSmallestScaleCoveringTheOutput) {
  const auto rgb = gradient(2000, 1500);
  const auto jpeg = encode_jpeg(rgb.data(), 2000, 1500, 85);
  JpegDecoder d;
  // The whole image onto 224x224: 1500 * 1/8 < 224 <= 1500 * 2/8.
  auto c = d.decode_crop(jpeg, [](int w, int h) { return CropBox{0, 0, w, h}; }, 224, 224);
  EXPECT_EQ(c.scale_num, 2);
  EXPECT_NEAR(c.box_width, 500.0, 1e-9);
  EXPECT_NEAR(c.box_height, 375.0, 1e-9);
  // A small crop needs full resolution.
  c = d.decode_crop(jpeg, [](int, int) { return CropBox{1000, 700, 230, 230}; }, 224, 224);
  EXPECT_EQ(c.scale_num, 8);
  EXPECT_LE(c.region_width, 230 + 2 * 16 + 8);  // only iMCU columns around the crop
  EXPECT_LE(c.region_height, 230 + 8);
  EXPECT_EQ(c.info.width, 2000);
}

TEST(Jpeg, CorruptDataIsAnErrorNotACrash) {
  std::vector<std::byte> garbage(1000, std::byte{0x42});
  JpegDecoder d;
  EXPECT_THROW(d.read_info(garbage), JpegError);
  EXPECT_THROW(d.decode(std::span<const std::byte>()), JpegError);
  // The decoder stays usable after an error.
  const auto rgb = gradient(32, 32);
  const auto jpeg = encode_jpeg(rgb.data(), 32, 32, 90);
  EXPECT_EQ(d.decode(jpeg).width, 32);
}

TEST(Jpeg, TruncatedDataIsAnErrorEvenOutsideTheCrop) {
  std::vector<std::uint8_t> rgb(640 * 480 * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 13);
  auto jpeg = encode_jpeg(rgb.data(), 640, 480, 90);
  jpeg.resize(jpeg.size() * 2 / 3);
  JpegDecoder d;
  EXPECT_THROW(d.decode(jpeg), JpegError);
  // The crop sits in the top rows, the damage at the bottom.
  EXPECT_THROW(d.decode_crop(jpeg, [](int, int) { return CropBox{0, 0, 64, 64}; }, 32, 32), JpegError);
}

TEST(Transform, AugmentationIsDeterministicAndInsideTheImage) {
  ImageTransformOptions o;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const auto a = draw_augmentation(500, 375, o, seed);
    const auto b = draw_augmentation(500, 375, o, seed);
    EXPECT_EQ(a.box.x, b.box.x);
    EXPECT_EQ(a.box.width, b.box.width);
    EXPECT_EQ(a.flip, b.flip);
    EXPECT_GE(a.box.x, 0);
    EXPECT_GE(a.box.y, 0);
    EXPECT_LE(a.box.x + a.box.width, 500);
    EXPECT_LE(a.box.y + a.box.height, 375);
    const double area = double(a.box.width) * a.box.height / (500.0 * 375.0);
    EXPECT_GE(area, 0.07);
  }
}

TEST(Transform, ConstantImageNormalisesToConstantChannels) {
  std::vector<std::uint8_t> rgb(100 * 80 * 3);
  for (std::size_t i = 0; i < rgb.size(); i += 3) {
    rgb[i] = 255;
    rgb[i + 1] = 0;
    rgb[i + 2] = 128;
  }
  DecodedCrop crop;
  crop.rgb = rgb.data();
  crop.stride = 300;
  crop.region_width = 100;
  crop.region_height = 80;
  crop.box_x = 10.5;
  crop.box_y = 3;
  crop.box_width = 70;
  crop.box_height = 60.25;
  ImageTransformOptions o;
  o.height = 24;
  o.width = 32;
  std::vector<float> out(3 * 24 * 32);
  resize_normalize(crop, true, o, out.data());
  const float expect[3] = {(1.0f - 0.485f) / 0.229f, (0.0f - 0.456f) / 0.224f, (128 / 255.0f - 0.406f) / 0.225f};
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 24 * 32; ++i) ASSERT_NEAR(out[c * 24 * 32 + i], expect[c], 1e-4);
  }
}

TEST(Transform, FlipMirrorsTheOutput) {
  const auto rgb = gradient(64, 64);
  DecodedCrop crop{rgb.data(), 64 * 3, 64, 64, 0, 0, 64, 64, 8, {64, 64, 3}};
  ImageTransformOptions o;
  o.height = o.width = 16;
  std::vector<float> a(3 * 256), b(3 * 256);
  resize_normalize(crop, false, o, a.data());
  resize_normalize(crop, true, o, b.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 16; ++x) EXPECT_FLOAT_EQ(a[c * 256 + y * 16 + x], b[c * 256 + y * 16 + 15 - x]);
}

}  // namespace
}  // namespace gpemu::pipeline
