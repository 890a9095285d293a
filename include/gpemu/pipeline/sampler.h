// The order in which a loader visits samples, with torch.utils.data's
// RandomSampler/SequentialSampler and DistributedSampler semantics.
//
// Shuffle: each epoch's permutation is a pure function of (seed, epoch), the
// same on every platform (PyTorch's DistributedSampler uses seed + epoch the
// same way, with a different generator, so the permutations differ from
// PyTorch's).
//
// Sharding across world_size ranks, as DistributedSampler:
//  - drop_uneven == false (DistributedSampler's drop_last=False, the default):
//    the epoch's index list is padded to ceil(N / world_size) * world_size
//    entries by repeating its own first entries (cyclically, if the padding is
//    longer than the list), then rank r takes entries r, r + world_size, ...
//    Every rank gets the same count; every sample is visited exactly once per
//    epoch across ranks when N is divisible by world_size, otherwise the first
//    (N mod world_size ? world_size - N mod world_size : 0) entries of the
//    permutation are visited twice.
//  - drop_uneven == true: the list is cut to floor(N / world_size) *
//    world_size entries; the last N mod world_size entries of the permutation
//    are not visited that epoch.
//
// Groups (group_size k > 1, a grouped dataset: samples i*k .. i*k + k - 1 are
// one file): the permutation, padding and sharding above apply to the
// ceil(N / k) groups, and each group is expanded to its samples in file
// order, so a worker reads a group's samples one after another (GPEmu's file
// grouping). With world_size > 1 every group must be whole (N mod k == 0,
// InputError otherwise): a partial group would give ranks unequal counts.
// Thread safety: immutable after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpemu::pipeline {

struct SamplerOptions {
  bool shuffle = false;
  std::uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  bool drop_uneven = false;
  std::size_t group_size = 1;
};

class Sampler {
 public:
  // InputError when world_size < 1 or rank is outside [0, world_size).
  Sampler(std::size_t dataset_size, SamplerOptions options);

  // Samples this rank visits per epoch.
  std::size_t size() const { return per_rank_; }
  // Dataset indices this rank visits in `epoch`, in visiting order.
  std::vector<std::size_t> indices(std::uint64_t epoch) const;
  const SamplerOptions& options() const { return options_; }

 private:
  std::size_t dataset_size_;
  SamplerOptions options_;
  std::size_t per_rank_;
  std::size_t items_;  // what is permuted: samples, or groups
};

}  // namespace gpemu::pipeline
