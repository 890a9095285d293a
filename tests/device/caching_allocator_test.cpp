// Specification of the emulated PyTorch CUDA caching allocator. Every number
// here is what PyTorch 1.13-2.x's allocator reports for the same sequence of
// requests (torch.cuda.memory_allocated / memory_reserved / memory_stats).
#include "gpemu/device.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <vector>

#include "gpemu/error.h"

namespace gpemu {
namespace {

constexpr std::uint64_t KiB = 1ull << 10;
constexpr std::uint64_t MiB = 1ull << 20;
constexpr std::uint64_t GiB = 1ull << 30;

CachingAllocator make(std::uint64_t capacity = CachingAllocator::kUnlimited) {
  CachingAllocator::Options o;
  o.capacity_bytes = capacity;
  return CachingAllocator(o);
}

// ---- rounding and pools ----------------------------------------------------

TEST(CachingAllocatorRounding, RequestsRoundUpToMultiplesOf512Bytes) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(MiB + 1), MiB + 512);
}

TEST(CachingAllocatorRounding, OneByteTakesA512ByteBlock) {
  auto a = make();
  auto p = a.allocate(1);
  EXPECT_EQ(a.block_size(p), 512u);
  auto s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 512u);
  EXPECT_EQ(s.requested_bytes, 1u);
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
}

TEST(CachingAllocatorRounding, OneMiBIsStillSmallPool) {
  auto a = make();
  auto p = a.allocate(MiB);
  auto q = a.allocate(MiB);  // the other half of the same 2 MiB small segment
  EXPECT_EQ(q, p + MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(a.stats().segments, 1u);
}

TEST(CachingAllocatorRounding, OneMiBPlusOneIsLargePool) {
  auto a = make();
  auto p = a.allocate(MiB + 1);
  EXPECT_EQ(a.block_size(p), MiB + 512);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
}

TEST(CachingAllocatorRounding, ZeroBytesAllocatesNothing) {
  auto a = make();
  EXPECT_EQ(a.allocate(0), 0u);
  a.free(0);  // like cudaFree(nullptr)
  auto s = a.stats();
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.active_blocks, 0u);
}

// ---- segment sizes ---------------------------------------------------------

TEST(CachingAllocatorSegments, SegmentSizeRule) {
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB + 512), 12 * MiB);
}

TEST(CachingAllocatorSegments, OneKiBReserves2MiB) {
  auto a = make();
  a.allocate(KiB);
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(a.stats().num_device_alloc, 1u);
}

TEST(CachingAllocatorSegments, FiveMiBReserves20MiB) {
  auto a = make();
  auto p = a.allocate(5 * MiB);
  EXPECT_EQ(a.block_size(p), 5 * MiB);  // the other 15 MiB are split off and cached
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 5 * MiB);
}

TEST(CachingAllocatorSegments, ThirtyMiBReserves30MiB) {
  auto a = make();
  a.allocate(30 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 30 * MiB);
}

TEST(CachingAllocatorSegments, ThirtyOneMiBReserves32MiBAndKeepsTheUnsplitRest) {
  auto a = make();
  auto p = a.allocate(31 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 32 * MiB);
  // The 1 MiB rest is not more than 1 MiB, so it is not split off.
  EXPECT_EQ(a.block_size(p), 32 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 32 * MiB);
  EXPECT_EQ(a.stats().requested_bytes, 31 * MiB);
}

// ---- splitting and best fit ------------------------------------------------

TEST(CachingAllocatorSplit, TwoSmallAllocationsShareOneSegment) {
  auto a = make();
  auto p = a.allocate(KiB);
  auto q = a.allocate(KiB);
  EXPECT_EQ(q, p + KiB);
  auto s = a.stats();
  EXPECT_EQ(s.segments, 1u);
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
  EXPECT_EQ(s.allocated_bytes, 2 * KiB);
  EXPECT_EQ(s.active_blocks, 2u);
}

TEST(CachingAllocatorSplit, LargeRequestsFillTheRestOfA20MiBSegment) {
  auto a = make();
  auto p = a.allocate(5 * MiB);
  auto q = a.allocate(15 * MiB);  // exactly the cached rest
  EXPECT_EQ(q, p + 5 * MiB);
  EXPECT_EQ(a.stats().segments, 1u);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
}

TEST(CachingAllocatorSplit, LargeRestOfAtMostOneMiBIsNotSplitOff) {
  auto a = make();
  auto p = a.allocate(5 * MiB);
  auto q = a.allocate(14 * MiB + 512 * KiB);  // leaves 512 KiB of the 15 MiB block
  EXPECT_EQ(q, p + 5 * MiB);
  EXPECT_EQ(a.block_size(q), 15 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 20 * MiB);
}

TEST(CachingAllocatorSplit, SmallRestOf512BytesIsSplitOff) {
  auto a = make();
  auto p = a.allocate(MiB);
  auto q = a.allocate(MiB - 512);  // leaves 512 bytes of the 2 MiB segment, split off
  EXPECT_EQ(q, p + MiB);
  EXPECT_EQ(a.block_size(q), MiB - 512);
  EXPECT_EQ(a.allocate(1), p + 2 * MiB - 512);
  EXPECT_EQ(a.stats().segments, 1u);
  EXPECT_EQ(a.stats().allocated_bytes, 2 * MiB);
}

TEST(CachingAllocatorSplit, BestFitTakesTheSmallestFreeBlockThenTheLowestAddress) {
  auto a = make();
  auto b4 = a.allocate(4 * KiB);
  a.allocate(KiB);
  auto b2 = a.allocate(2 * KiB);
  a.allocate(KiB);
  auto c2 = a.allocate(2 * KiB);
  a.allocate(KiB);
  a.free(b4);
  a.free(c2);
  a.free(b2);
  // Free: 4 KiB at b4, 2 KiB at b2, 2 KiB at c2, and the segment's tail.
  EXPECT_EQ(a.allocate(2 * KiB), b2);
  EXPECT_EQ(a.allocate(2 * KiB), c2);
  EXPECT_EQ(a.allocate(3 * KiB), b4);
  EXPECT_EQ(a.stats().segments, 1u);
}

// ---- caching and merging ---------------------------------------------------

TEST(CachingAllocatorCache, FreedBlockIsReusedWithoutANewSegment) {
  auto a = make();
  auto p = a.allocate(5 * MiB);
  a.free(p);
  auto s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 20 * MiB);  // cached, not given back
  EXPECT_EQ(s.segments, 1u);
  EXPECT_EQ(a.allocate(5 * MiB), p);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  EXPECT_EQ(a.stats().num_device_alloc, 1u);
}

TEST(CachingAllocatorCache, SecondIterationOfALoopReservesNothingNew) {
  auto a = make();
  const std::uint64_t sizes[] = {3 * KiB, 700 * KiB, 4 * MiB, 64 * MiB, 9 * MiB, 100};
  for (int iteration = 0; iteration < 2; ++iteration) {
    std::vector<CachingAllocator::Ptr> live;
    for (auto s : sizes) live.push_back(a.allocate(s));
    for (auto p : live) a.free(p);
    if (iteration == 0) {
      EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB + 20 * MiB + 64 * MiB);
    }
  }
  EXPECT_EQ(a.stats().num_device_alloc, 3u);
  EXPECT_EQ(a.stats().reserved_bytes, 86 * MiB);
}

TEST(CachingAllocatorMerge, FreedNeighboursMergeIntoOneBlock) {
  auto a = make();
  auto x = a.allocate(KiB);
  auto y = a.allocate(KiB);
  a.allocate(KiB);
  a.free(x);
  a.free(y);
  // The merged 2 KiB block is a better fit than the segment's tail.
  EXPECT_EQ(a.allocate(2 * KiB), x);
}

TEST(CachingAllocatorMerge, FreeingTheMiddleBlockMergesBothSides) {
  auto a = make();
  auto x = a.allocate(5 * MiB);
  auto y = a.allocate(5 * MiB);
  auto z = a.allocate(5 * MiB);
  a.free(x);
  a.free(z);  // merges with the 5 MiB tail
  a.free(y);  // merges with both: one free 20 MiB block
  auto w = a.allocate(20 * MiB);
  EXPECT_EQ(w, x);
  EXPECT_EQ(a.block_size(w), 20 * MiB);
  EXPECT_EQ(a.stats().segments, 1u);
  a.free(w);
  a.empty_cache();  // the merged block is a whole segment again
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
}

// ---- empty_cache -----------------------------------------------------------

TEST(CachingAllocatorEmptyCache, ReleasesOnlyFullyFreeSegments) {
  auto a = make();
  auto small_live = a.allocate(KiB);
  auto small_free = a.allocate(KiB);
  auto large = a.allocate(30 * MiB);
  auto other = a.allocate(5 * MiB);
  a.free(small_free);  // its segment still holds small_live
  a.free(large);
  a.free(other);
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB + 30 * MiB + 20 * MiB);
  a.empty_cache();
  auto s = a.stats();
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
  EXPECT_EQ(s.segments, 1u);
  EXPECT_EQ(s.num_device_free, 2u);
  EXPECT_EQ(s.allocated_bytes, KiB);
  EXPECT_EQ(a.block_size(small_live), KiB);
  EXPECT_EQ(s.peak_reserved_bytes, 52 * MiB);
}

// ---- retry and out of memory -------------------------------------------------

TEST(CachingAllocatorRetry, ReleasingTheCacheMakesRoomForANewSegment) {
  auto a = make(40 * MiB);
  a.free(a.allocate(5 * MiB));  // 20 MiB cached
  // 30 MiB fits no cached block, and 20 + 30 > 40: release, then retry.
  auto p = a.allocate(30 * MiB);
  EXPECT_NE(p, 0u);
  auto s = a.stats();
  EXPECT_EQ(s.num_alloc_retries, 1u);
  EXPECT_EQ(s.num_ooms, 0u);
  EXPECT_EQ(s.reserved_bytes, 30 * MiB);
  EXPECT_EQ(s.segments, 1u);
  EXPECT_EQ(s.num_device_free, 1u);
  EXPECT_EQ(s.peak_reserved_bytes, 30 * MiB);
}

TEST(CachingAllocatorRetry, CacheOfAnotherStreamIsReleasedToServeThisOne) {
  auto a = make(20 * MiB);
  a.free(a.allocate(5 * MiB, /*stream=*/1));
  auto p = a.allocate(5 * MiB, /*stream=*/0);
  EXPECT_NE(p, 0u);
  EXPECT_EQ(a.stats().num_alloc_retries, 1u);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
}

TEST(CachingAllocatorOom, ThrowsWithPyTorchsMessage) {
  auto a = make(40 * MiB);
  a.allocate(25 * MiB);  // a 26 MiB segment, not split
  try {
    a.allocate(15 * MiB);  // needs a 16 MiB segment; 14 MiB are free
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_STREQ(e.what(),
                 "CUDA out of memory. Tried to allocate 16.00 MiB (GPU 0; 40.00 MiB total "
                 "capacity; 26.00 MiB already allocated; 14.00 MiB free; 26.00 MiB reserved in "
                 "total by PyTorch) If reserved memory is >> allocated memory try setting "
                 "max_split_size_mb to avoid fragmentation.");
    EXPECT_EQ(e.requested_bytes(), 15 * MiB);
  }
  auto s = a.stats();
  EXPECT_EQ(s.num_ooms, 1u);
  EXPECT_EQ(s.num_alloc_retries, 1u);
  EXPECT_EQ(s.reserved_bytes, 26 * MiB);
  EXPECT_EQ(s.active_blocks, 1u);
  // Still usable afterwards.
  a.allocate(13 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 40 * MiB);
}

TEST(CachingAllocatorOom, MessageInGiBNamesTheSegmentAndTheDevice) {
  CachingAllocator::Options o;
  o.capacity_bytes = 32 * GiB - 256 * MiB;  // 31.75 GiB
  o.device_name = "GPU 3";
  CachingAllocator a(o);
  a.allocate(28 * GiB);
  a.allocate(5 * MiB);      // keeps a 20 MiB segment partly in use
  a.free(a.allocate(MiB));  // a cached 2 MiB small segment, released by the retry
  EXPECT_THROW(
      {
        try {
          a.allocate(4 * GiB);
        } catch (const OutOfMemoryError& e) {
          EXPECT_STREQ(e.what(),
                       "CUDA out of memory. Tried to allocate 4.00 GiB (GPU 3; 31.75 GiB total "
                       "capacity; 28.00 GiB already allocated; 3.73 GiB free; 28.02 GiB reserved "
                       "in total by PyTorch) If reserved memory is >> allocated memory try "
                       "setting max_split_size_mb to avoid fragmentation.");
          throw;
        }
      },
      OutOfMemoryError);
  EXPECT_EQ(a.stats().num_device_free, 1u);
}

TEST(CachingAllocatorOom, OneToTenMiBRequestsTryToAllocate20MiB) {
  auto a = make(10 * MiB);
  try {
    a.allocate(3 * MiB);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("Tried to allocate 20.00 MiB (GPU 0; 10.00 MiB total "
                                         "capacity; 0 bytes already allocated; 10.00 MiB free; "
                                         "0 bytes reserved"),
              std::string::npos)
        << e.what();
  }
}

TEST(CachingAllocatorOom, AbsurdRequestIsOutOfMemoryNotAWrap) {
  auto a = make();
  EXPECT_THROW(a.allocate(CachingAllocator::kUnlimited - 3), OutOfMemoryError);
  EXPECT_EQ(a.stats().num_ooms, 1u);
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
}

TEST(CachingAllocatorFormat, SizesPrintLikePyTorch) {
  EXPECT_EQ(CachingAllocator::format_size(0), "0 bytes");
  EXPECT_EQ(CachingAllocator::format_size(1024), "1024 bytes");
  EXPECT_EQ(CachingAllocator::format_size(1025), "1.00 KiB");
  EXPECT_EQ(CachingAllocator::format_size(1536), "1.50 KiB");
  EXPECT_EQ(CachingAllocator::format_size(MiB), "1024.00 KiB");
  EXPECT_EQ(CachingAllocator::format_size(MiB + 1), "1.00 MiB");
  EXPECT_EQ(CachingAllocator::format_size(GiB), "1024.00 MiB");
  EXPECT_EQ(CachingAllocator::format_size(GiB + GiB / 2), "1.50 GiB");
  EXPECT_EQ(CachingAllocator::format_size(32 * GiB - 256 * MiB), "31.75 GiB");
}

// ---- stats -----------------------------------------------------------------

TEST(CachingAllocatorStats, PeaksFollowCurrentValuesUntilReset) {
  auto a = make();
  auto x = a.allocate(5 * MiB - 100);
  auto y = a.allocate(5 * MiB);
  a.free(x);
  a.free(y);
  auto s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.requested_bytes, 0u);
  EXPECT_EQ(s.peak_allocated_bytes, 10 * MiB);
  EXPECT_EQ(s.peak_requested_bytes, 10 * MiB - 100);
  EXPECT_EQ(s.peak_reserved_bytes, 20 * MiB);

  a.reset_peak_stats();
  s = a.stats();
  EXPECT_EQ(s.peak_allocated_bytes, 0u);
  EXPECT_EQ(s.peak_requested_bytes, 0u);
  EXPECT_EQ(s.peak_reserved_bytes, 20 * MiB);  // still reserved

  a.empty_cache();
  EXPECT_EQ(a.stats().peak_reserved_bytes, 20 * MiB);
  a.reset_peak_stats();
  EXPECT_EQ(a.stats().peak_reserved_bytes, 0u);
  EXPECT_EQ(a.stats().num_device_alloc, 1u);  // counters are not peaks
}

// ---- streams ---------------------------------------------------------------

TEST(CachingAllocatorStreams, BlockFreedOnOneStreamIsNotReusedByAnother) {
  auto a = make();
  auto p1 = a.allocate(KiB, /*stream=*/1);
  a.free(p1);
  auto p0 = a.allocate(KiB, /*stream=*/0);
  EXPECT_NE(p0, p1);
  EXPECT_EQ(a.stats().segments, 2u);
  EXPECT_EQ(a.stats().reserved_bytes, 4 * MiB);
  EXPECT_EQ(a.allocate(KiB, /*stream=*/1), p1);  // stream 1 still has its cache
  EXPECT_EQ(a.stats().segments, 2u);
}

TEST(CachingAllocatorStreams, SplitRestsKeepTheirSegmentsStream) {
  auto a = make();
  auto p = a.allocate(5 * MiB, /*stream=*/2);
  a.allocate(5 * MiB, /*stream=*/3);  // cannot use stream 2's 15 MiB rest
  EXPECT_EQ(a.stats().segments, 2u);
  EXPECT_EQ(a.allocate(5 * MiB, /*stream=*/2), p + 5 * MiB);
  EXPECT_EQ(a.stats().segments, 2u);
}

// ---- max_split_size --------------------------------------------------------

CachingAllocator make_split(std::uint64_t capacity, std::uint64_t max_split) {
  CachingAllocator::Options o;
  o.capacity_bytes = capacity;
  o.max_split_size_bytes = max_split;
  return CachingAllocator(o);
}

TEST(CachingAllocatorMaxSplit, OversizeBlocksAreNotSplit) {
  auto a = make_split(CachingAllocator::kUnlimited, 64 * MiB);
  auto p = a.allocate(100 * MiB);
  a.free(p);
  auto q = a.allocate(85 * MiB);  // wastes 15 MiB (< 20 MiB) of the cached block
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.block_size(q), 100 * MiB);
  EXPECT_EQ(a.stats().segments, 1u);
}

TEST(CachingAllocatorMaxSplit, OversizeBlocksServeNeitherSmallNorMuchSmallerRequests) {
  auto a = make_split(CachingAllocator::kUnlimited, 64 * MiB);
  a.free(a.allocate(100 * MiB));
  a.allocate(30 * MiB);  // below max_split: not from the oversize block
  a.allocate(70 * MiB);  // would waste 30 MiB of it
  EXPECT_EQ(a.stats().segments, 3u);
  EXPECT_EQ(a.stats().reserved_bytes, 200 * MiB);
}

TEST(CachingAllocatorMaxSplit, OversizeCacheIsReleasedBeforeTheFullRetry) {
  auto a = make_split(150 * MiB, 64 * MiB);
  a.free(a.allocate(100 * MiB));
  a.free(a.allocate(5 * MiB));  // a cached 20 MiB segment that should survive
  a.allocate(70 * MiB);         // 120 + 70 > 150: release the 100 MiB block only
  auto s = a.stats();
  EXPECT_EQ(s.num_alloc_retries, 0u);
  EXPECT_EQ(s.reserved_bytes, 90 * MiB);
  EXPECT_EQ(s.num_device_free, 1u);
}

TEST(CachingAllocatorMaxSplit, MustBeAbove20MiB) {
  EXPECT_THROW(make_split(GiB, 20 * MiB), InputError);
  EXPECT_NO_THROW(make_split(GiB, 21 * MiB));
}

// ---- misuse, size, threads -------------------------------------------------

TEST(CachingAllocatorMisuse, FreeOfUnknownOrFreedPointerThrows) {
  auto a = make();
  auto p = a.allocate(KiB);
  EXPECT_THROW(a.free(p + 512), std::invalid_argument);
  EXPECT_THROW(a.free(12345), std::invalid_argument);
  EXPECT_THROW(a.block_size(12345), std::invalid_argument);
  a.free(p);
  EXPECT_THROW(a.free(p), std::invalid_argument);
  EXPECT_EQ(a.stats().allocated_bytes, 0u);
}

TEST(CachingAllocatorFootprint, AnEmptyAllocatorIsSmall) {
  // 1,000 emulated devices live in one process.
  EXPECT_LE(sizeof(CachingAllocator), 512u);
}

TEST(CachingAllocatorThreads, ConcurrentAllocateAndFreeKeepTheBooks) {
  auto a = make();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      std::vector<CachingAllocator::Ptr> live;
      for (int i = 0; i < 2000; ++i) {
        live.push_back(a.allocate(static_cast<std::uint64_t>(1 + (i * 7919) % (3 * MiB)), t));
        if (i % 3 == 2) {
          a.free(live.front());
          live.erase(live.begin());
        }
      }
      for (auto p : live) a.free(p);
    });
  }
  for (auto& th : threads) th.join();
  auto s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.requested_bytes, 0u);
  EXPECT_EQ(s.active_blocks, 0u);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
  EXPECT_EQ(a.stats().segments, 0u);
}

// ---- snapshots -------------------------------------------------------------

// One "iteration": activations allocated in order, freed in reverse.
void iteration(CachingAllocator& a) {
  std::vector<CachingAllocator::Ptr> act;
  for (std::uint64_t b : {3 * MiB, 700 * KiB, 12 * MiB, std::uint64_t{100}, 5 * MiB}) act.push_back(a.allocate(b));
  for (auto q = act.rbegin(); q != act.rend(); ++q) a.free(*q);
}

TEST(CachingAllocatorSnapshot, AnIterationThatReturnsToItsStateIsAFixedPoint) {
  auto a = make();
  const auto weights = a.allocate(30 * MiB);
  iteration(a);
  const AllocatorSnapshot after_first = a.snapshot();
  iteration(a);
  EXPECT_EQ(a.snapshot(), after_first);
  EXPECT_EQ(a.snapshot().stats, a.stats());
  // Blocks in address order, the live one with its request.
  const auto& blocks = after_first.blocks;
  ASSERT_FALSE(blocks.empty());
  for (std::size_t i = 1; i < blocks.size(); ++i) EXPECT_LT(blocks[i - 1].address, blocks[i].address);
  EXPECT_EQ(blocks.front().address, weights);
  EXPECT_TRUE(blocks.front().live);
  EXPECT_TRUE(blocks.front().segment_start);
  EXPECT_EQ(blocks.front().requested, 30 * MiB);
}

TEST(CachingAllocatorSnapshot, AnyChangeOfStateShows) {
  auto a = make();
  iteration(a);
  const AllocatorSnapshot s0 = a.snapshot();
  const auto p = a.allocate(512);  // a new live block (and split)
  EXPECT_NE(a.snapshot(), s0);
  a.free(p);
  EXPECT_EQ(a.snapshot(), s0);  // merged back: same blocks, same counters
  a.reset_peak_stats();         // peaks fall to the current values
  EXPECT_NE(a.snapshot(), s0);
  const AllocatorSnapshot s1 = a.snapshot();
  a.empty_cache();  // segments released
  EXPECT_NE(a.snapshot(), s1);
  EXPECT_TRUE(a.snapshot().blocks.empty());
}

}  // namespace
}  // namespace gpemu
