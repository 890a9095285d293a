// DLIO-style record files: generated files read back the right bytes through
// the dataset's offsets, NumPy loads what we write, and we read what NumPy writes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "pipeline/npy.h"
#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

using testing::TempDir;

DlioOptions dlio(DlioFormat format, std::uint64_t record_length = 0) {
  DlioOptions o;
  o.format = format;
  o.record_length = record_length;
  return o;
}

void expect_records(const Dataset& ds, std::uint64_t seed, std::size_t files, std::size_t per_file,
                    std::uint64_t length) {
  ASSERT_EQ(ds.size(), files * per_file);
  FileReader reader;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    const auto& s = ds.samples[i];
    ASSERT_EQ(s.length, length);
    const auto got = reader.read(s.path, s.offset, s.length);
    const auto want = dlio_record_bytes(seed, i / per_file, i % per_file, length);
    ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << "sample " << i << " " << s.path;
  }
}

class Records : public ::testing::TestWithParam<DlioFormat> {};

TEST_P(Records, ReadBackTheBytesThatWereWritten) {
  TempDir dir;
  DlioGeneratorOptions g;
  g.format = GetParam();
  g.num_files = 11;  // two-digit names must still sort in file order
  g.samples_per_file = 3;
  g.record_length = 1000;  // not a multiple of the 4 KiB O_DIRECT alignment
  g.seed = 17;
  const auto files = generate_dlio_dataset(dir.path(), g);
  EXPECT_EQ(files.size(), 11u);
  DlioOptions o;
  o.format = g.format;
  o.record_length = g.format == DlioFormat::Raw ? 1000 : 0;
  const auto ds = open_dlio_dataset(dir.path(), o);
  expect_records(ds, 17, 11, 3, 1000);
  if (g.format == DlioFormat::Npz) {
    for (std::size_t i = 0; i < ds.size(); ++i) EXPECT_EQ(ds.samples[i].label, static_cast<std::int64_t>(i % 3));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Records, ::testing::Values(DlioFormat::Npy, DlioFormat::Npz, DlioFormat::Raw));

TEST(Records, LoaderDeliversRecordsAsBytes) {
  TempDir dir;
  DlioGeneratorOptions g;
  g.format = DlioFormat::Npz;
  g.num_files = 4;
  g.samples_per_file = 5;
  g.record_length = 777;
  g.seed = 3;
  generate_dlio_dataset(dir.path(), g);
  LoaderOptions lo;
  lo.batch_size = 6;
  lo.num_workers = 2;
  lo.direct_io = true;  // falls back by itself where the filesystem refuses
  DataLoader loader(open_dlio_dataset(dir.path(), dlio(DlioFormat::Npz)), lo);
  std::size_t seen = 0;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->layout, BatchLayout::Bytes);
    ASSERT_EQ(b->shape.size(), 2u);
    EXPECT_EQ(b->shape[1], 777);
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto idx = b->sample_indices[k];
      const auto want = dlio_record_bytes(3, idx / 5, idx % 5, 777);
      const auto got = b->bytes().subspan(b->byte_offsets[k], b->byte_offsets[k + 1] - b->byte_offsets[k]);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << "sample " << idx;
    }
    seen += b->size();
  }
  EXPECT_EQ(seen, 20u);
}

TEST(Records, JpegFilesAreOneSampleEach) {
  TempDir dir;
  DlioGeneratorOptions g;
  g.format = DlioFormat::Jpeg;
  g.num_files = 3;
  g.record_length = 5000;
  generate_dlio_dataset(dir.path(), g);
  const auto ds = open_dlio_dataset(dir.path(), dlio(DlioFormat::Jpeg));
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.samples[0].format, SampleFormat::Jpeg);
  g.samples_per_file = 2;
  EXPECT_THROW(generate_dlio_dataset(dir / "x", g), InputError);
}

TEST(Records, RawFileOfTheWrongSizeIsAnInputError) {
  TempDir dir;
  std::ofstream(dir / "a.bin") << "12345";
  DlioOptions o;
  o.format = DlioFormat::Raw;
  o.record_length = 2;
  EXPECT_THROW(open_dlio_dataset(dir.path(), o), InputError);
  o.record_length = 0;
  EXPECT_THROW(open_dlio_dataset(dir.path(), o), InputError);
}

TEST(Npy, HeaderRoundTrips) {
  auto h = make_npy_header("<f4", {3, 4, 5});
  EXPECT_EQ(h.size() % 64, 0u);
  const auto p = parse_npy_header(h, "test");
  EXPECT_EQ(p.descr, "<f4");
  EXPECT_EQ(p.item_size, 4u);
  EXPECT_EQ(p.shape, (std::vector<std::uint64_t>{3, 4, 5}));
  EXPECT_EQ(p.header_bytes, h.size());
  const auto one = parse_npy_header(make_npy_header("|u1", {7}), "test");
  EXPECT_EQ(one.shape, (std::vector<std::uint64_t>{7}));
  EXPECT_THROW(parse_npy_header(std::vector<std::byte>(20), "junk"), InputError);
}

TEST(Npy, Crc32MatchesTheZipCheckValue) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32(std::as_bytes(std::span(s.data(), s.size()))), 0xcbf43926u);
}

bool have_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

TEST(Npy, NumpyLoadsOurFilesAndWeReadNumpysNpz) {
  if (!have_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  TempDir dir;
  DlioGeneratorOptions g;
  g.num_files = 1;
  g.samples_per_file = 4;
  g.record_length = 10;
  g.seed = 5;
  g.format = DlioFormat::Npy;
  const auto npy = generate_dlio_dataset(dir / "npy", g).front();
  g.format = DlioFormat::Npz;
  const auto npz = generate_dlio_dataset(dir / "npz", g).front();
  const auto want = dlio_record_bytes(5, 0, 2, 10);
  std::string expected = "[";
  for (std::size_t i = 0; i < want.size(); ++i) expected += (i ? ", " : "") + std::to_string(int(want[i]));
  expected += "]";
  const auto script = dir / "check.py";
  std::ofstream(script) << "import numpy as np, sys\n"
                           "a = np.load(sys.argv[1]); z = np.load(sys.argv[2])\n"
                           "assert a.shape == (4, 10) and a.dtype == np.uint8, a.shape\n"
                           "assert (a == z['x']).all() and list(z['y']) == [0, 1, 2, 3]\n"
                           "assert str(list(int(v) for v in a[2])) == sys.argv[3], (list(a[2]), sys.argv[3])\n"
                           "np.savez(sys.argv[4], x=np.arange(24, dtype=np.int16).reshape(6, 4), y=np.arange(6) * 3)\n";
  const auto theirs = (dir / "numpy.npz").string();
  const std::string cmd =
      "/usr/bin/python3 " + script.string() + " " + npy + " " + npz + " '" + expected + "' " + theirs;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::filesystem::create_directories(dir / "theirs");
  std::filesystem::rename(theirs, dir / "theirs/numpy.npz");
  const auto ds = open_dlio_dataset(dir / "theirs", dlio(DlioFormat::Npz, 8));
  ASSERT_EQ(ds.size(), 6u);
  FileReader reader;
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(ds.samples[i].label, static_cast<std::int64_t>(3 * i));
    const auto b = reader.read(ds.samples[i].path, ds.samples[i].offset, 8);
    for (int k = 0; k < 4; ++k) {
      const int v = std::to_integer<int>(b[2 * k]) | (std::to_integer<int>(b[2 * k + 1]) << 8);
      EXPECT_EQ(v, static_cast<int>(i * 4 + k));
    }
  }
}

TEST(PageCache, EvictionAdvisesEveryFileAndReportsMissingOnes) {
  TempDir dir;
  DlioGeneratorOptions g;
  g.format = DlioFormat::Raw;
  g.num_files = 3;
  g.record_length = 1 << 16;
  const auto files = generate_dlio_dataset(dir.path(), g);
  auto with_missing = files;
  with_missing.push_back((dir / "missing.bin").string());
  const auto before = page_cache_resident_bytes(files);
  const auto r = evict_from_page_cache(with_missing);
  EXPECT_EQ(r.files, 3u);
  EXPECT_EQ(r.bytes, 3u << 16);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("missing.bin"), std::string::npos);
  const auto after = page_cache_resident_bytes(files);
  // Advice, not a guarantee (tmpfs keeps everything), so only "never more".
  EXPECT_LE(before, 3u << 16);
  EXPECT_LE(after, before);
}

}  // namespace
}  // namespace gpemu::pipeline
