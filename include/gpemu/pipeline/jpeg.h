// JPEG decode and encode with libjpeg-turbo (jpeglib.h API).
//
// The decoder is built for training input pipelines: it decodes only what a
// random crop needs, at the smallest DCT scale (scale_num/8, 1 <= scale_num
// <= 8) at which the crop is still at least as large as the network input, and
// only the rows and iMCU columns around the crop (jpeg_crop_scanline,
// jpeg_skip_scanlines). How much of the rest is checked for damage is a
// JpegValidation: by default decoding stops after the crop's last row and
// only truncation below it is detected (as PIL detects it); Full
// entropy-decodes the whole file so any corrupt data is an error.
//
// Errors: libjpeg's fatal errors never abort the process; they longjmp back
// into the decoder and surface as JpegError. Warnings that mean the data is
// damaged (premature end of data, corrupt entropy data, bad Huffman codes,
// ...) are treated as errors too; harmless warnings (an unknown JFIF
// revision, extraneous bytes before a marker) are ignored.
//
// Thread safety: one JpegDecoder per thread; distinct decoders are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gpemu/error.h"

namespace gpemu::pipeline {

class JpegError : public InputError {
 public:
  using InputError::InputError;
};

struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 0;
};

// How much of a JPEG JpegDecoder::decode_crop examines for damage. Both
// detect damage in every row they decode (the crop and everything above it,
// which sequential Huffman decoding has to go through) and a truncated file.
enum class JpegValidation {
  // Stops after the last row the crop needs. The rest of the entropy-coded
  // data is only scanned for its end-of-image marker: a file whose scan is
  // not followed by EOI (truncated, or holding unexpected markers) is then
  // decoded to the end as with Full, which reports the error libjpeg gives.
  // Corrupt entropy-coded data below the crop in a complete file is not
  // noticed; PIL does not notice it anywhere (it ignores libjpeg's
  // corrupt-data warnings and only raises on truncation).
  Truncation,
  // Entropy-decodes the whole file, so damage anywhere is an error.
  Full,
};

// A rectangle in full-resolution image pixels.
struct CropBox {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// The decoded neighbourhood of a crop: an 8-bit RGB region (rows of `stride`
// bytes, `pixel_bytes` per pixel: 3 for RGB, 4 for RGBX whose fourth byte is
// padding; decode_crop gives RGBX) and, inside it, the crop box in region
// pixel coordinates (fractional because the DCT scale is not always a
// divisor of the box). The region
// extends a few pixels beyond the box where the image allows, so a resampling
// filter sees the same neighbours as it would in the full image.
struct DecodedCrop {
  const std::uint8_t* rgb = nullptr;
  int stride = 0;
  int region_width = 0;
  int region_height = 0;
  double box_x = 0, box_y = 0, box_width = 0, box_height = 0;
  int scale_num = 8;    // decoded at scale_num/8 of full resolution
  JpegInfo info;        // full-resolution image
  int pixel_bytes = 3;  // 3: RGB, 4: RGBX
};

struct DecodedImage {
  std::vector<std::uint8_t> rgb;  // width * height * 3, row-major
  int width = 0;
  int height = 0;
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  JpegInfo read_info(std::span<const std::byte> data);

  // Reads the header, asks choose_box(width, height) for the crop, and decodes
  // it at the smallest scale at which the scaled box is >= min_width x
  // min_height (full scale when even that is smaller). The result (RGBX)
  // points into this decoder's buffers and stays valid until its next call.
  DecodedCrop decode_crop(std::span<const std::byte> data,
                          const std::function<CropBox(int width, int height)>& choose_box, int min_width,
                          int min_height, JpegValidation validation = JpegValidation::Truncation);

  // Whole image as RGB8 at scale_num/8 (1..8) of full resolution.
  DecodedImage decode(std::span<const std::byte> data, int scale_num = 8);

  // The host's part of a GPU decode (nvJPEG's hybrid backend): the header,
  // and with `entropy_decode` every DCT coefficient Huffman-decoded
  // (jpeg_read_coefficients), as the host threads do before the GPU's IDCT.
  JpegInfo host_part(std::span<const std::byte> data, bool entropy_decode);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Encodes an RGB8 image (width * height * 3 bytes) with 4:2:0 chroma
// subsampling at `quality` (1..100).
std::vector<std::byte> encode_jpeg(const std::uint8_t* rgb, int width, int height, int quality);

}  // namespace gpemu::pipeline
