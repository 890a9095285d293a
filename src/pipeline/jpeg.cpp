// libjpeg reports fatal errors through error_exit, which must not return.
// Throwing a C++ exception through libjpeg's C frames is undefined, so the
// handlers longjmp back to a setjmp in a function whose frame holds only
// trivially destructible locals (the *_core functions below), and the C++
// exception is thrown after that function has returned.
#include "gpemu/pipeline.h"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <jerror.h>
#include <jpeglib.h>

namespace gpemu::pipeline {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error_exit(j_common_ptr c) {
  auto* e = reinterpret_cast<ErrorManager*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings that mean the pixels are not what the encoder wrote. Extraneous
// bytes before a marker are not among them: libjpeg resynchronises at the
// marker and the image decodes intact (several ImageNet files have them).
bool is_damage(j_common_ptr c) {
  switch (c->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION: return true;
    default: break;
  }
  char text[JMSG_LENGTH_MAX];
  (*c->err->format_message)(c, text);
  return std::strstr(text, "bad arithmetic code") != nullptr;
}

void on_emit_message(j_common_ptr c, int level) {
  if (level >= 0) return;  // trace messages
  if (is_damage(c)) {
    auto* e = reinterpret_cast<ErrorManager*>(c->err);
    (*c->err->format_message)(c, e->message);
    std::longjmp(e->jump, 1);
  }
  c->err->num_warnings++;
}

void install(ErrorManager& err) {
  jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error_exit;
  err.pub.emit_message = on_emit_message;
  err.message[0] = '\0';
}

// Adobe CMYK JPEGs store inverted inks (255 = no ink); others store inks.
// Writes `out_bytes` (3: RGB, 4: RGBX) per pixel.
void cmyk_to_rgb(const std::uint8_t* in, std::uint8_t* out, int width, bool inverted, int out_bytes) {
  for (int x = 0; x < width; ++x, in += 4, out += out_bytes) {
    const int k = inverted ? in[3] : 255 - in[3];
    for (int ch = 0; ch < 3; ++ch) {
      const int c = inverted ? in[ch] : 255 - in[ch];
      out[ch] = static_cast<std::uint8_t>((c * k + 127) / 255);
    }
    if (out_bytes == 4) out[3] = 255;
  }
}

// Whether the entropy-coded data from p onwards is followed by an EOI
// marker before any other marker. In entropy-coded data a 0xFF byte is
// followed by a stuffed 0x00 or is a restart marker; 0xFF fill bytes may
// precede a marker.
bool scan_reaches_eoi(const JOCTET* p, std::size_t n) {
  const JOCTET* end = p + n;
  while (p < end) {
    p = static_cast<const JOCTET*>(std::memchr(p, 0xFF, static_cast<std::size_t>(end - p)));
    if (p == nullptr) return false;
    ++p;
    while (p < end && *p == 0xFF) ++p;
    if (p == end) return false;
    const JOCTET code = *p++;
    if (code == 0x00 || (code >= JPEG_RST0 && code <= JPEG_RST0 + 7)) continue;
    return code == JPEG_EOI;
  }
  return false;
}

}  // namespace

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  std::vector<std::uint8_t> region;
  std::vector<std::uint8_t> cmyk_rows;
  std::vector<std::uint8_t> last_row;
  DecodedCrop crop;
  DecodedImage image;

  bool create_core() {
    if (setjmp(err.jump)) return false;
    jpeg_create_decompress(&cinfo);
    return true;
  }

  // Starts a decode: source, header, colour space. Called inside a core.
  void start_header(const std::byte* data, std::size_t size) {
    jpeg_abort_decompress(&cinfo);
    jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(data), static_cast<unsigned long>(size));
    jpeg_read_header(&cinfo, TRUE);
    cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  }
  bool cmyk = false;

  // Reads output rows [first, last) into region (pixel_bytes per pixel: 3
  // RGB, 4 RGBX), the rows before `first` having been skipped.
  void read_rows(JDIMENSION last, std::size_t stride, int pixel_bytes) {
    const JDIMENSION first = cinfo.output_scanline;
    const bool inverted = cinfo.saw_Adobe_marker;
    if (cmyk) cmyk_rows.resize(static_cast<std::size_t>(cinfo.output_width) * 4 * 16);
    JSAMPROW rows[16];
    while (cinfo.output_scanline < last) {
      const JDIMENSION want = std::min<JDIMENSION>(16, last - cinfo.output_scanline);
      const JDIMENSION y = cinfo.output_scanline - first;
      for (JDIMENSION r = 0; r < want; ++r) {
        rows[r] = cmyk ? cmyk_rows.data() + static_cast<std::size_t>(r) * cinfo.output_width * 4
                       : region.data() + (y + r) * stride;
      }
      const JDIMENSION got = jpeg_read_scanlines(&cinfo, rows, want);
      if (cmyk) {
        for (JDIMENSION r = 0; r < got; ++r) {
          cmyk_to_rgb(rows[r], region.data() + (y + r) * stride, static_cast<int>(cinfo.output_width), inverted,
                      pixel_bytes);
        }
      }
      if (got == 0) break;
    }
  }

  // After the rows a crop needs: whether the rest of the file certainly
  // holds no truncation, so decoding may stop here.
  bool rest_is_complete() {
    // Multi-scan (progressive) files were read to their EOI by
    // jpeg_start_decompress, which reports truncation itself.
    if (jpeg_input_complete(&cinfo)) return true;
    // The Huffman decoder stops at the marker that ends the scan and keeps
    // it in unread_marker (restart markers it handles itself).
    const int m = cinfo.unread_marker;
    if (m != 0 && !(m >= JPEG_RST0 && m <= JPEG_RST0 + 7)) return m == JPEG_EOI;
    return scan_reaches_eoi(cinfo.src->next_input_byte, cinfo.src->bytes_in_buffer);
  }

  bool info_core(const std::byte* data, std::size_t size, JpegInfo* info) {
    if (setjmp(err.jump)) {
      jpeg_abort_decompress(&cinfo);
      return false;
    }
    start_header(data, size);
    info->width = static_cast<int>(cinfo.image_width);
    info->height = static_cast<int>(cinfo.image_height);
    info->components = cinfo.num_components;
    jpeg_abort_decompress(&cinfo);
    return true;
  }

  bool host_core(const std::byte* data, std::size_t size, bool entropy_decode, JpegInfo* info) {
    if (setjmp(err.jump)) {
      jpeg_abort_decompress(&cinfo);
      return false;
    }
    start_header(data, size);
    *info = {static_cast<int>(cinfo.image_width), static_cast<int>(cinfo.image_height), cinfo.num_components};
    if (entropy_decode) {
      jpeg_read_coefficients(&cinfo);  // every scan's Huffman decoding, into coefficient blocks
      jpeg_finish_decompress(&cinfo);
    } else {
      jpeg_abort_decompress(&cinfo);
    }
    return true;
  }

  bool crop_core(const std::byte* data, std::size_t size, const std::function<CropBox(int, int)>* choose, int min_w,
                 int min_h, JpegValidation validation) {
    if (setjmp(err.jump)) {
      jpeg_abort_decompress(&cinfo);
      return false;
    }
    start_header(data, size);
    if (!cmyk) cinfo.out_color_space = JCS_EXT_RGBX;  // 4-byte pixels: the resampler's vector lanes
    const int W = static_cast<int>(cinfo.image_width);
    const int H = static_cast<int>(cinfo.image_height);
    CropBox box = (*choose)(W, H);
    box.x = std::clamp(box.x, 0, W - 1);
    box.y = std::clamp(box.y, 0, H - 1);
    box.width = std::clamp(box.width, 1, W - box.x);
    box.height = std::clamp(box.height, 1, H - box.y);

    int m = 8;
    for (int k = 1; k <= 8; ++k) {
      if (box.width * k >= min_w * 8 && box.height * k >= min_h * 8) {
        m = k;
        break;
      }
    }
    cinfo.scale_num = static_cast<unsigned int>(m);
    cinfo.scale_denom = 8;
    jpeg_start_decompress(&cinfo);
    const double s = m / 8.0;
    const double out_w = cinfo.output_width, out_h = cinfo.output_height;
    const double bx0 = std::min(box.x * s, out_w), bx1 = std::min((box.x + box.width) * s, out_w);
    const double by0 = std::min(box.y * s, out_h), by1 = std::min((box.y + box.height) * s, out_h);
    // The resampling filter reaches max(1, downscale) pixels beyond the box.
    const int margin_x = static_cast<int>(std::ceil(std::max(1.0, (bx1 - bx0) / std::max(1, min_w)))) + 1;
    const int margin_y = static_cast<int>(std::ceil(std::max(1.0, (by1 - by0) / std::max(1, min_h)))) + 1;
    const auto rx0 = static_cast<JDIMENSION>(std::max(0, static_cast<int>(std::floor(bx0)) - margin_x));
    const auto rx1 = static_cast<JDIMENSION>(std::min(out_w, std::ceil(bx1) + margin_x));
    const auto ry0 = static_cast<JDIMENSION>(std::max(0, static_cast<int>(std::floor(by0)) - margin_y));
    const auto ry1 = static_cast<JDIMENSION>(std::min(out_h, std::ceil(by1) + margin_y));

    JDIMENSION cx = 0, cw = cinfo.output_width;
    if (rx0 > 0 || rx1 < cinfo.output_width) {
      cx = rx0;
      cw = rx1 - rx0;
      jpeg_crop_scanline(&cinfo, &cx, &cw);  // widens to iMCU boundaries
    }
    const std::size_t stride = static_cast<std::size_t>(cw) * 4;
    region.resize(stride * (ry1 - ry0));
    if (ry0 > 0) jpeg_skip_scanlines(&cinfo, ry0);
    read_rows(ry1, stride, 4);
    if (validation == JpegValidation::Truncation && rest_is_complete()) {
      jpeg_abort_decompress(&cinfo);
    } else {
      // Entropy-decode the rest too, so damage below the crop is detected.
      // Skipping straight to the end would not (libjpeg-turbo then only moves
      // the row counter), so skip all but the last row and read that one.
      if (cinfo.output_height - cinfo.output_scanline > 1) {
        jpeg_skip_scanlines(&cinfo, cinfo.output_height - cinfo.output_scanline - 1);
      }
      if (cinfo.output_scanline < cinfo.output_height) {
        last_row.resize(static_cast<std::size_t>(cinfo.output_width) * cinfo.output_components);
        JSAMPROW row = last_row.data();
        jpeg_read_scanlines(&cinfo, &row, 1);
      }
      jpeg_finish_decompress(&cinfo);
    }

    crop.rgb = region.data();
    crop.stride = static_cast<int>(stride);
    crop.region_width = static_cast<int>(cw);
    crop.region_height = static_cast<int>(ry1 - ry0);
    crop.box_x = bx0 - cx;
    crop.box_y = by0 - ry0;
    crop.box_width = bx1 - bx0;
    crop.box_height = by1 - by0;
    crop.scale_num = m;
    crop.info = {W, H, cinfo.num_components};
    crop.pixel_bytes = 4;
    return true;
  }

  bool full_core(const std::byte* data, std::size_t size, int scale_num) {
    if (setjmp(err.jump)) {
      jpeg_abort_decompress(&cinfo);
      return false;
    }
    start_header(data, size);
    cinfo.scale_num = static_cast<unsigned int>(scale_num);
    cinfo.scale_denom = 8;
    jpeg_start_decompress(&cinfo);
    const std::size_t stride = static_cast<std::size_t>(cinfo.output_width) * 3;
    region.resize(stride * cinfo.output_height);
    read_rows(cinfo.output_height, stride, 3);
    jpeg_finish_decompress(&cinfo);
    image.width = static_cast<int>(cinfo.output_width);
    image.height = static_cast<int>(cinfo.output_height);
    return true;
  }
};

JpegDecoder::JpegDecoder() : s_(std::make_unique<State>()) {
  s_->cinfo.err = jpeg_std_error(&s_->err.pub);
  install(s_->err);
  if (!s_->create_core()) throw JpegError(std::string("cannot create a JPEG decoder: ") + s_->err.message);
}

JpegDecoder::~JpegDecoder() { jpeg_destroy_decompress(&s_->cinfo); }

JpegInfo JpegDecoder::read_info(std::span<const std::byte> data) {
  JpegInfo info;
  if (!s_->info_core(data.data(), data.size(), &info)) throw JpegError(std::string("corrupt JPEG: ") + s_->err.message);
  return info;
}

JpegInfo JpegDecoder::host_part(std::span<const std::byte> data, bool entropy_decode) {
  JpegInfo info;
  if (!s_->host_core(data.data(), data.size(), entropy_decode, &info))
    throw JpegError(std::string("corrupt JPEG: ") + s_->err.message);
  return info;
}

DecodedCrop JpegDecoder::decode_crop(std::span<const std::byte> data,
                                     const std::function<CropBox(int, int)>& choose_box, int min_width, int min_height,
                                     JpegValidation validation) {
  if (!s_->crop_core(data.data(), data.size(), &choose_box, min_width, min_height, validation)) {
    throw JpegError(std::string("corrupt JPEG: ") + s_->err.message);
  }
  return s_->crop;
}

DecodedImage JpegDecoder::decode(std::span<const std::byte> data, int scale_num) {
  if (scale_num < 1 || scale_num > 8) {
    throw InputError("JPEG decode: scale_num " + std::to_string(scale_num) + " is outside 1..8");
  }
  if (!s_->full_core(data.data(), data.size(), scale_num)) {
    throw JpegError(std::string("corrupt JPEG: ") + s_->err.message);
  }
  DecodedImage out;
  out.width = s_->image.width;
  out.height = s_->image.height;
  out.rgb = s_->region;
  return out;
}

namespace {

struct Encoder {
  jpeg_compress_struct cinfo;
  ErrorManager err;
  unsigned char* out = nullptr;
  unsigned long out_size = 0;

  bool core(const std::uint8_t* rgb, int width, int height, int quality) {
    if (setjmp(err.jump)) return false;
    jpeg_create_compress(&cinfo);
    jpeg_mem_dest(&cinfo, &out, &out_size);
    cinfo.image_width = static_cast<JDIMENSION>(width);
    cinfo.image_height = static_cast<JDIMENSION>(height);
    cinfo.input_components = 3;
    cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    JSAMPROW row[1];
    while (cinfo.next_scanline < cinfo.image_height) {
      row[0] = const_cast<JSAMPROW>(rgb + static_cast<std::size_t>(cinfo.next_scanline) * width * 3);
      jpeg_write_scanlines(&cinfo, row, 1);
    }
    jpeg_finish_compress(&cinfo);
    return true;
  }
};

}  // namespace

std::vector<std::byte> encode_jpeg(const std::uint8_t* rgb, int width, int height, int quality) {
  if (width <= 0 || height <= 0 || quality < 1 || quality > 100) {
    throw InputError("JPEG encode: bad size " + std::to_string(width) + "x" + std::to_string(height) + " or quality " +
                     std::to_string(quality) + " (1..100)");
  }
  Encoder e{};
  e.cinfo.err = jpeg_std_error(&e.err.pub);
  install(e.err);
  const bool ok = e.core(rgb, width, height, quality);
  std::vector<std::byte> bytes;
  if (ok) {
    bytes.resize(e.out_size);
    std::memcpy(bytes.data(), e.out, e.out_size);
  }
  jpeg_destroy_compress(&e.cinfo);
  std::free(e.out);
  if (!ok) throw JpegError(std::string("JPEG encode failed: ") + e.err.message);
  return bytes;
}

}  // namespace gpemu::pipeline
