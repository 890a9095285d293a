// The storage model (a queued server), the page cache model (LRU) and the
// loader cache's admission policies (MinIO, small file first).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <stdexcept>

#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "gpemu/spec_error.h"
#include "support/temp_dir.h"

namespace gpemu::pipeline {
namespace {

// 1 ms per request + 1 ms per 100 KB: a 100,000-byte request takes 2 ms.
StorageDevice round_device(int parallelism = 1, double total_bytes_per_s = 0) {
  StorageDevice d;
  d.name = "test";
  d.latency = kMillisecond;
  d.bytes_per_s = 1e8;
  d.parallelism = parallelism;
  d.total_bytes_per_s = total_bytes_per_s;
  return d;
}

constexpr Time ms = kMillisecond;

TEST(StorageServer, OneSlotServesFirstComeFirstServed) {
  StorageServer s(round_device());
  EXPECT_EQ(s.serve(0, 100000), 2 * ms);
  EXPECT_EQ(s.serve(0, 100000), 4 * ms);       // waited for the first
  EXPECT_EQ(s.serve(1 * ms, 200000), 7 * ms);  // 1 ms + 2 ms of bytes after 4 ms
  EXPECT_EQ(s.serve(10 * ms, 0), 11 * ms);     // idle device: latency only
  EXPECT_EQ(s.requests(), 4u);
  EXPECT_EQ(s.bytes(), 400000u);
  EXPECT_THROW(s.serve(9 * ms, 1), std::logic_error);  // arrivals must not go back in time
}

TEST(StorageServer, SlotsServeAtOnceAndAChannelSerializesBytes) {
  StorageServer two(round_device(2));
  EXPECT_EQ(two.serve(0, 100000), 2 * ms);
  EXPECT_EQ(two.serve(0, 100000), 2 * ms);  // the second slot
  EXPECT_EQ(two.serve(0, 100000), 4 * ms);  // waits for a slot
  // Two slots behind one channel as fast as a slot: bytes pass one request
  // after another once each request's latency is paid.
  StorageServer channel(round_device(2, 1e8));
  EXPECT_EQ(channel.serve(0, 100000), 2 * ms);
  EXPECT_EQ(channel.serve(0, 100000), 3 * ms);
}

TEST(StorageServer, PresetsAndFiles) {
  const StorageDevice hdd = parse_storage("hdd");
  EXPECT_EQ(hdd.latency, 4470 * kMicrosecond);
  EXPECT_DOUBLE_EQ(hdd.bytes_per_s, 109.4e6);
  EXPECT_EQ(hdd.parallelism, 1);
  EXPECT_FALSE(hdd.source.empty());
  for (const std::string& name : storage_presets()) EXPECT_EQ(parse_storage(name).name, name);

  testing::TempDir dir;
  const std::string file = (dir.path() / "disk.json").string();
  std::ofstream(file) << R"({"name": "array", "latency_us": 250, "bandwidth_mb_s": 400, "parallelism": 8,
                             "total_bandwidth_mb_s": 1600})";
  const StorageDevice d = parse_storage(file);
  EXPECT_EQ(d.name, "array");
  EXPECT_EQ(d.latency, 250 * kMicrosecond);
  EXPECT_DOUBLE_EQ(d.bytes_per_s, 400e6);
  EXPECT_EQ(d.parallelism, 8);
  EXPECT_DOUBLE_EQ(d.total_bytes_per_s, 1600e6);

  auto error_of = [&](const std::string& text) {
    std::ofstream(file) << text;
    try {
      parse_storage(file);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"({"latency_us": 1})").find("missing key 'bandwidth_mb_s'"), std::string::npos);
  EXPECT_NE(error_of(R"({"latency_us": 1, "bandwidth_mb_s": 0})").find("'bandwidth_mb_s' is 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"latency_us": 1, "bandwidth_mb_s": 1e-300})").find("'bandwidth_mb_s'"), std::string::npos);
  EXPECT_NE(error_of(R"({"latency_us": 1, "bandwidth_mb_s": 1, "total_bandwidth_mb_s": 1e-9})")
                .find("'total_bandwidth_mb_s'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"latency_us": 1, "bandwidth_mb_s": 5, "parallelism": 2.5})").find("whole number"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"latency_us": 1, "bandwidth_mb_s": 5, "heads": 2})").find("unknown key 'heads'"),
            std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  // Found by the fuzz harness: a number past a double's range is refused, not thrown through.
  EXPECT_NE(error_of(R"({"latency_us": 1e770, "bandwidth_mb_s": 1})").find("not valid JSON"), std::string::npos);
  try {
    parse_storage("floppy");
    FAIL() << "a missing file is not a device";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hdd, ssd, nvme, nfs"), std::string::npos) << e.what();
  }
  // An empty name is the spec's data.model.storage, not a flag (issue 29).
  try {
    parse_storage("");
    ADD_FAILURE() << "an empty name is not a device";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "data.model.storage");
    EXPECT_EQ(std::string(e.what()).rfind("job: data.model.storage is empty: give hdd, ssd", 0), 0U) << e.what();
  }
  // What is not a regular file is refused before it is opened: a FIFO's
  // open would wait for a writer, a device would be read without end.
  const std::string fifo = (dir.path() / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), dir.path().string()}) {
    try {
      parse_storage(path);
      ADD_FAILURE() << path << " is not a device";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
}

TEST(StorageServer, RanksShareADevice) {
  // An HDD shared by two loaders: each sees a head at half the pace.
  const StorageDevice half = shared_by(round_device(), 2);
  EXPECT_EQ(half.parallelism, 1);
  EXPECT_EQ(half.latency, 2 * ms);
  EXPECT_DOUBLE_EQ(half.bytes_per_s, 5e7);
  // 32 slots for 4 loaders: 8 each, a quarter of the channel.
  const StorageDevice quarter = shared_by(round_device(32, 4e8), 4);
  EXPECT_EQ(quarter.parallelism, 8);
  EXPECT_EQ(quarter.latency, ms);
  EXPECT_DOUBLE_EQ(quarter.total_bytes_per_s, 1e8);
  EXPECT_EQ(shared_by(round_device(), 1).latency, ms);
}

// A loader whose share of a device changes (another job began or ended
// reading it): requests in service keep their slots and ends.
TEST(StorageServer, ASharedDeviceReshapedKeepsTheRequestsInService) {
  StorageServer s(round_device(2));
  EXPECT_EQ(s.serve(0, 100000), 2 * ms);
  EXPECT_EQ(s.serve(0, 300000), 4 * ms);
  // One slot now (shared by two): it is the later request's, free at 4 ms.
  s.reshare(shared_by(round_device(2), 2));
  EXPECT_EQ(s.serve(1 * ms, 100000), 4 * ms + 2 * ms);  // at the slot's pace: 1 ms + 100 KB at 100 MB/s
  // Back to two slots: the new one is free at once, the other busy until 6 ms.
  s.reshare(round_device(2));
  EXPECT_EQ(s.serve(2 * ms, 100000), 4 * ms);
  EXPECT_EQ(s.serve(2 * ms, 100000), 6 * ms);  // waits for the slot the request before freed at 4 ms
  EXPECT_EQ(s.requests(), 5u);
  // Four loaders on two slots: one slot at half the pace.
  s.reshare(shared_by(round_device(2), 4));
  EXPECT_EQ(s.device().latency, 2 * ms);
  EXPECT_THROW(s.reshare(StorageDevice{}), InputError);  // no bandwidth
}

TEST(PageCacheModel, LeastRecentlyUsedSamplesLeaveFirst) {
  PageCacheModel pc(300);
  EXPECT_FALSE(pc.access(1, 100));
  EXPECT_FALSE(pc.access(2, 100));
  EXPECT_FALSE(pc.access(3, 100));
  EXPECT_EQ(pc.resident_bytes(), 300u);
  EXPECT_TRUE(pc.access(1, 100));   // now the most recent
  EXPECT_FALSE(pc.access(4, 100));  // evicts 2, the least recent
  EXPECT_TRUE(pc.access(3, 100));
  EXPECT_FALSE(pc.access(2, 100));  // evicts 1
  EXPECT_FALSE(pc.access(1, 100));
  EXPECT_FALSE(pc.access(9, 301));  // larger than the cache: not kept
  EXPECT_EQ(pc.resident_bytes(), 300u);
  pc.clear();
  EXPECT_EQ(pc.resident_bytes(), 0u);
  EXPECT_FALSE(pc.access(3, 100));
  PageCacheModel none(0);
  EXPECT_FALSE(none.access(1, 1));
  EXPECT_FALSE(none.access(1, 1));
}

Dataset sized(std::initializer_list<std::uint64_t> sizes) {
  Dataset d;
  d.root = "sized";
  for (std::uint64_t b : sizes) {
    Sample s;
    s.path = std::to_string(d.samples.size());
    s.length = b;
    d.samples.push_back(s);
  }
  return d;
}

TEST(CachePolicy, SmallFileFirstAdmitsFilesUpToTheSizeWhoseSmallerFilesAllFit) {
  const Dataset d = sized({40, 10, 30, 20});
  EXPECT_EQ(sff_size_limit(d, 60), 30u);  // 10 + 20 + 30 = 60
  EXPECT_EQ(sff_size_limit(d, 59), 20u);
  EXPECT_EQ(sff_size_limit(d, 1000), 40u);
  EXPECT_EQ(sff_size_limit(d, 5), 0u);
  const CacheAdmission sff = cache_admission(d, 60, CachePolicy::Sff);
  EXPECT_TRUE(sff.admits(0, 30));
  EXPECT_FALSE(sff.admits(0, 40));   // too large, although it fits
  EXPECT_FALSE(sff.admits(40, 30));  // does not fit
  const CacheAdmission minio = cache_admission(d, 60, CachePolicy::Minio);
  EXPECT_TRUE(minio.admits(0, 40));
  EXPECT_FALSE(minio.admits(30, 40));
  EXPECT_FALSE(minio.admits(70, 0));  // used past the capacity never wraps around

  LoaderCache cache(sff);
  const std::byte bytes[40] = {};
  EXPECT_FALSE(cache.admit("big", 0, std::span<const std::byte>(bytes, 40)));
  EXPECT_TRUE(cache.admit("small", 0, std::span<const std::byte>(bytes, 30)));
  EXPECT_EQ(cache.rejected(), 1u);
  EXPECT_EQ(cache.used_bytes(), 30u);

  EXPECT_EQ(parse_cache_policy("sff"), CachePolicy::Sff);
  EXPECT_EQ(to_string(parse_cache_policy("minio")), "minio");
  try {
    parse_cache_policy("lru");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'lru'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("minio"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpemu::pipeline
