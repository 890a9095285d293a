// The directory of the distributed cache across real nodes, and the trade of
// admissions that keeps it the same on every node (real_distributed_cache.h).
#include "gpemu/pipeline/real_distributed_cache.h"

#include <fmt/format.h>

namespace gpemu::pipeline {

RealDistributedCache::RealDistributedCache(DistributedCacheKind kind, std::size_t samples, int loaders,
                                           RealCacheLinks links)
    : links_(std::move(links)), loaders_(loaders), directory_(samples, links_.nodes, kind) {
  if (loaders < 1 || links_.node < 0 || links_.node >= links_.nodes || !links_.exchange || !links_.fetch)
    throw std::logic_error("RealDistributedCache: no loaders, a node out of range, or no links");
}

void RealDistributedCache::begin_epoch(std::uint64_t epoch) {
  std::unique_lock lock(mu_);
  if (error_) std::rethrow_exception(error_);
  if (known_ > epoch) return;
  if (++arrived_ < loaders_) {
    if (!cv_.wait_for(lock, links_.timeout, [&] { return known_ > epoch || error_; }))
      throw Error(fmt::format("node {}: its other GPUs' loaders did not begin epoch {} within {} s", links_.node,
                              epoch + 1, static_cast<double>(links_.timeout.count()) / 1000.0));
    if (error_) std::rethrow_exception(error_);
    return;
  }
  // The last of the node's loaders: the node's admissions of the epoch before, for the others'.
  arrived_ = 0;
  std::vector<std::uint64_t> mine;
  mine.swap(pending_);
  lock.unlock();
  try {
    if (epoch > 0) {
      const std::vector<std::vector<std::uint64_t>> all = links_.exchange(epoch - 1, mine);
      for (std::size_t n = 0; n < all.size(); ++n)
        for (const std::uint64_t index : all[n]) directory_.admit(index, static_cast<int>(n), epoch - 1);
    }
  } catch (...) {
    lock.lock();
    error_ = std::current_exception();
    cv_.notify_all();
    throw;
  }
  lock.lock();
  known_ = epoch + 1;
  cv_.notify_all();
}

int RealDistributedCache::remote_holder(std::size_t index, std::uint64_t epoch) const {
  const int n = directory_.holder(index, epoch);
  return n == links_.node ? -1 : n;
}

bool RealDistributedCache::fetch(int node, std::size_t index, std::vector<std::byte>& out) {
  try {
    return links_.fetch(node, index, out);
  } catch (const PeerCacheError&) {
    throw;
  } catch (const std::exception& e) {
    throw PeerCacheError(e.what());
  }
}

void RealDistributedCache::admitted(std::size_t index) {
  std::lock_guard lock(mu_);
  pending_.push_back(index);
}

}  // namespace gpemu::pipeline
