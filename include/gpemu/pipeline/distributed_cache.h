// Caches that span the nodes of a job (several nodes, each with its own
// loaders, page cache and loader cache), for the modelled loader. Both keep
// a node's loader cache (LoaderModelOptions::cache_bytes, MinIO: admit until
// full, never evict) and add a directory of which node holds which sample:
//  - Partitioned: CoorDL's partitioned cache (Mohan et al., "Analyzing and
//    Mitigating Data Stalls in DNN Training", VLDB 2021, section 5.2), which
//    is also LADCache's regular mode (the authors' gpufs repository, branch
//    gus-ladcache-v2, --use-ladcache without --locality-aware). Each node
//    caches what it reads from storage; since a DistributedSampler gives
//    every sample to one node per epoch, the nodes' caches hold disjoint
//    shards. A sample that another node holds is read from that node's
//    memory over the network (a remote hit) instead of storage; a remote hit
//    is not cached again locally.
//  - LocalityAware: LADCache's locality-aware mode (--locality-aware): the
//    sampler gives each node the same partition of the dataset every epoch
//    (its epoch-0 shard, shuffled anew each epoch), so a node reads what it
//    cached itself and remote hits do not occur.
// A remote hit costs the reader's CPU per request (read_per_sample), then a
// request to the node's fetch server: `fetch`, a StorageDevice whose latency
// is a request's round trip and cache-server work, whose bandwidth is the
// NIC's payload rate and whose slots are the requests the cache servers
// answer at once. Under a symmetric load every node receives as much as it
// sends, so each node's ranks share one such server (shared_by).
// The directory records the epoch in which each sample was admitted and a
// lookup in epoch e sees only admissions from epochs before e: within an
// epoch no node reads a sample another node reads, so what a lookup may
// find was admitted in an earlier epoch and does not depend on the order in
// which the nodes' loaders were simulated.
// Thread safety: DistributedCache's methods may be called from many threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

#include "gpemu/pipeline/sampler.h"
#include "gpemu/pipeline/storage_model.h"

namespace gpemu::pipeline {

enum class DistributedCacheKind { None, Partitioned, LocalityAware };
std::string_view to_string(DistributedCacheKind k);  // "none", "partitioned", "locality-aware"
// Accepts "none", "partitioned" (also "coordl", "ladcache") and
// "locality-aware" (also "ladcache-locality"); InputError otherwise.
DistributedCacheKind parse_distributed_cache(std::string_view name);

class DistributedCache {
 public:
  // For a dataset of `samples` over `nodes` nodes; `fetch` as above (validated).
  DistributedCache(std::size_t samples, int nodes, DistributedCacheKind kind, StorageDevice fetch);
  // The directory alone: real nodes (real_distributed_cache.h), whose remote
  // reads cross a real network; fetch() is then an empty device.
  DistributedCache(std::size_t samples, int nodes, DistributedCacheKind kind);
  DistributedCacheKind kind() const { return kind_; }
  int nodes() const { return nodes_; }
  const StorageDevice& fetch() const { return fetch_; }
  // The node that admitted sample `index` in an epoch before `epoch`; -1: none.
  int holder(std::size_t index, std::uint64_t epoch) const;
  // Node `node` admitted sample `index` during `epoch` (the first admission stays).
  void admit(std::size_t index, int node, std::uint64_t epoch);

 private:
  DistributedCacheKind kind_;
  int nodes_;
  StorageDevice fetch_;
  mutable std::mutex mu_;
  std::vector<int> holder_;
  std::vector<std::uint64_t> admitted_in_;
};

// LocalityAware: the order a rank visits in `epoch`: its shard of epoch 0
// (sampler.indices(0)), shuffled by (seed, epoch) when the sampler shuffles.
std::vector<std::size_t> locality_aware_order(const Sampler& sampler, std::uint64_t epoch);

}  // namespace gpemu::pipeline
