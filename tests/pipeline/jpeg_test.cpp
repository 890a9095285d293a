#include "gpemu/pipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <jpeglib.h>

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

// Noise compresses to ~ as many bits per pixel as photos: the entropy-coded
// data is spread evenly over the rows.
std::vector<std::uint8_t> noise(int w, int h) {
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(w) * h * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 13);
  return rgb;
}

// An encoder for layouts encode_jpeg does not write: progressive, or with
// restart markers every `restart_rows` MCU rows. Valid input only (libjpeg's
// default error handler exits).
std::vector<std::byte> encode_special(const std::vector<std::uint8_t>& rgb, int w, int h, bool progressive,
                                      int restart_rows) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  c.restart_in_rows = restart_rows;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(&rgb[static_cast<std::size_t>(c.next_scanline) * w * 3]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<std::byte> bytes(size);
  std::memcpy(bytes.data(), out, size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return bytes;
}

// Overwrites two entropy-coded bytes at about `fraction` of the file with a
// restart marker, in a file that has no restart interval: a decoder that
// reaches it finds the scan's data cut short there ("premature end of data
// segment"). The file stays complete (its EOI is intact). libjpeg-turbo
// does not flag every corruption (its fast Huffman path decodes a bad code
// as 0), but this one it always does.
void insert_stray_marker(std::vector<std::byte>& jpeg, double fraction) {
  auto pos = static_cast<std::size_t>(static_cast<double>(jpeg.size()) * fraction);
  while (jpeg[pos - 1] == std::byte{0xFF}) ++pos;
  ASSERT_LT(pos + 2, jpeg.size() - 2);
  jpeg[pos] = std::byte{0xFF};
  jpeg[pos + 1] = std::byte{0xD0};  // RST0
}

CropBox top_left(int, int) { return CropBox{0, 0, 64, 64}; }
CropBox bottom_right(int w, int h) { return CropBox{w - 64, h - 64, 64, 64}; }

// The crop region's pixels, which must not depend on the validation.
std::vector<std::uint8_t> region_pixels(const DecodedCrop& c) {
  std::vector<std::uint8_t> px;
  for (int y = 0; y < c.region_height; ++y) {
    const auto* row = c.rgb + static_cast<std::size_t>(y) * c.stride;
    px.insert(px.end(), row, row + static_cast<std::size_t>(c.region_width) * c.pixel_bytes);
  }
  return px;
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
  auto c = d.decode_crop(
      jpeg,
      [](int w, int h) {
        return CropBox{0, 0, w, h};
      },
      224, 224);
  EXPECT_EQ(c.scale_num, 2);
  EXPECT_NEAR(c.box_width, 500.0, 1e-9);
  EXPECT_NEAR(c.box_height, 375.0, 1e-9);
  // A small crop needs full resolution.
  c = d.decode_crop(
      jpeg,
      [](int, int) {
        return CropBox{1000, 700, 230, 230};
      },
      224, 224);
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
  const auto rgb = noise(640, 480);
  auto jpeg = encode_jpeg(rgb.data(), 640, 480, 90);
  jpeg.resize(jpeg.size() * 2 / 3);
  JpegDecoder d;
  EXPECT_THROW(d.decode(jpeg), JpegError);
  // The crop sits in the top rows, the damage at the bottom.
  EXPECT_THROW(d.decode_crop(jpeg, top_left, 32, 32), JpegError);
  EXPECT_THROW(d.decode_crop(jpeg, top_left, 32, 32, JpegValidation::Truncation), JpegError);
  EXPECT_THROW(d.decode_crop(jpeg, top_left, 32, 32, JpegValidation::Full), JpegError);
}

TEST(Jpeg, AFileCutJustBeforeItsEndMarkerIsAnErrorInBothValidations) {
  const auto rgb = noise(320, 240);
  auto jpeg = encode_jpeg(rgb.data(), 320, 240, 90);
  jpeg.resize(jpeg.size() - 2);  // every MCU is there, the EOI marker is not
  JpegDecoder d;
  EXPECT_THROW(d.decode_crop(jpeg, top_left, 32, 32, JpegValidation::Truncation), JpegError);
  EXPECT_THROW(d.decode_crop(jpeg, top_left, 32, 32, JpegValidation::Full), JpegError);
}

TEST(Jpeg, CorruptDataBelowTheCropIsAnErrorOnlyWithFullValidation) {
  const auto rgb = noise(640, 480);
  auto jpeg = encode_jpeg(rgb.data(), 640, 480, 90);
  insert_stray_marker(jpeg, 0.9);
  JpegDecoder d;
  EXPECT_THROW(d.decode(jpeg), JpegError);
  EXPECT_THROW(d.decode_crop(jpeg, top_left, 32, 32, JpegValidation::Full), JpegError);
  // The default stops after the crop: the complete file decodes.
  const auto c = d.decode_crop(jpeg, top_left, 32, 32);
  EXPECT_EQ(c.info.width, 640);
  // Damage inside (or above) the crop is an error either way.
  EXPECT_THROW(d.decode_crop(jpeg, bottom_right, 32, 32, JpegValidation::Truncation), JpegError);
  EXPECT_THROW(d.decode_crop(jpeg, bottom_right, 32, 32, JpegValidation::Full), JpegError);
}

TEST(Jpeg, ValidationDoesNotChangeThePixels) {
  const auto rgb = noise(400, 300);
  for (const bool progressive : {false, true}) {
    for (const int restart_rows : {0, 1}) {
      const auto jpeg = encode_special(rgb, 400, 300, progressive, restart_rows);
      JpegDecoder d;
      for (const auto box : {CropBox{10, 20, 150, 100}, CropBox{0, 0, 400, 300}, CropBox{250, 200, 150, 100}}) {
        auto choose = [&](int, int) { return box; };
        const auto a = region_pixels(d.decode_crop(jpeg, choose, 64, 64, JpegValidation::Truncation));
        const auto b = region_pixels(d.decode_crop(jpeg, choose, 64, 64, JpegValidation::Full));
        EXPECT_EQ(a, b) << "progressive " << progressive << ", restart rows " << restart_rows;
        EXPECT_FALSE(a.empty());
      }
    }
  }
}

TEST(Jpeg, TruncationIsDetectedInProgressiveAndRestartMarkedFiles) {
  const auto rgb = noise(400, 300);
  for (const bool progressive : {false, true}) {
    for (const int restart_rows : {0, 1}) {
      auto jpeg = encode_special(rgb, 400, 300, progressive, restart_rows);
      jpeg.resize(jpeg.size() * 3 / 4);
      JpegDecoder d;
      for (const auto v : {JpegValidation::Truncation, JpegValidation::Full}) {
        EXPECT_THROW(d.decode_crop(jpeg, top_left, 32, 32, v), JpegError)
            << "progressive " << progressive << ", restart rows " << restart_rows;
      }
    }
  }
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

TEST(Transform, RgbAndRgbxRegionsGiveTheSameOutput) {
  const auto rgb = noise(90, 70);
  std::vector<std::uint8_t> rgbx(90 * 70 * 4);
  for (std::size_t p = 0; p < 90 * 70; ++p) {
    std::memcpy(&rgbx[p * 4], &rgb[p * 3], 3);
    rgbx[p * 4 + 3] = 255;
  }
  for (const bool flip : {false, true}) {
    for (const int size : {24, 45, 150}) {  // shrinking (wide filter) and enlarging
      ImageTransformOptions o;
      o.height = size;
      o.width = size + 3;  // not a multiple of four
      DecodedCrop a{rgb.data(), 90 * 3, 90, 70, 5.25, 3.5, 80.5, 60, 8, {90, 70, 3}, 3};
      DecodedCrop b{rgbx.data(), 90 * 4, 90, 70, 5.25, 3.5, 80.5, 60, 8, {90, 70, 3}, 4};
      std::vector<float> x(3 * o.height * o.width), y(x.size());
      resize_normalize(a, flip, o, x.data());
      resize_normalize(b, flip, o, y.data());
      EXPECT_EQ(x, y);
    }
  }
}

TEST(Transform, MatchesADirectSeparableBilinearResize) {
  // Reference: the triangle filter evaluated per output pixel in double.
  const auto rgb = noise(60, 50);
  DecodedCrop crop{rgb.data(), 60 * 3, 60, 50, 4.5, 2.0, 41.0, 37.5, 8, {60, 50, 3}, 3};
  ImageTransformOptions o;
  o.height = 17;
  o.width = 23;
  std::vector<float> out(3 * 17 * 23);
  resize_normalize(crop, true, o, out.data());
  auto weights = [](double start, double len, int in, int n, int i) {
    const double scale = len / n, support = std::max(1.0, scale), center = start + (i + 0.5) * scale;
    std::vector<double> w(in, 0.0);
    double sum = 0;
    for (int j = std::max(0, int(std::floor(center - support))); j < std::min(in, int(std::ceil(center + support)));
         ++j) {
      const double d = std::abs((j + 0.5 - center) / support);
      w[j] = d < 1 ? 1 - d : 0;
      sum += w[j];
    }
    for (auto& v : w) v /= sum;
    return w;
  };
  for (int y = 0; y < 17; ++y) {
    const auto wy = weights(2.0, 37.5, 50, 17, y);
    for (int x = 0; x < 23; ++x) {
      const auto wx = weights(4.5, 41.0, 60, 23, x);
      for (int c = 0; c < 3; ++c) {
        double v = 0;
        for (int j = 0; j < 50; ++j)
          for (int i = 0; i < 60; ++i) v += wy[j] * wx[i] * rgb[(j * 60 + i) * 3 + c];
        const double expect = (v / 255 - o.mean[c]) / o.std[c];
        EXPECT_NEAR(out[(c * 17 + y) * 23 + (22 - x)], expect, 1e-4) << "c " << c << " y " << y << " x " << x;
      }
    }
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
