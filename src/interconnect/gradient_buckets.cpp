#include "gpemu/interconnect.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpemu/error.h"

namespace gpemu {

std::vector<GradientBucket> assign_buckets(std::span<const std::uint64_t> gradient_bytes,
                                           std::uint64_t first_bucket_cap_bytes, std::uint64_t bucket_cap_bytes) {
  std::vector<GradientBucket> buckets;
  GradientBucket open;
  std::uint64_t limit = first_bucket_cap_bytes;
  for (std::size_t g = 0; g < gradient_bytes.size(); ++g) {
    open.gradients.push_back(static_cast<int>(g));
    open.bytes += gradient_bytes[g];
    if (open.bytes >= limit) {
      buckets.push_back(std::move(open));
      open = GradientBucket{};
      limit = bucket_cap_bytes;
    }
  }
  if (!open.gradients.empty()) buckets.push_back(std::move(open));
  return buckets;
}

GradientBuckets::GradientBuckets(Communicator& comm, std::vector<Stream*> compute_streams,
                                 std::vector<Stream*> comm_streams, std::vector<std::uint64_t> gradient_bytes,
                                 BucketOptions options)
    : comm_(&comm), compute_(std::move(compute_streams)), comm_streams_(std::move(comm_streams)), options_(options) {
  const int n = comm.size();
  auto check = [&](const std::vector<Stream*>& streams, std::string_view what) {
    if (static_cast<int>(streams.size()) != n)
      throw InputError(fmt::format("gradient buckets over {} GPUs given {} {} streams: give one per GPU, in rank order",
                                   n, streams.size(), what));
    for (int r = 0; r < n; ++r) {
      const Device& expected = comm.node().device(comm.gpus()[r]);
      if (!streams[r] || &streams[r]->device() != &expected)
        throw InputError(fmt::format("gradient buckets: {} stream for rank {} is not a stream of GPU {}", what, r,
                                     expected.index()));
    }
  };
  check(compute_, "compute");
  check(comm_streams_, "communication");

  buckets_ = assign_buckets(gradient_bytes, options_.first_bucket_cap_bytes, options_.bucket_cap_bytes);
  bucket_of_.assign(gradient_bytes.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (int g : buckets_[b].gradients) bucket_of_[g] = static_cast<int>(b);
  ready_.assign(gradient_bytes.size(), false);
  ready_count_.assign(buckets_.size(), 0);
  events_.assign(buckets_.size(), std::vector<Event>(n));
  results_.assign(buckets_.size(), {});
}

int GradientBuckets::bucket_of(int gradient) const {
  if (gradient < 0 || gradient >= static_cast<int>(bucket_of_.size()))
    throw InputError(fmt::format("gradient {}: the buckets hold gradients 0 to {}", gradient,
                                 static_cast<int>(bucket_of_.size()) - 1));
  return bucket_of_[gradient];
}

void GradientBuckets::gradient_ready(int gradient) {
  const int b = bucket_of(gradient);
  if (ready_[gradient])
    throw std::logic_error(fmt::format("gradient_ready({}) called twice in one iteration", gradient));
  ready_[gradient] = true;
  // The stream is FIFO, so the event recorded for a bucket's last ready
  // gradient covers all of the bucket's gradients.
  for (std::size_t r = 0; r < compute_.size(); ++r) compute_[r]->record(events_[b][r]);
  ++ready_count_[b];
  while (next_ < static_cast<int>(buckets_.size()) && ready_count_[next_] == buckets_[next_].gradients.size())
    launch(next_++);
}

void GradientBuckets::launch(int bucket) {
  for (std::size_t r = 0; r < comm_streams_.size(); ++r) comm_streams_[r]->wait(events_[bucket][r]);
  const std::string name = fmt::format("all_reduce bucket {}", bucket);
  CollectiveOptions o = options_.collective;
  o.name = name;
  results_[bucket] = comm_->all_reduce(comm_streams_, buckets_[bucket].bytes, o);
}

std::vector<Completion> GradientBuckets::finish() {
  if (next_ < static_cast<int>(buckets_.size())) {
    std::vector<int> missing;
    for (std::size_t g = 0; g < ready_.size(); ++g)
      if (!ready_[g]) missing.push_back(static_cast<int>(g));
    throw std::logic_error(
        fmt::format("GradientBuckets::finish(): gradients {} were never reported ready", fmt::join(missing, ", ")));
  }
  std::vector<Completion> done(compute_.size());
  for (std::size_t r = 0; r < compute_.size(); ++r) {
    if (buckets_.empty()) {
      done[r] = compute_[r]->tail();
      continue;
    }
    // The communication stream is FIFO: its last all-reduce ends after all the others.
    done[r] = results_.back()[r];
    Event all_reduced;
    comm_streams_[r]->record(all_reduced);
    compute_[r]->wait(all_reduced);
  }
  ready_.assign(ready_.size(), false);
  ready_count_.assign(ready_count_.size(), 0);
  next_ = 0;
  return done;
}

}  // namespace gpemu
