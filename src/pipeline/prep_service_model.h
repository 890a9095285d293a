// The remote side of a preprocessing service for the modelled loader
// (include/gpemu/prep_service.h has the model): the workers' batches and the
// client's NIC, computed in batch order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpemu/prep_service.h"
#include "gpemu/time.h"

namespace gpemu::pipeline {

class PrepServiceModel {
 public:
  explicit PrepServiceModel(PrepServiceOptions options);  // validated
  const PrepServiceOptions& options() const { return o_; }
  void begin_epoch(Time start, std::size_t batches);
  // Whether the client's or the service's quota of this epoch has batches left.
  bool local_left() const { return local_taken_ < local_quota_; }
  bool remote_left() const { return remote_.size() < remote_quota_; }
  void take_local() { ++local_taken_; }
  // When batch `batch`, made by the service, would be in the client's
  // memory: its prefix costs `prefix_cpu` of one core's time and produces
  // `bytes`; `delivered` holds the loader's delivery times of the batches
  // before it. With `take`, the service makes it (called in batch order).
  Time arrival(std::size_t batch, Duration prefix_cpu, std::uint64_t bytes, const std::vector<Time>& delivered,
               bool take);
  // A client core's time to take in `bytes`.
  Duration receive_cpu(std::uint64_t bytes) const;
  std::uint64_t remote_batches() const { return remote_batches_; }

 private:
  PrepServiceOptions o_;
  Time epoch_start_ = 0;
  std::vector<std::size_t> remote_;  // this epoch's remote batches, in order
  std::size_t local_quota_ = 0, remote_quota_ = 0, local_taken_ = 0;
  std::vector<Time> worker_free_;
  Time nic_free_ = 0;
  std::uint64_t remote_batches_ = 0;
};

}  // namespace gpemu::pipeline
