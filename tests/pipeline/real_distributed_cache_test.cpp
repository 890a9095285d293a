// The distributed cache across real nodes, the loader's side: two nodes'
// real loaders in one process, whose links trade the admission lists through
// a board and fetch from the other's loader cache (the CLI binds them to TCP:
// tests/cli/cli_real_nodes_test.cpp). What each reads follows the directory's
// rule with every read method, and a peer that cannot be asked stops the run.
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "pipeline/io_uring_reader.h"
#include "support/temp_dir.h"

namespace gpemu::pipeline {
namespace {

using namespace std::chrono_literals;

// 32 files of bytes, file i of 100 + 7i bytes, each byte i.
struct Files {
  testing::TempDir dir;
  Dataset data;
  Files() {
    data.root = dir.path().string();
    for (int i = 0; i < 32; ++i) {
      const std::string path = (dir / ("f" + std::to_string(i))).string();
      std::ofstream(path) << std::string(static_cast<std::size_t>(100 + 7 * i), static_cast<char>(i));
      data.samples.push_back({path, 0, static_cast<std::uint64_t>(100 + 7 * i)});
    }
  }
};

// The two nodes' side of the links: lists traded per round, and each node's cache to fetch from.
struct Board {
  const Dataset* data = nullptr;
  std::shared_ptr<LoaderCache> caches[2];
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::uint64_t, std::map<int, std::vector<std::uint64_t>>> lists;
  bool holders_answer = true;  // false: every node says it does not hold what is asked
  bool holders_gone = false;   // true: asking throws, as a node that went away does

  RealCacheLinks links(int node) {
    RealCacheLinks l;
    l.node = node;
    l.nodes = 2;
    l.timeout = 5s;
    l.exchange = [this, node](std::uint64_t round, const std::vector<std::uint64_t>& mine) {
      std::unique_lock lock(mu);
      lists[round][node] = mine;
      cv.notify_all();
      cv.wait(lock, [&] { return lists[round].size() == 2; });
      return std::vector<std::vector<std::uint64_t>>{lists[round][0], lists[round][1]};
    };
    l.fetch = [this](int other, std::uint64_t index, std::vector<std::byte>& out) {
      if (holders_gone) throw Error("rank " + std::to_string(other) + " went away");
      const Sample& s = data->samples[index];
      const auto held = caches[other]->peek(s.path, s.offset);
      if (!holders_answer || !held) return false;
      out.assign(held->begin(), held->end());
      return true;
    };
    return l;
  }
};

LoaderOptions options(int node, ReadMethod method, std::size_t superbatch) {
  LoaderOptions o;
  o.batch_size = 4;
  o.num_workers = 2;
  o.decode_images = false;
  o.shuffle = true;
  o.seed = 11;
  o.rank = node;
  o.world_size = 2;
  o.read_method = method;
  o.superbatch = superbatch;
  o.on_error = OnError::Skip;  // a sample that cannot be read is dropped; a peer that cannot be asked is not
  return o;
}

// Both nodes' loaders, `epochs` epochs each in a thread of its own; each
// delivered sample's bytes are checked. Returns each node's per-epoch figures.
std::vector<LoaderStats> run(Files& f, Board& board, DistributedCacheKind kind, ReadMethod method,
                             std::size_t superbatch = 1, int epochs = 3) {
  board.data = &f.data;
  std::vector<LoaderStats> stats(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> nodes;
  for (int n = 0; n < 2; ++n) {
    board.caches[n] = std::make_shared<LoaderCache>(1 << 20);
    nodes.emplace_back([&, n] {
      try {
        LoaderOptions o = options(n, method, superbatch);
        o.cache = board.caches[n];
        o.distributed_cache = std::make_shared<RealDistributedCache>(kind, f.data.size(), 1, board.links(n));
        DataLoader loader(f.data, o);
        for (int e = 0; e < epochs; ++e) {
          loader.begin_epoch(static_cast<std::uint64_t>(e));
          while (auto b = loader.next())
            for (std::size_t k = 0; k < b->size(); ++k) {
              const std::size_t i = b->sample_indices[k];
              const auto bytes = b->bytes().subspan(b->byte_offsets[k], b->byte_offsets[k + 1] - b->byte_offsets[k]);
              EXPECT_EQ(bytes.size(), f.data.samples[i].length);
              for (std::byte c : bytes) ASSERT_EQ(static_cast<int>(c), static_cast<int>(i));
            }
        }
        stats[static_cast<std::size_t>(n)] = loader.stats();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(n)] = e.what();
        std::lock_guard lock(board.mu);  // let the other node's trade go on
        for (auto& [round, by_node] : board.lists) by_node.try_emplace(n);
        board.lists[0].try_emplace(n);
        board.cv.notify_all();
      }
    });
  }
  for (auto& t : nodes) t.join();
  if (!errors[0].empty() || !errors[1].empty()) throw Error(errors[0] + " | " + errors[1]);
  return stats;
}

std::vector<std::size_t> shard(const Dataset& d, int node, std::uint64_t epoch) {
  return Sampler(d.size(), sampler_options(options(node, ReadMethod::Pread, 1))).indices(epoch);
}

void expect_partitioned(const Files& f, const std::vector<LoaderStats>& stats) {
  for (int n = 0; n < 2; ++n) {
    const auto& epochs = stats[static_cast<std::size_t>(n)].epochs;
    ASSERT_EQ(epochs.size(), 3u);
    const std::vector<std::size_t> first = shard(f.data, n, 0);
    const std::set<std::size_t> mine(first.begin(), first.end());
    std::uint64_t all_remote = 0;
    for (std::uint64_t e = 0; e < 3; ++e) {
      std::uint64_t local = 0, remote = 0, remote_bytes = 0, storage = 0;
      for (std::size_t i : shard(f.data, n, e)) {
        if (e == 0) {
          ++storage;
        } else if (mine.count(i) != 0) {
          ++local;
        } else {
          ++remote;
          remote_bytes += f.data.samples[i].length;
        }
      }
      all_remote += remote;
      EXPECT_EQ(epochs[e].epoch, e);
      EXPECT_EQ(epochs[e].cache_hits, local) << "node " << n << " epoch " << e;
      EXPECT_EQ(epochs[e].remote_hits, remote) << "node " << n << " epoch " << e;
      EXPECT_EQ(epochs[e].network_bytes, remote_bytes) << "node " << n << " epoch " << e;
      EXPECT_EQ(epochs[e].storage_requests, storage) << "node " << n << " epoch " << e;
    }
    EXPECT_GT(all_remote, 0u);
    EXPECT_EQ(stats[static_cast<std::size_t>(n)].remote_hits, all_remote);
  }
}

TEST(RealDistributedCache, PartitionedReadsWhatTheOtherNodeCachedWithPread) {
  Files f;
  Board board;
  expect_partitioned(f, run(f, board, DistributedCacheKind::Partitioned, ReadMethod::Pread));
}

TEST(RealDistributedCache, PartitionedReadsWhatTheOtherNodeCachedWithIoUringAndSuperbatches) {
  if (!io_uring_support().available) GTEST_SKIP() << io_uring_support().message();
  Files f;
  Board one, two;
  expect_partitioned(f, run(f, one, DistributedCacheKind::Partitioned, ReadMethod::IoUring));
  expect_partitioned(f, run(f, two, DistributedCacheKind::Partitioned, ReadMethod::IoUring, 2));
}

TEST(RealDistributedCache, LocalityAwareReadsOnlyItsOwnShard) {
  Files f;
  Board board;
  const auto stats = run(f, board, DistributedCacheKind::LocalityAware, ReadMethod::Pread);
  for (const LoaderStats& s : stats) {
    ASSERT_EQ(s.epochs.size(), 3u);
    EXPECT_EQ(s.epochs[0].storage_requests, 16u);
    for (std::size_t e = 1; e < 3; ++e) {
      EXPECT_EQ(s.epochs[e].cache_hits, 16u);
      EXPECT_EQ(s.epochs[e].storage_requests, 0u);
    }
    EXPECT_EQ(s.remote_hits, 0u);
  }
}

// A holder that answers "not held" sends the reader to storage; one that
// cannot be asked stops the run, even when bad samples are skipped.
TEST(RealDistributedCache, NotHeldFallsBackToStorageAndAGonePeerStopsTheRun) {
  Files f;
  Board refusing;
  refusing.holders_answer = false;
  const auto stats = run(f, refusing, DistributedCacheKind::Partitioned, ReadMethod::Pread, 1, 2);
  for (int n = 0; n < 2; ++n) {
    const std::vector<std::size_t> first = shard(f.data, n, 0), second = shard(f.data, n, 1);
    const std::set<std::size_t> mine(first.begin(), first.end());
    std::uint64_t elsewhere = 0;
    for (std::size_t i : second) elsewhere += mine.count(i) == 0;
    EXPECT_EQ(stats[static_cast<std::size_t>(n)].epochs[1].remote_hits, 0u);
    EXPECT_EQ(stats[static_cast<std::size_t>(n)].epochs[1].storage_requests, elsewhere);
  }
  Board gone;
  gone.holders_gone = true;
  std::string error;
  try {
    run(f, gone, DistributedCacheKind::Partitioned, ReadMethod::Pread, 1, 2);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("went away"), std::string::npos) << error;
  EXPECT_EQ(error.find("data loader: sample"), std::string::npos) << error;  // not a sample's error
}

TEST(RealDistributedCache, ALoaderWhoseNodeMatesDoNotComeTimesOut) {
  Files f;
  Board board;
  RealCacheLinks l = board.links(0);
  l.timeout = 50ms;
  RealDistributedCache dc(DistributedCacheKind::Partitioned, f.data.size(), 2, l);
  std::string error;
  try {
    dc.begin_epoch(0);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("node 0: its other GPUs' loaders did not begin epoch 1 within 0.05 s"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace gpemu::pipeline
