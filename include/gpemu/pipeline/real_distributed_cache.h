// The distributed cache across real nodes (one process per node, each with
// its real loader and loader cache): what the loaders of one node share of
// it. The transport is given (RealCacheLinks: src/dist's cache peers over
// TCP, through the CLI); this part keeps the directory of which node holds
// which sample, with the modelled cache's rule (distributed_cache.h): a
// sample that node n admitted in an epoch before e is asked of node n in
// epoch e. So that every node sees the same directory, the nodes trade the
// lists of what they admitted when an epoch begins: the node's loaders wait
// for each other there (each calls begin_epoch), then the last to come
// trades the node's list of the epoch before for the others' (the first
// admission stays; of one epoch's, the lowest node's).
//
// Thread safety: every method may be called from many threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "gpemu/error.h"
#include "gpemu/pipeline/distributed_cache.h"

namespace gpemu::pipeline {

// A remote read that failed because the node asked went away or broke its
// protocol: the run's error, not a sample's (OnError::Skip does not drop it).
class PeerCacheError : public Error {
 public:
  using Error::Error;
};

struct RealCacheLinks {
  int node = 0, nodes = 1;  // this node, and how many there are
  // Every node's admissions of `round` (the round-th epoch; this node's are
  // `mine`), indexed by node. Throws an Error naming a node that went away.
  std::function<std::vector<std::vector<std::uint64_t>>(std::uint64_t round, const std::vector<std::uint64_t>& mine)>
      exchange;
  // Sample `index`'s bytes from node `node`'s cache into `out`: false when it
  // answers that it does not hold it. Throws an Error naming the node when it
  // cannot be asked.
  std::function<bool(int node, std::uint64_t index, std::vector<std::byte>& out)> fetch;
  // How long a loader waits for the node's other loaders to begin an epoch.
  std::chrono::milliseconds timeout{30'000};
};

class RealDistributedCache {
 public:
  // For a dataset of `samples`, shared by the node's `loaders` loaders.
  RealDistributedCache(DistributedCacheKind kind, std::size_t samples, int loaders, RealCacheLinks links);
  DistributedCacheKind kind() const { return directory_.kind(); }
  int node() const { return links_.node; }
  int nodes() const { return links_.nodes; }

  // A loader begins its epoch `epoch` (0-based: the epochs it began before);
  // returns once the directory for it is known. Error when the trade fails
  // (naming the node that went away), or when the node's other loaders do
  // not come within the timeout.
  void begin_epoch(std::uint64_t epoch);
  // The other node that holds sample `index` in `epoch`; -1: none does.
  int remote_holder(std::size_t index, std::uint64_t epoch) const;
  // Its bytes from that node (RealCacheLinks::fetch); PeerCacheError when it
  // cannot be asked.
  bool fetch(int node, std::size_t index, std::vector<std::byte>& out);
  // This node's loader cache admitted sample `index` in the epoch under way.
  void admitted(std::size_t index);

 private:
  RealCacheLinks links_;
  int loaders_;
  DistributedCache directory_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t known_ = 0;  // epochs whose directory is known
  std::exception_ptr error_;
  std::vector<std::uint64_t> pending_;  // admitted in the epoch under way
};

}  // namespace gpemu::pipeline
