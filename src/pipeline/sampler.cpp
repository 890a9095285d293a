#include "gpemu/pipeline.h"

#include <numeric>
#include <string>

#include "common/random.h"
#include "gpemu/error.h"

namespace gpemu::pipeline {

Sampler::Sampler(std::size_t dataset_size, SamplerOptions options) : dataset_size_(dataset_size), options_(options) {
  if (options_.world_size < 1) {
    throw InputError("sampler: world_size " + std::to_string(options_.world_size) + " is not allowed; it must be >= 1");
  }
  if (options_.rank < 0 || options_.rank >= options_.world_size) {
    throw InputError("sampler: rank " + std::to_string(options_.rank) +
                     " is outside [0, world_size=" + std::to_string(options_.world_size) + ")");
  }
  const auto w = static_cast<std::size_t>(options_.world_size);
  per_rank_ = options_.drop_uneven ? dataset_size_ / w : (dataset_size_ + w - 1) / w;
}

std::vector<std::size_t> Sampler::indices(std::uint64_t epoch) const {
  std::vector<std::size_t> order(dataset_size_);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (options_.shuffle && order.size() > 1) {
    common::Rng rng(common::mix_seed(options_.seed, epoch));
    for (std::size_t i = order.size() - 1; i > 0; --i) {
      std::swap(order[i], order[rng.below(i + 1)]);
    }
  }
  const auto w = static_cast<std::size_t>(options_.world_size);
  const std::size_t total = per_rank_ * w;
  if (total > order.size() && !order.empty()) {
    // Pad by repeating the list's own first entries, as DistributedSampler does.
    const std::size_t n = order.size();
    for (std::size_t i = 0; order.size() < total; ++i) order.push_back(order[i % n]);
  }
  order.resize(total);
  std::vector<std::size_t> mine;
  mine.reserve(per_rank_);
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < total; i += w) mine.push_back(order[i]);
  return mine;
}

}  // namespace gpemu::pipeline
