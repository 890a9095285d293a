#include "gpemu/pipeline.h"

#include <algorithm>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "common/random.h"
#include "gpemu/error.h"

namespace gpemu::pipeline {

SamplerOptions sampler_options(const LoaderOptions& o) {
  return SamplerOptions{o.shuffle, o.seed, o.rank, o.world_size, o.drop_uneven_shards, o.group_size};
}

std::vector<std::size_t> epoch_order(const Sampler& sampler, const Dataset& dataset, const LoaderOptions& o,
                                     std::uint64_t epoch) {
  std::vector<std::size_t> order = sampler.indices(epoch);
  if (o.shuffle && dataset.page_size > 0) order = quasi_random_order(order, dataset, o.batch_size, o.seed, epoch);
  return order;
}

Sampler::Sampler(std::size_t dataset_size, SamplerOptions options) : dataset_size_(dataset_size), options_(options) {
  if (options_.world_size < 1) {
    throw InputError("sampler: world_size " + std::to_string(options_.world_size) + " is not allowed; it must be >= 1");
  }
  if (options_.rank < 0 || options_.rank >= options_.world_size) {
    throw InputError("sampler: rank " + std::to_string(options_.rank) +
                     " is outside [0, world_size=" + std::to_string(options_.world_size) + ")");
  }
  if (options_.group_size < 1) throw InputError("sampler: a group size of 0 is impossible; it must be >= 1");
  const std::size_t k = options_.group_size;
  const auto w = static_cast<std::size_t>(options_.world_size);
  if (k > 1 && w > 1 && dataset_size_ % k != 0)
    throw InputError(fmt::format(
        "sampler: {} samples in groups of {} leave a partial group, which {} ranks cannot share evenly; give a "
        "group size that divides the dataset, or one rank",
        dataset_size_, k, w));
  items_ = (dataset_size_ + k - 1) / k;
  const std::size_t items_per_rank = options_.drop_uneven ? items_ / w : (items_ + w - 1) / w;
  // One rank takes every group once, the partial one too.
  per_rank_ = k > 1 && w == 1 ? dataset_size_ : items_per_rank * k;
}

std::vector<std::size_t> Sampler::indices(std::uint64_t epoch) const {
  std::vector<std::size_t> order(items_);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (options_.shuffle && order.size() > 1) {
    common::Rng rng(common::mix_seed(options_.seed, epoch));
    for (std::size_t i = order.size() - 1; i > 0; --i) {
      std::swap(order[i], order[rng.below(i + 1)]);
    }
  }
  const auto w = static_cast<std::size_t>(options_.world_size);
  const std::size_t k = options_.group_size;
  const std::size_t items_per_rank = k > 1 && w == 1 ? items_ : per_rank_ / k;
  const std::size_t total = items_per_rank * w;
  if (total > order.size() && !order.empty()) {
    // Pad by repeating the list's own first entries, as DistributedSampler does.
    const std::size_t n = order.size();
    for (std::size_t i = 0; order.size() < total; ++i) order.push_back(order[i % n]);
  }
  order.resize(total);
  std::vector<std::size_t> mine;
  mine.reserve(per_rank_);
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < total; i += w) {
    if (k == 1) {
      mine.push_back(order[i]);
      continue;
    }
    const std::size_t first = order[i] * k;
    for (std::size_t j = first; j < std::min(first + k, dataset_size_); ++j) mine.push_back(j);
  }
  return mine;
}

}  // namespace gpemu::pipeline
