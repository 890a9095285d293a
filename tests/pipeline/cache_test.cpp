#include "gpemu/pipeline.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

std::vector<std::byte> bytes(std::size_t n, int v) { return std::vector<std::byte>(n, static_cast<std::byte>(v)); }

TEST(LoaderCache, AdmitsUntilFullAndNeverEvicts) {
  LoaderCache c(250);
  EXPECT_FALSE(c.lookup("a", 0));
  EXPECT_TRUE(c.admit("a", 0, bytes(100, 1)));
  EXPECT_TRUE(c.admit("b", 0, bytes(100, 2)));
  EXPECT_FALSE(c.admit("c", 0, bytes(100, 3)));  // would exceed 250
  EXPECT_TRUE(c.admit("d", 0, bytes(50, 4)));    // still fits
  EXPECT_FALSE(c.admit("e", 0, bytes(1, 5)));    // full
  EXPECT_FALSE(c.admit("a", 0, bytes(0, 0)));    // already cached
  EXPECT_EQ(c.used_bytes(), 250u);
  EXPECT_EQ(c.entries(), 3u);
  EXPECT_EQ(c.rejected(), 2u);
  for (int round = 0; round < 3; ++round) {  // later misses never push out earlier items
    EXPECT_FALSE(c.lookup("c", 0));
    EXPECT_FALSE(c.admit("c", 0, bytes(100, 3)));
    const auto a = c.lookup("a", 0);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->size(), 100u);
    EXPECT_EQ((*a)[99], std::byte{1});
  }
  EXPECT_TRUE(c.lookup("d", 0));
  EXPECT_FALSE(c.lookup("d", 1));  // keyed by offset too
  EXPECT_EQ(c.hits(), 4u);
  EXPECT_EQ(c.misses(), 5u);
}

TEST(LoaderCache, ConcurrentAdmissionsNeverExceedCapacity) {
  LoaderCache c(10'000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c, t] {
      for (int i = 0; i < 500; ++i) c.admit("f" + std::to_string((i * 7 + t) % 300), 0, bytes(97, t));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(c.used_bytes(), 10'000u);
  EXPECT_EQ(c.used_bytes(), c.entries() * 97);
}

TEST(LoaderCache, SecondEpochHitsWhatTheFirstAdmitted) {
  testing::TempDir dir;
  DlioGeneratorOptions g;
  g.format = DlioFormat::Raw;
  g.num_files = 10;
  g.samples_per_file = 4;
  g.record_length = 1000;
  generate_dlio_dataset(dir.path(), g);
  DlioOptions d;
  d.format = DlioFormat::Raw;
  d.record_length = 1000;
  LoaderOptions o;
  o.batch_size = 8;
  o.num_workers = 2;
  o.shuffle = true;
  o.cache_bytes = 25'000;  // 25 of the 40 records
  DataLoader loader(open_dlio_dataset(dir.path(), d), o);
  std::size_t hits0 = 0, hits1 = 0, read1 = 0;
  loader.begin_epoch(0);
  while (auto b = loader.next()) hits0 += b->cache_hits;
  loader.begin_epoch(1);
  while (auto b = loader.next()) {
    hits1 += b->cache_hits;
    read1 += b->bytes_read;
  }
  EXPECT_EQ(hits0, 0u);
  EXPECT_EQ(hits1, 25u);
  EXPECT_EQ(read1, 15u * 1000);
  EXPECT_EQ(loader.cache()->used_bytes(), 25'000u);
  EXPECT_EQ(loader.stats().cache_hits, 25u);
}

TEST(LoaderCache, SmallFileFirstInTheRealLoaderKeepsTheSmallFiles) {
  testing::TempDir dir;
  std::string list;
  for (int i = 0; i < 8; ++i) {
    const std::string name = std::to_string(i) + ".bin";
    const std::vector<std::byte> data = bytes(i % 2 ? 1500 : 500, i);
    std::ofstream(dir.path() / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    list += name + "\n";
  }
  std::ofstream(dir.path() / "list.txt") << list;
  LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = 2;
  o.shuffle = true;
  o.cache_bytes = 2000;  // the four 500-byte files exactly
  o.cache_policy = CachePolicy::Sff;
  DataLoader loader(open_file_list(dir.path() / "list.txt"), o);
  EXPECT_EQ(loader.cache()->admission().max_item_bytes, 500u);
  std::size_t hits1 = 0, read1 = 0;
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    loader.begin_epoch(epoch);
    while (auto b = loader.next()) {
      if (epoch == 1) {
        hits1 += b->cache_hits;
        read1 += b->bytes_read;
      }
    }
  }
  EXPECT_EQ(hits1, 4u);
  EXPECT_EQ(read1, 4u * 1500);
  EXPECT_EQ(loader.stats().cache_resident_bytes, 2000u);
}

}  // namespace
}  // namespace gpemu::pipeline
