// FFCV-style files: writing one from an image dataset, opening one, and the
// same layout for a dataset described by sizes (pipeline.h, "FFCV-style
// files"; docs/pipeline.md says how the format differs from FFCV's .beton).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "common/interrupt.h"
#include "common/random.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "pipeline/bytes.h"
#include "pipeline/mapped_files.h"

namespace gpemu::pipeline {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'G', 'P', 'E', 'F', 'F', 'C', 'V', '1'};
constexpr char kEndMagic[8] = {'G', 'P', 'E', 'F', 'F', 'E', 'N', 'D'};
constexpr std::uint64_t kHeaderBytes = kFfcvDataOffset;  // the pages start here
constexpr std::uint64_t kEntryBytes = 40;  // offset, length, label: 8 each; width, height, mode, spare: 4 each
constexpr std::uint64_t kMaxSamples = std::uint64_t{1} << 26;
constexpr std::uint32_t kModeRaw = 0, kModeJpeg = 1;

void validate(const FfcvWriteOptions& o) {
  if (o.max_resolution < 8 || o.max_resolution > 16384)
    throw InputError(fmt::format("--max-resolution {} is impossible: give 8 to 16384 pixels", o.max_resolution));
  if (!(o.jpeg_share >= 0 && o.jpeg_share <= 1))
    throw InputError(fmt::format("--jpeg-share {} is impossible: give a fraction from 0 to 1", o.jpeg_share));
  if (o.jpeg_quality < 1 || o.jpeg_quality > 100)
    throw InputError(fmt::format("--jpeg-quality {} is impossible: give 1 to 100", o.jpeg_quality));
  if (o.page_size < kHeaderBytes || o.page_size > (std::uint64_t{1} << 30) || o.page_size % kHeaderBytes != 0)
    throw InputError(
        fmt::format("--page-size {} is impossible: give a multiple of 4096 bytes up to 1 GiB", o.page_size));
}

// Where the next record goes: in the current page when it fits there, else
// at the next page boundary; a record larger than a page has its pages to
// itself (the next record starts after its last one).
struct PagePacker {
  std::uint64_t page_size;
  std::uint64_t at = kHeaderBytes;
  std::uint64_t place(std::uint64_t length) {
    const std::uint64_t used = (at - kHeaderBytes) % page_size;
    if (used != 0 && used + length > page_size) at += page_size - used;
    const std::uint64_t offset = at;
    at += length;
    if (length > page_size) at += (page_size - (at - kHeaderBytes) % page_size) % page_size;
    return offset;
  }
  std::uint64_t pages() const { return (at - kHeaderBytes + page_size - 1) / page_size; }
};

bool jpeg_coin(const FfcvWriteOptions& o, std::size_t index) {
  return common::Rng(common::mix_seed(o.seed, index)).uniform() < o.jpeg_share;
}

// The stored size: the longer side at most max_resolution (never enlarged).
std::pair<int, int> stored_size(int w, int h, int max_resolution) {
  const int longer = std::max(w, h);
  if (longer <= max_resolution) return {w, h};
  const double f = static_cast<double>(max_resolution) / longer;
  return {std::max(1, static_cast<int>(std::lround(w * f))), std::max(1, static_cast<int>(std::lround(h * f)))};
}

// Area-averaging downscale of RGB8 (each output pixel the mean of the source
// pixels its box covers, as OpenCV's INTER_AREA, which FFCV's writer uses).
std::vector<std::uint8_t> downscale(const std::vector<std::uint8_t>& rgb, int w, int h, int tw, int th) {
  if (tw == w && th == h) return rgb;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(tw) * th * 3);
  for (int y = 0; y < th; ++y) {
    const int y0 = static_cast<int>(static_cast<std::int64_t>(y) * h / th);
    const int y1 = std::max(y0 + 1, static_cast<int>(static_cast<std::int64_t>(y + 1) * h / th));
    for (int x = 0; x < tw; ++x) {
      const int x0 = static_cast<int>(static_cast<std::int64_t>(x) * w / tw);
      const int x1 = std::max(x0 + 1, static_cast<int>(static_cast<std::int64_t>(x + 1) * w / tw));
      std::uint32_t sum[3] = {0, 0, 0};
      for (int sy = y0; sy < y1; ++sy)
        for (int sx = x0; sx < x1; ++sx)
          for (int c = 0; c < 3; ++c) sum[c] += rgb[(static_cast<std::size_t>(sy) * w + sx) * 3 + c];
      const std::uint32_t n = static_cast<std::uint32_t>((y1 - y0) * (x1 - x0));
      for (int c = 0; c < 3; ++c)
        out[(static_cast<std::size_t>(y) * tw + x) * 3 + c] = static_cast<std::uint8_t>((sum[c] + n / 2) / n);
    }
  }
  return out;
}

void put_entry(std::vector<std::byte>& table, const Sample& s) {
  put_le(table, s.offset, 8);
  put_le(table, s.length, 8);
  put_le(table, static_cast<std::uint64_t>(s.label), 8);
  put_le(table, s.width, 4);
  put_le(table, s.height, 4);
  put_le(table, s.format == SampleFormat::Jpeg ? kModeJpeg : kModeRaw, 4);
  put_le(table, 0, 4);
}

}  // namespace

FfcvSummary write_ffcv_file(const Dataset& images, const fs::path& out, const FfcvWriteOptions& o) {
  validate(o);
  if (images.size() == 0) throw InputError(fmt::format("dataset '{}' has no images to write", images.root));
  if (images.size() > kMaxSamples)
    throw InputError(
        fmt::format("dataset '{}' has {} images; a file holds at most {}", images.root, images.size(), kMaxSamples));
  for (const Sample& s : images.samples)
    if (s.format != SampleFormat::Jpeg)
      throw InputError(fmt::format("'{}' is not a JPEG image: an FFCV-style file holds images", s.path));
  std::error_code ec;
  if (fs::exists(out, ec) || fs::is_symlink(out, ec))
    throw InputError(fmt::format("--out '{}' exists: give a new file name", out.string()));
  AtomicFile file(out, "dataset ffcv --out");
  std::vector<std::byte> header(kHeaderBytes);
  {
    std::vector<std::byte> h;
    for (char c : kMagic) h.push_back(static_cast<std::byte>(c));
    put_le(h, 1, 4);  // version
    put_le(h, images.size(), 8);
    put_le(h, o.page_size, 8);
    put_le(h, static_cast<std::uint64_t>(o.max_resolution), 4);
    put_le(h, static_cast<std::uint64_t>(o.jpeg_quality), 4);
    put_le(h, static_cast<std::uint64_t>(std::llround(o.jpeg_share * 1e6)), 8);  // millionths
    std::copy(h.begin(), h.end(), header.begin());
  }
  file.write(header.data(), header.size());
  FfcvSummary summary;
  PagePacker packer{o.page_size};
  std::uint64_t written = kHeaderBytes;
  std::vector<std::byte> table;
  FileReader reader;
  JpegDecoder decoder;
  const std::vector<std::byte> zeros(o.page_size);
  for (std::size_t i = 0; i < images.size(); ++i) {
    throw_if_interrupted();
    const Sample& src = images.samples[i];
    std::vector<std::byte> record;
    Sample s;
    s.label = src.label;
    try {
      const auto bytes = reader.read(src.path, src.offset, src.length);
      const JpegInfo info = decoder.read_info(bytes);
      const auto [tw, th] = stored_size(info.width, info.height, o.max_resolution);
      // Decode at the smallest DCT scale that still covers the stored size.
      int scale = 8;
      while (scale > 1 &&
             static_cast<std::int64_t>(std::max(info.width, info.height)) * (scale - 1) / 8 >= std::max(tw, th))
        --scale;
      DecodedImage img = decoder.decode(bytes, scale);
      const auto rgb = downscale(img.rgb, img.width, img.height, tw, th);
      s.width = static_cast<std::uint32_t>(tw);
      s.height = static_cast<std::uint32_t>(th);
      if (jpeg_coin(o, i)) {
        record = encode_jpeg(rgb.data(), tw, th, o.jpeg_quality);
        s.format = SampleFormat::Jpeg;
        ++summary.jpeg;
      } else {
        record.resize(rgb.size());
        std::memcpy(record.data(), rgb.data(), rgb.size());
        s.format = SampleFormat::RawRgb;
        ++summary.raw;
      }
    } catch (const InputError& e) {
      throw InputError(fmt::format("'{}': {}", src.path, e.what()));
    }
    s.length = record.size();
    s.offset = packer.place(s.length);
    for (; written < s.offset; written += std::min<std::uint64_t>(s.offset - written, zeros.size()))
      file.write(zeros.data(), std::min<std::uint64_t>(s.offset - written, zeros.size()));
    file.write(record.data(), record.size());
    written += record.size();
    put_entry(table, s);
  }
  for (char c : kEndMagic) table.push_back(static_cast<std::byte>(c));
  file.write(table.data(), table.size());
  file.commit();
  summary.samples = images.size();
  summary.pages = packer.pages();
  summary.file_bytes = written + table.size();
  return summary;
}

bool is_ffcv_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in && in.read(magic, 8) && std::memcmp(magic, kMagic, 8) == 0;
}

Dataset open_ffcv_file(const fs::path& path) {
  const std::string where = path.string();
  auto bad = [&](const std::string& what) { return InputError(fmt::format("{}: {}", where, what)); };
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) throw bad(fmt::format("cannot be read ({})", ec.message()));
  std::ifstream in(path, std::ios::binary);
  std::vector<std::byte> head(48);
  if (!in || size < kHeaderBytes + 8 || !in.read(reinterpret_cast<char*>(head.data()), 48) ||
      std::memcmp(head.data(), kMagic, 8) != 0)
    throw bad("not an FFCV-style file of gpemu's (no 'GPEFFCV1' header); write one with 'gpemu dataset ffcv'");
  if (read_le(head.data() + 8, 4) != 1)
    throw bad(fmt::format("format version {}; this gpemu reads version 1", read_le(head.data() + 8, 4)));
  const std::uint64_t n = read_le(head.data() + 12, 8);
  const std::uint64_t page = read_le(head.data() + 20, 8);
  if (n < 1 || n > kMaxSamples) throw bad(fmt::format("{} samples; a file holds 1 to {}", n, kMaxSamples));
  if (page < kHeaderBytes || page % kHeaderBytes != 0 || page > (std::uint64_t{1} << 30))
    throw bad(fmt::format("page size {}: not a multiple of 4096 up to 1 GiB", page));
  const std::uint64_t table_bytes = n * kEntryBytes + 8;
  if (size < kHeaderBytes + table_bytes) throw bad(fmt::format("{} bytes: too short for {} samples", size, n));
  const std::uint64_t data_end = size - table_bytes;
  std::vector<std::byte> table(table_bytes);
  in.seekg(static_cast<std::streamoff>(data_end));
  if (!in.read(reinterpret_cast<char*>(table.data()), static_cast<std::streamsize>(table_bytes)) ||
      std::memcmp(table.data() + table_bytes - 8, kEndMagic, 8) != 0)
    throw bad("the metadata table does not end in 'GPEFFEND': the file is truncated or damaged");
  Dataset d;
  d.root = where;
  d.page_size = page;
  d.samples.resize(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::byte* e = table.data() + i * kEntryBytes;
    Sample& s = d.samples[i];
    s.path = where;
    s.offset = read_le(e, 8);
    s.length = read_le(e + 8, 8);
    s.label = static_cast<std::int64_t>(read_le(e + 16, 8));
    s.width = static_cast<std::uint32_t>(read_le(e + 24, 4));
    s.height = static_cast<std::uint32_t>(read_le(e + 28, 4));
    const std::uint64_t mode = read_le(e + 32, 4);
    auto entry = [&](const std::string& what) { return bad(fmt::format("sample {}: {}", i, what)); };
    if (mode != kModeRaw && mode != kModeJpeg) throw entry(fmt::format("mode {} (0: raw RGB, 1: JPEG)", mode));
    s.format = mode == kModeJpeg ? SampleFormat::Jpeg : SampleFormat::RawRgb;
    if (s.length < 1 || s.offset < kHeaderBytes || s.offset > data_end || s.length > data_end - s.offset)
      throw entry(
          fmt::format("bytes {} + {} lie outside the data ({} to {})", s.offset, s.length, kHeaderBytes, data_end));
    const std::uint64_t first = (s.offset - kHeaderBytes) / page,
                        last = (s.offset + s.length - 1 - kHeaderBytes) / page;
    if (first != last && (s.offset - kHeaderBytes) % page != 0)
      throw entry("straddles a page boundary without starting a page");
    if (s.width < 1 || s.height < 1 || s.width > 65535 || s.height > 65535)
      throw entry(fmt::format("{}x{} pixels (1 to 65535 a side)", s.width, s.height));
    if (s.format == SampleFormat::RawRgb && s.length != std::uint64_t{s.width} * s.height * 3)
      throw entry(fmt::format("raw RGB of {}x{} pixels must be {} bytes, not {}", s.width, s.height,
                              std::uint64_t{s.width} * s.height * 3, s.length));
  }
  return d;
}

Dataset ffcv_layout(const Dataset& images, const FfcvWriteOptions& o) {
  validate(o);
  Dataset d;
  d.root = images.root + " (FFCV-style layout)";
  d.classes = images.classes;
  d.page_size = o.page_size;
  d.samples.resize(images.size());
  PagePacker packer{o.page_size};
  // ImageNet: about 110 KB for a 500x375 image (docs/pipeline.md, "Generators"),
  // so a file's pixels are its size x 500 x 375 / 110,000, at 4:3.
  constexpr double kPixelsPerByte = kImageNetPixelsPerJpegByte;
  // JPEG bytes per pixel at quality q: ~0.40 at q 90 for photos re-encoded
  // at 4:2:0 (ImageNet's own files are ~0.59 at q ~92 by the ratio above);
  // scaled linearly by quality around it, a rough rule for a layout.
  const double jpeg_bytes_per_pixel = 0.40 * std::clamp(o.jpeg_quality / 90.0, 0.1, 2.0);
  for (std::size_t i = 0; i < images.size(); ++i) {
    const Sample& src = images.samples[i];
    Sample& s = d.samples[i];
    const double pixels = static_cast<double>(src.length) * kPixelsPerByte;
    const int h = std::max(1, static_cast<int>(std::lround(std::sqrt(pixels * 3.0 / 4.0))));
    const int w = std::max(1, static_cast<int>(std::lround(h * 4.0 / 3.0)));
    const auto [tw, th] = stored_size(w, h, o.max_resolution);
    s.width = static_cast<std::uint32_t>(tw);
    s.height = static_cast<std::uint32_t>(th);
    s.label = src.label;
    s.path = images.root + ".ffcv";
    const bool jpeg = jpeg_coin(o, i);
    s.format = jpeg ? SampleFormat::Jpeg : SampleFormat::RawRgb;
    s.length = jpeg ? std::max<std::uint64_t>(1, static_cast<std::uint64_t>(
                                                     std::llround(static_cast<double>(tw) * th * jpeg_bytes_per_pixel)))
                    : std::uint64_t{s.width} * s.height * 3;
    s.offset = packer.place(s.length);
  }
  return d;
}

std::vector<std::size_t> quasi_random_order(const std::vector<std::size_t>& indices, const Dataset& dataset,
                                            std::size_t window, std::uint64_t seed, std::uint64_t epoch) {
  if (dataset.page_size == 0 || indices.empty()) return indices;
  auto page_of = [&](std::size_t idx) { return dataset.samples[idx].offset / dataset.page_size; };
  // The rank's samples by page (a sample's page: where its record starts).
  std::vector<std::size_t> sorted = indices;
  std::stable_sort(sorted.begin(), sorted.end(), [&](std::size_t a, std::size_t b) { return page_of(a) < page_of(b); });
  std::vector<std::pair<std::size_t, std::size_t>> pages;  // [begin, end) in sorted
  for (std::size_t i = 0; i < sorted.size(); ++i)
    if (i == 0 || page_of(sorted[i]) != page_of(sorted[i - 1]))
      pages.emplace_back(i, i + 1);
    else
      pages.back().second = i + 1;
  common::Rng rng(common::mix_seed(common::mix_seed(seed, epoch), 0x9f1c));
  for (std::size_t i = pages.size() - 1; i > 0; --i) std::swap(pages[i], pages[rng.below(i + 1)]);
  std::vector<std::size_t> order;
  order.reserve(sorted.size());
  std::size_t start = 0;
  for (const auto& [b, e] : pages) {
    order.insert(order.end(), sorted.begin() + static_cast<std::ptrdiff_t>(b),
                 sorted.begin() + static_cast<std::ptrdiff_t>(e));
    if (order.size() - start < std::max<std::size_t>(window, 1)) continue;
    for (std::size_t i = order.size() - 1; i > start; --i) std::swap(order[i], order[start + rng.below(i - start + 1)]);
    start = order.size();
  }
  for (std::size_t i = order.size() - 1; i > start && order.size() - start > 1; --i)
    std::swap(order[i], order[start + rng.below(i - start + 1)]);
  return order;
}

}  // namespace gpemu::pipeline
