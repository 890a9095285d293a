#include "gpemu/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "gpemu/error.h"

namespace gpemu::pipeline {
namespace {

TEST(Sampler, WithoutShuffleVisitsInDatasetOrder) {
  Sampler s(5, {});
  EXPECT_EQ(s.size(), 5u);
  EXPECT_EQ(s.indices(0), (std::vector<std::size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.indices(7), s.indices(0));
}

TEST(Sampler, SameSeedAndEpochGiveTheSamePermutation) {
  SamplerOptions o;
  o.shuffle = true;
  o.seed = 42;
  Sampler a(1000, o), b(1000, o);
  EXPECT_EQ(a.indices(3), b.indices(3));
  auto sorted = a.indices(3);
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::size_t> all(1000);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
}

TEST(Sampler, DifferentSeedsAndEpochsGiveDifferentPermutations) {
  SamplerOptions o;
  o.shuffle = true;
  o.seed = 1;
  Sampler a(1000, o);
  o.seed = 2;
  Sampler b(1000, o);
  EXPECT_NE(a.indices(0), b.indices(0));
  EXPECT_NE(a.indices(0), a.indices(1));
}

TEST(Sampler, ShardsCoverEverySampleExactlyOncePerEpochWhenDivisible) {
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::map<std::size_t, int> seen;
    for (int rank = 0; rank < 4; ++rank) {
      Sampler s(100, {true, 9, rank, 4, false});
      EXPECT_EQ(s.size(), 25u);
      for (auto i : s.indices(epoch)) ++seen[i];
    }
    ASSERT_EQ(seen.size(), 100u);
    for (const auto& [index, count] : seen) EXPECT_EQ(count, 1) << "sample " << index;
  }
}

TEST(Sampler, UnevenShardsArePaddedWithTheFirstEntriesOfThePermutation) {
  // 10 samples on 4 ranks: 3 each, 12 in all; the permutation's first 2 entries repeat.
  SamplerOptions o{true, 5, 0, 4, false};
  const auto whole = Sampler(10, {true, 5, 0, 1, false}).indices(0);
  std::map<std::size_t, int> seen;
  for (int rank = 0; rank < 4; ++rank) {
    o.rank = rank;
    Sampler s(10, o);
    const auto mine = s.indices(0);
    EXPECT_EQ(mine.size(), 3u);
    for (auto i : mine) ++seen[i];
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen[whole[0]], 2);
  EXPECT_EQ(seen[whole[1]], 2);
  EXPECT_EQ(seen[whole[2]], 1);
}

TEST(Sampler, DropUnevenCutsTheTail) {
  std::map<std::size_t, int> seen;
  for (int rank = 0; rank < 4; ++rank) {
    Sampler s(10, {false, 0, rank, 4, true});
    EXPECT_EQ(s.size(), 2u);
    for (auto i : s.indices(0)) ++seen[i];
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(seen.count(8), 0u);
  EXPECT_EQ(seen.count(9), 0u);
}

TEST(Sampler, PaddingRepeatsCyclicallyWhenRanksOutnumberSamples) {
  Sampler s(2, {false, 0, 4, 5, false});
  EXPECT_EQ(s.indices(0), (std::vector<std::size_t>{0}));  // list 0 1 0 1 0
}

TEST(Sampler, RejectsBadRank) {
  EXPECT_THROW(Sampler(10, {false, 0, 4, 4, false}), InputError);
  EXPECT_THROW(Sampler(10, {false, 0, 0, 0, false}), InputError);
}

}  // namespace
}  // namespace gpemu::pipeline
