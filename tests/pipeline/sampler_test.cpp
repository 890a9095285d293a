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

TEST(Sampler, GroupsAreShuffledAndShardedWholeInFileOrder) {
  SamplerOptions o;
  o.shuffle = true;
  o.seed = 3;
  o.group_size = 4;
  const Sampler one(10, o);  // groups {0-3}, {4-7}, {8, 9}
  EXPECT_EQ(one.size(), 10u);
  for (std::uint64_t epoch = 0; epoch < 4; ++epoch) {
    const std::vector<std::size_t> order = one.indices(epoch);
    ASSERT_EQ(order.size(), 10u);
    std::vector<std::size_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::size_t> all(10);
    std::iota(all.begin(), all.end(), std::size_t{0});
    EXPECT_EQ(sorted, all);
    // Each group's samples come together and in file order.
    for (std::size_t i = 0; i < order.size(); ++i) {
      const bool starts_group = order[i] % 4 == 0;
      if (!starts_group) {
        EXPECT_EQ(order[i], order[i - 1] + 1) << "epoch " << epoch << " position " << i;
      }
    }
  }
  EXPECT_NE(one.indices(0), one.indices(1));  // the groups' order changes with the epoch

  o.world_size = 2;
  o.rank = 1;
  const Sampler half(16, o);  // 4 groups, 2 per rank
  EXPECT_EQ(half.size(), 8u);
  const std::vector<std::size_t> mine = half.indices(0);
  EXPECT_EQ(mine.size(), 8u);
  EXPECT_EQ(mine[0] % 4, 0u);
  EXPECT_EQ(mine[4] % 4, 0u);
  o.rank = 0;
  std::vector<std::size_t> both = Sampler(16, o).indices(0);
  both.insert(both.end(), mine.begin(), mine.end());
  std::sort(both.begin(), both.end());
  EXPECT_EQ(std::adjacent_find(both.begin(), both.end()), both.end());  // disjoint shards
  EXPECT_EQ(both.size(), 16u);
  try {
    Sampler(10, o);  // a partial group cannot be shared by two ranks
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("partial group"), std::string::npos) << e.what();
  }
  o.group_size = 0;
  EXPECT_THROW(Sampler(10, o), InputError);
}

TEST(Sampler, GroupedDatasetsPackSamplesInOrder) {
  Dataset d;
  d.root = "virtual:five";
  for (std::uint64_t b : {10, 20, 30, 40, 50}) {
    Sample s;
    s.path = "virtual:five/x";
    s.length = b;
    s.label = static_cast<std::int64_t>(b);
    d.samples.push_back(s);
  }
  const Dataset g = grouped(d, 2);
  ASSERT_EQ(g.size(), 5u);
  EXPECT_EQ(g.samples[0].path, "virtual:five/group-0");
  EXPECT_EQ(g.samples[1].path, "virtual:five/group-0");
  EXPECT_EQ(g.samples[1].offset, 10u);
  EXPECT_EQ(g.samples[2].path, "virtual:five/group-1");
  EXPECT_EQ(g.samples[2].offset, 0u);
  EXPECT_EQ(g.samples[3].offset, 30u);
  EXPECT_EQ(g.samples[4].path, "virtual:five/group-2");
  EXPECT_EQ(g.samples[4].label, 50);
  EXPECT_EQ(g.total_bytes(), d.total_bytes());
  EXPECT_EQ(grouped(d, 1).samples[3].path, "virtual:five/x");
  EXPECT_THROW(grouped(d, 0), InputError);
}

}  // namespace
}  // namespace gpemu::pipeline
