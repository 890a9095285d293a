// The directory of a cache spanning several nodes (CoorDL's partitioned
// cache, LADCache's regular and locality-aware modes) and the locality-aware
// sampling order. How the modelled loader uses them: pipeline.h,
// "distributed cache"; docs/pipeline.md, "Several nodes".
#include <fmt/format.h>

#include "common/random.h"
#include "gpemu/error.h"
#include "gpemu/pipeline.h"

namespace gpemu::pipeline {

std::string_view to_string(DistributedCacheKind k) {
  switch (k) {
    case DistributedCacheKind::None: return "none";
    case DistributedCacheKind::Partitioned: return "partitioned";
    case DistributedCacheKind::LocalityAware: return "locality-aware";
  }
  return "?";
}

DistributedCacheKind parse_distributed_cache(std::string_view name) {
  if (name == "none") return DistributedCacheKind::None;
  if (name == "partitioned" || name == "coordl" || name == "ladcache") return DistributedCacheKind::Partitioned;
  if (name == "locality-aware" || name == "ladcache-locality") return DistributedCacheKind::LocalityAware;
  throw InputError(fmt::format(
      "distributed cache '{}': accepted none, partitioned (CoorDL's partitioned cache, LADCache's regular mode; also "
      "'coordl', 'ladcache') and locality-aware (LADCache's locality-aware mode; also 'ladcache-locality')",
      name));
}

DistributedCache::DistributedCache(std::size_t samples, int nodes, DistributedCacheKind kind, StorageDevice fetch)
    : DistributedCache(samples, nodes, kind) {
  fetch_ = std::move(fetch);
  validate(fetch_);
}

DistributedCache::DistributedCache(std::size_t samples, int nodes, DistributedCacheKind kind)
    : kind_(kind), nodes_(nodes), holder_(samples, -1), admitted_in_(samples, 0) {
  if (nodes < 1) throw InputError(fmt::format("distributed cache: {} nodes is impossible: give 1 or more", nodes));
  if (kind == DistributedCacheKind::None)
    throw InputError("distributed cache: kind 'none' has no directory; give partitioned or locality-aware");
}

int DistributedCache::holder(std::size_t index, std::uint64_t epoch) const {
  std::lock_guard lock(mu_);
  if (index >= holder_.size() || holder_[index] < 0 || admitted_in_[index] >= epoch) return -1;
  return holder_[index];
}

void DistributedCache::admit(std::size_t index, int node, std::uint64_t epoch) {
  std::lock_guard lock(mu_);
  if (index >= holder_.size() || holder_[index] >= 0) return;
  holder_[index] = node;
  admitted_in_[index] = epoch;
}

std::vector<std::size_t> locality_aware_order(const Sampler& sampler, std::uint64_t epoch) {
  std::vector<std::size_t> order = sampler.indices(0);
  const SamplerOptions& o = sampler.options();
  if (o.shuffle && epoch > 0 && order.size() > 1) {
    // A stream of its own (the rank in the seed), so ranks shuffle their shards independently.
    common::Rng rng(common::mix_seed(common::mix_seed(o.seed, epoch), static_cast<std::uint64_t>(o.rank) + 1));
    for (std::size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  }
  return order;
}

}  // namespace gpemu::pipeline
