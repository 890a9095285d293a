// FFCV-style files: the writer's layout (pages, metadata, JPEG share, maximum
// resolution), what the reader refuses, the quasi-random order, and a real
// load of a few hundred tiny images through mmap and the process cache.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr std::uint64_t kPage = 64 * 1024;

// 300 tiny JPEGs in 3 classes, written once into an FFCV-style file.
const fs::path& tiny_ffcv() {
  static TempDir dir;
  static const fs::path file = [] {
    generate_image_dataset(dir.path() / "images", 3, 300, 11, 2.0);
    FfcvWriteOptions o;
    o.max_resolution = 48;
    o.page_size = kPage;
    o.seed = 5;
    write_ffcv_file(open_image_folder(dir.path() / "images"), dir.path() / "train.ffcv", o);
    return dir.path() / "train.ffcv";
  }();
  return file;
}

std::string open_error(const fs::path& p) {
  try {
    open_ffcv_file(p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(FfcvFile, PacksRecordsIntoPagesWithPerSampleMetadata) {
  const Dataset d = open_dataset_folder(tiny_ffcv());
  ASSERT_EQ(d.size(), 300u);
  EXPECT_EQ(d.page_size, kPage);
  const Dataset source = open_image_folder(tiny_ffcv().parent_path() / "images");
  std::size_t jpeg = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const Sample& s = d.samples[i];
    EXPECT_EQ(s.path, tiny_ffcv().string());
    EXPECT_EQ(s.label, source.samples[i].label);
    EXPECT_LE(std::max(s.width, s.height), 48u);
    EXPECT_GE(s.offset, 4096u);
    const std::uint64_t first = (s.offset - 4096) / kPage, last = (s.offset + s.length - 1 - 4096) / kPage;
    EXPECT_EQ(first, last) << "sample " << i << " straddles a page";
    if (s.format == SampleFormat::Jpeg) {
      ++jpeg;
    } else {
      ASSERT_EQ(s.format, SampleFormat::RawRgb);
      EXPECT_EQ(s.length, std::uint64_t{s.width} * s.height * 3);
    }
    if (i > 0) {
      EXPECT_GE(s.offset, d.samples[i - 1].offset + d.samples[i - 1].length);
    }
  }
  EXPECT_GT(jpeg, 110u);  // a fair coin over 300: 150 +- 3 sigma
  EXPECT_LT(jpeg, 190u);
  // A JPEG record is a JPEG of the stored size.
  for (const Sample& s : d.samples) {
    if (s.format != SampleFormat::Jpeg) continue;
    FileReader reader;
    JpegDecoder decoder;
    const JpegInfo info = decoder.read_info(reader.read(s.path, s.offset, s.length));
    EXPECT_EQ(info.width, static_cast<int>(s.width));
    EXPECT_EQ(info.height, static_cast<int>(s.height));
    break;
  }
}

TEST(FfcvFile, ShareZeroAndOneGiveRawOnlyAndJpegOnly) {
  TempDir dir;
  generate_image_dataset(dir.path() / "images", 1, 6, 3, 2.0);
  const Dataset src = open_image_folder(dir.path() / "images");
  FfcvWriteOptions o;
  o.max_resolution = 32;
  o.jpeg_share = 0;
  EXPECT_EQ(write_ffcv_file(src, dir.path() / "raw.ffcv", o).raw, 6u);
  o.jpeg_share = 1;
  EXPECT_EQ(write_ffcv_file(src, dir.path() / "jpeg.ffcv", o).jpeg, 6u);
  for (const Sample& s : open_ffcv_file(dir.path() / "raw.ffcv").samples) EXPECT_EQ(s.format, SampleFormat::RawRgb);
  // An existing output is refused, not overwritten.
  try {
    write_ffcv_file(src, dir.path() / "raw.ffcv", o);
    FAIL() << "overwrote an existing file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("exists"), std::string::npos) << e.what();
  }
  o.jpeg_quality = 0;
  EXPECT_THROW(write_ffcv_file(src, dir.path() / "q.ffcv", o), InputError);
  EXPECT_FALSE(fs::exists(dir.path() / "q.ffcv"));
}

TEST(FfcvFile, RefusesTruncatedForeignAndDamagedFiles) {
  TempDir dir;
  const std::vector<std::byte> good = testing::read_bytes(tiny_ffcv());
  std::vector<std::byte> cut(good.begin(), good.end() - 100);
  testing::write_bytes(dir.path() / "cut.ffcv", cut);
  EXPECT_NE(open_error(dir.path() / "cut.ffcv").find("truncated"), std::string::npos)
      << open_error(dir.path() / "cut.ffcv");
  std::vector<std::byte> foreign = good;
  foreign[0] = std::byte{'X'};
  testing::write_bytes(dir.path() / "foreign.ffcv", foreign);
  EXPECT_NE(open_error(dir.path() / "foreign.ffcv").find("not an FFCV-style file"), std::string::npos);
  // Sample 0's length (table entry at end - 8 - 300 * 40, length at +8) made huge.
  std::vector<std::byte> damaged = good;
  damaged[good.size() - 8 - 300 * 40 + 8 + 6] = std::byte{0x7f};
  testing::write_bytes(dir.path() / "damaged.ffcv", damaged);
  const std::string e = open_error(dir.path() / "damaged.ffcv");
  EXPECT_NE(e.find("sample 0"), std::string::npos) << e;
  EXPECT_NE(e.find("damaged.ffcv"), std::string::npos) << e;
}

TEST(FfcvFile, QuasiRandomOrderIsAPermutationThatKeepsPagesTogether) {
  const Dataset d = open_ffcv_file(tiny_ffcv());
  std::vector<std::size_t> all(d.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const auto a = quasi_random_order(all, d, 32, 1, 0);
  EXPECT_EQ(std::multiset<std::size_t>(a.begin(), a.end()), std::multiset<std::size_t>(all.begin(), all.end()));
  EXPECT_EQ(a, quasi_random_order(all, d, 32, 1, 0));
  EXPECT_NE(a, quasi_random_order(all, d, 32, 1, 1));
  EXPECT_NE(a, all);
  // A page's samples all lie within a window and its last page: never spread over the epoch.
  std::map<std::uint64_t, std::pair<std::size_t, std::size_t>> span;  // page -> first, last position
  std::map<std::uint64_t, std::size_t> per_page;
  for (std::size_t pos = 0; pos < a.size(); ++pos) {
    const std::uint64_t page = d.samples[a[pos]].offset / kPage;
    auto [it, fresh] = span.try_emplace(page, pos, pos);
    it->second.second = pos;
    ++per_page[page];
  }
  std::size_t most = 0;
  for (const auto& [p, n] : per_page) most = std::max(most, n);
  ASSERT_GT(span.size(), 3u);
  for (const auto& [page, s] : span) EXPECT_LT(s.second - s.first, 32 + 2 * most) << "page " << page;
}

TEST(FfcvFile, RealLoaderReadsTheSamePixelsThroughMmapTheProcessCacheAndPread) {
  const Dataset d = open_dataset_folder(tiny_ffcv());
  auto epoch_of = [&](ReadMethod m) {
    LoaderOptions o;
    o.batch_size = 64;
    o.num_workers = 2;
    o.shuffle = true;
    o.seed = 3;
    o.read_method = m;
    o.transform.height = o.transform.width = 32;
    DataLoader loader(d, o);
    loader.begin_epoch(1);
    std::map<std::size_t, std::vector<float>> images;
    while (auto b = loader.next()) {
      EXPECT_EQ(b->layout, BatchLayout::Images);
      const auto px = b->images();
      const std::size_t per = 3 * 32 * 32;
      for (std::size_t k = 0; k < b->sample_indices.size(); ++k)
        images[b->sample_indices[k]].assign(px.begin() + static_cast<std::ptrdiff_t>(k * per),
                                            px.begin() + static_cast<std::ptrdiff_t>((k + 1) * per));
    }
    return images;
  };
  const auto mapped = epoch_of(ReadMethod::Mmap);
  ASSERT_EQ(mapped.size(), 300u);  // every sample once
  EXPECT_EQ(epoch_of(ReadMethod::ProcessCache), mapped);
  EXPECT_EQ(epoch_of(ReadMethod::Pread), mapped);
  // Raw and JPEG samples both give normalised pixels of an image, not zeros.
  std::size_t first_raw = 0, first_jpeg = 0;
  while (d.samples[first_raw].format != SampleFormat::RawRgb) ++first_raw;
  while (d.samples[first_jpeg].format != SampleFormat::Jpeg) ++first_jpeg;
  for (std::size_t i : {first_raw, first_jpeg}) {
    float lo = 1e9f, hi = -1e9f;
    for (float v : mapped.at(i)) lo = std::min(lo, v), hi = std::max(hi, v);
    EXPECT_LT(lo, hi) << "sample " << i;
  }
  // mmap and the process cache read FFCV-style files only.
  LoaderOptions o;
  o.read_method = ReadMethod::Mmap;
  TempDir dir;
  generate_image_dataset(dir.path(), 1, 2, 1, 2.0);
  try {
    DataLoader loader(open_image_folder(dir.path()), o);
    FAIL() << "mmap accepted an ImageFolder";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("FFCV-style"), std::string::npos) << e.what();
  }
}

// Four ImageNet-sized JPEGs (110 KB: 500x375 pixels) in an FFCV-style layout.
Dataset layout_of_four(double jpeg_share) {
  Dataset src;
  src.root = "four";
  for (int i = 0; i < 4; ++i)
    src.samples.push_back(Sample{"virtual:four/" + std::to_string(i), 0, 110000, i % 2, SampleFormat::Jpeg});
  FfcvWriteOptions o;
  o.jpeg_share = jpeg_share;
  return ffcv_layout(src, o);
}

TEST(FfcvModel, LayoutOfSizesPacksPagesAsTheWriter) {
  const Dataset raw = layout_of_four(0);
  ASSERT_EQ(raw.size(), 4u);
  EXPECT_EQ(raw.page_size, 4u << 20);
  EXPECT_EQ(raw.samples[0].offset, 4096u);
  EXPECT_EQ(raw.samples[0].width, 500u);
  EXPECT_EQ(raw.samples[0].height, 375u);
  EXPECT_EQ(raw.samples[0].length, 500u * 375u * 3u);  // 562,500 B
  EXPECT_EQ(raw.samples[1].offset, 4096u + 562500u);
  // Seven raw records fill a 4 MiB page: the eighth would straddle it (not here: four samples).
  const Dataset jpeg = layout_of_four(1);
  EXPECT_EQ(jpeg.samples[3].format, SampleFormat::Jpeg);
  EXPECT_EQ(jpeg.samples[3].length, 75000u);  // 0.40 B a pixel at quality 90
  EXPECT_EQ(jpeg.samples[3].label, 1);
}

TEST(FfcvModel, VirtualDatasetsHaveAnFfcvLayout) {
  const Dataset d = virtual_dataset("ffcv:imagenette", 3);
  ASSERT_EQ(d.size(), 9469u);
  EXPECT_EQ(d.page_size, 4u << 20);
  std::size_t raw = 0;
  for (const Sample& s : d.samples) {
    EXPECT_LE(std::max(s.width, s.height), 500u);
    raw += s.format == SampleFormat::RawRgb;
  }
  EXPECT_GT(raw, 4500u);  // a fair coin over 9,469: 4,734 +- 3 sigma (146)
  EXPECT_LT(raw, 4970u);
  EXPECT_THROW(virtual_dataset("ffcv:imagenet22k"), InputError);
}

// Exact under the virtual clock: one worker, batches of two, reads from the
// mapped pages (no per-sample cost, instant copies), 1 ms to crop and
// transform a sample, 10 ns a byte of JPEG, and FFCV's stages after decoding
// (4.0631 ms a batch of 256 on the GPU: 31,743 ns for two).
TEST(FfcvModel, RawSamplesSkipEntropyDecodingAndBatchesPayTheStages) {
  LoaderModelOptions base;
  base.read_bytes_per_s = 0;
  base.decode_per_sample = kMillisecond;
  base.decode_ns_per_byte = 10;
  base.cores = 64;
  auto ready = [&](double share) {
    const Dataset d = layout_of_four(share);
    LoaderOptions o;
    o.batch_size = 2;
    o.num_workers = 1;
    o.prefetch_factor = 2;
    LoaderModelOptions m = base;
    use_ffcv_loader(d, o.batch_size, o, &m);
    EXPECT_EQ(o.read_method, ReadMethod::Mmap);
    EXPECT_EQ(m.read_per_sample, 0);
    EXPECT_EQ(m.collate_per_batch, 31743);
    auto clock = make_virtual_clock();
    ModelledLoader loader(*clock, d, o, m);
    loader.begin_epoch(0);
    std::vector<Time> out;
    while (auto b = loader.next({})) out.push_back(b->ready);
    return out;
  };
  EXPECT_EQ(ready(0), (std::vector<Time>{2'031'743, 4'063'486}));
  EXPECT_EQ(ready(1), (std::vector<Time>{3'531'743, 7'063'486}));  // + 2 x 750 us of entropy decoding a batch
  // The CPU variant of the stages (GPEmu's emulator): 36.6083 ms a batch of 256.
  EXPECT_EQ(ffcv_loader_model(base, 256, true).collate_per_batch, 36'608'300);
}

}  // namespace
}  // namespace gpemu::pipeline
