#include "interconnect/ddp_reducer.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {

// ---- DdpReducer -----------------------------------------------------------------

DdpReducer::DdpReducer(AllReduceGroup& comm, HostSync& sync, std::vector<Stream*> comm_streams,
                       std::vector<std::uint64_t> gradient_bytes, BucketOptions options)
    : comm_(comm),
      sync_(sync),
      comm_streams_(std::move(comm_streams)),
      gradient_bytes_(std::move(gradient_bytes)),
      options_(options) {
  const int n = comm.size();
  if (static_cast<int>(comm_streams_.size()) != n || sync.ranks() != n)
    throw InputError(fmt::format("DDP over {} GPUs given {} communication streams and {} host threads", n,
                                 comm_streams_.size(), sync.ranks()));
  for (int r = 0; r < n; ++r)
    if (!comm_streams_[r] || &comm_streams_[r]->device() != &comm.device(r))
      throw InputError(fmt::format("DDP: communication stream of rank {} is not on its GPU", r));
  if (gradient_bytes_.empty()) throw InputError("DDP needs at least one gradient");
  buckets_ = assign_buckets(gradient_bytes_, options_.first_bucket_cap_bytes, options_.bucket_cap_bytes);
  bucket_of_.assign(gradient_bytes_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (int g : buckets_[b].gradients) bucket_of_[g] = static_cast<int>(b);
    names_.push_back(fmt::format("all_reduce bucket {}", b));
  }
}

DdpReducer::Iteration& DdpReducer::state(std::int64_t iteration) {
  auto [it, fresh] = iterations_.try_emplace(iteration);
  if (fresh) {
    const int n = comm_.size();
    it->second.count.assign(buckets_.size(), std::vector<int>(n, 0));
    it->second.complete.assign(buckets_.size(), 0);
    it->second.last.assign(buckets_.size(), std::vector<Completion>(n));
    it->second.reported.assign(gradient_bytes_.size(), std::vector<bool>(n, false));
  }
  return it->second;
}

void DdpReducer::gradient_ready(int rank, std::int64_t iteration, int gradient, const Completion& ready) {
  if (gradient < 0 || gradient >= static_cast<int>(gradient_bytes_.size()))
    throw InputError(fmt::format("gradient {}: DDP holds gradients 0 to {}", gradient, gradient_bytes_.size() - 1));
  {
    std::lock_guard lock(sync_.mutex());
    Iteration& it = state(iteration);
    if (it.reported[gradient][rank])
      throw std::logic_error(
          fmt::format("GPU {} reported gradient {} of iteration {} twice", rank, gradient, iteration));
    it.reported[gradient][rank] = true;
    const int b = bucket_of_[gradient];
    if (++it.count[b][rank] == static_cast<int>(buckets_[b].gradients.size())) ++it.complete[b];
    it.last[b][rank] = ready;  // stream order: the latest report covers the bucket's earlier gradients
    // Peers wait (finish) only for launches: wake them only then, not on
    // every report (waking every rank on each of every rank's reports was
    // quadratic in GPUs).
    if (!launch_ready(it)) return;
  }
  sync_.notify_all();
}

bool DdpReducer::launch_ready(Iteration& it) {
  const int n = comm_.size();
  bool any = false;
  while (it.launched < static_cast<int>(buckets_.size())) {
    const int b = it.launched;
    if (it.complete[b] != n) return any;
    any = true;
    // Each rank's part starts after the point where the rank's backward
    // produced the bucket's gradients (and after its stream's earlier work).
    CollectiveOptions o = options_.collective;
    o.name = names_[b];
    comm_.all_reduce(comm_streams_, buckets_[b].bytes, o, it.last[b]);
    ++it.launched;
    ++launched_total_;
  }
  return any;
}

Completion DdpReducer::finish(int rank, std::int64_t iteration) {
  {
    std::lock_guard lock(sync_.mutex());
    Iteration& it = state(iteration);
    for (std::size_t g = 0; g < it.reported.size(); ++g)
      if (!it.reported[g][rank])
        throw std::logic_error(
            fmt::format("GPU {} ended backward of iteration {} without gradient {}", rank, iteration, g));
  }
  const int buckets = static_cast<int>(buckets_.size());
  sync_.wait_until(rank, [&] { return iterations_.at(iteration).launched == buckets; });
  std::lock_guard lock(sync_.mutex());
  Iteration& it = iterations_.at(iteration);
  const Completion tail = comm_streams_[rank]->tail();
  if (++it.finished == comm_.size()) iterations_.erase(iteration);
  return tail;
}

std::uint64_t DdpReducer::all_reduces() const {
  std::lock_guard lock(sync_.mutex());
  return launched_total_;
}

}  // namespace gpemu
