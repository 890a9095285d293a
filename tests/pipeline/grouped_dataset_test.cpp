// Grouped datasets: `gpemu dataset group`'s writer, the index reader (and what
// it refuses), and the real loader reading whole files by groups.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "support/temp_dir.h"

namespace gpemu::pipeline {
namespace {

namespace fs = std::filesystem;

// Ten byte files of 100..1000 bytes, listed in a file list.
Dataset ten_files(const fs::path& dir) {
  std::string list;
  for (int i = 0; i < 10; ++i) {
    const std::string name = std::to_string(i) + ".bin";
    const std::string bytes(static_cast<std::size_t>(100 * (i + 1)), static_cast<char>('a' + i));
    std::ofstream(dir / name, std::ios::binary) << bytes;
    list += name + "\t" + std::to_string(i) + "\n";
  }
  std::ofstream(dir / "list.txt") << list;
  return open_file_list(dir / "list.txt");
}

std::string error_of(const fs::path& dir) {
  try {
    open_grouped_dataset(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(GroupedDataset, WritesFilesOfGroupsAndReadsThemBack) {
  testing::TempDir src, out;
  const Dataset d = ten_files(src.path());
  const GroupedDatasetSummary s = write_grouped_dataset(d, out.path() / "g", 4, "sequential", 0);
  EXPECT_EQ(s.samples, 10u);
  EXPECT_EQ(s.files, 3u);
  EXPECT_EQ(s.total_bytes, d.total_bytes());
  ASSERT_TRUE(is_grouped_dataset(out.path() / "g"));
  EXPECT_FALSE(is_grouped_dataset(src.path()));
  const Dataset g = open_dataset_folder(out.path() / "g");
  EXPECT_EQ(g.group_size, 4u);
  ASSERT_EQ(g.size(), 10u);
  EXPECT_EQ(g.samples[0].path, g.samples[3].path);
  EXPECT_NE(g.samples[3].path, g.samples[4].path);
  EXPECT_EQ(g.samples[1].offset, 100u);
  EXPECT_EQ(g.samples[1].length, 200u);
  EXPECT_EQ(g.samples[9].label, 9);
  EXPECT_EQ(g.samples[9].format, SampleFormat::Bytes);
  EXPECT_EQ(g.total_bytes(), d.total_bytes());

  // The real loader reads every sample's own bytes from its group's file,
  // and the group-level sampler delivers a file's samples together.
  LoaderOptions o;
  o.batch_size = 4;
  o.num_workers = 2;
  o.shuffle = true;
  o.decode_images = false;
  o.group_size = g.group_size;
  DataLoader loader(g, o);
  std::set<std::int64_t> labels;
  loader.begin_epoch(0);
  while (auto b = loader.next()) {
    for (std::size_t i = 0; i < b->size(); ++i) {
      const std::int64_t label = b->labels[i];
      labels.insert(label);
      const std::size_t begin = b->byte_offsets[i], end = b->byte_offsets[i + 1];
      EXPECT_EQ(end - begin, static_cast<std::size_t>(100 * (label + 1)));
      EXPECT_EQ(b->bytes()[begin], static_cast<std::byte>('a' + label));
    }
    // A batch of 4 from files of 4, 4 and 2: one file, or the 2 and part of another.
    std::set<std::size_t> files;
    for (std::size_t idx : b->sample_indices) files.insert(idx / 4);
    EXPECT_LE(files.size(), 2u);
  }
  EXPECT_EQ(labels.size(), 10u);

  // A random order mixes the samples, with every one kept once.
  write_grouped_dataset(d, out.path() / "r", 4, "random", 7);
  const Dataset r = open_grouped_dataset(out.path() / "r");
  std::set<std::int64_t> seen;
  for (const Sample& smp : r.samples) seen.insert(smp.label);
  EXPECT_EQ(seen.size(), 10u);
  std::vector<std::int64_t> order;
  for (const Sample& smp : r.samples) order.push_back(smp.label);
  EXPECT_NE(order, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(GroupedDataset, RefusesBadArgumentsAndLeavesNothingBehind) {
  testing::TempDir src, out;
  const Dataset d = ten_files(src.path());
  EXPECT_THROW(write_grouped_dataset(d, out.path() / "a", 0, "random", 0), InputError);
  EXPECT_THROW(write_grouped_dataset(d, out.path() / "a", 4, "shuffled", 0), InputError);
  std::ofstream(out.path() / "busy") << "x";
  EXPECT_THROW(write_grouped_dataset(d, out.path(), 4, "random", 0), InputError);  // not empty
  EXPECT_TRUE(fs::exists(out.path() / "busy"));                                    // and untouched
  // A source file gone mid-way: the half-written folder is removed.
  Dataset broken = d;
  broken.samples[7].path = (src.path() / "missing.bin").string();
  EXPECT_THROW(write_grouped_dataset(broken, out.path() / "b", 4, "sequential", 0), InputError);
  EXPECT_FALSE(fs::exists(out.path() / "b"));
}

TEST(GroupedDataset, AHostileIndexIsRefusedNamingTheLine) {
  testing::TempDir dir;
  std::ofstream(dir.path() / "group-00000000.bin", std::ios::binary) << std::string(300, 'x');
  auto index = [&](const std::string& text) {
    std::ofstream(dir.path() / "index.tsv") << text;
    return error_of(dir.path());
  };
  const std::string head = "# gpemu grouped dataset: 2 samples per file\n";
  EXPECT_EQ(index(head + "group-00000000.bin\t0\t100\t1\tjpeg\ngroup-00000000.bin\t100\t200\t2\tbytes\n"), "no error");
  EXPECT_NE(index("# gpemu grouped dataset: 0 samples per file\n").find("line 1"), std::string::npos);
  EXPECT_NE(index("# gpemu grouped dataset: many samples per file\n").find("line 1"), std::string::npos);
  EXPECT_NE(index(head + "group-00000000.bin\t0\t100\t1\n").find("line 2: 4 fields"), std::string::npos);
  EXPECT_NE(index(head + "../etc/passwd\t0\t1\t1\tjpeg\n").find("not a file name"), std::string::npos);
  EXPECT_NE(index(head + "group-00000000.bin\t-1\t100\t1\tjpeg\n").find("offset '-1'"), std::string::npos);
  EXPECT_NE(index(head + "group-00000000.bin\t0\t18446744073709551615\t1\tjpeg\n").find("past the end"),
            std::string::npos);
  EXPECT_NE(index(head + "group-00000000.bin\t0\t99999999999999999999\t1\tjpeg\n").find("length"), std::string::npos);
  EXPECT_NE(index(head + "group-00000000.bin\t0\t100\t1\tpng\n").find("format 'png'"), std::string::npos);
  EXPECT_NE(index(head + "group-00000000.bin\t5\t100\t1\tjpeg\n").find("offset 5"), std::string::npos);
  EXPECT_NE(index(head + "nothere.bin\t0\t1\t1\tjpeg\n").find("cannot be read"), std::string::npos);
  EXPECT_NE(index(head + "group-00000000.bin\t0\t100\t1\tjpeg\nother.bin\t0\t1\t1\tjpeg\n").find("line 3"),
            std::string::npos);
  EXPECT_NE(index(head).find("no samples"), std::string::npos);
  std::ofstream(dir.path() / kIncompleteDatasetMarker) << "";
  EXPECT_NE(index(head + "group-00000000.bin\t0\t100\t1\tjpeg\n").find("did not finish"), std::string::npos);
}

}  // namespace
}  // namespace gpemu::pipeline
