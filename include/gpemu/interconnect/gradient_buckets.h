// Gradient bucketing as PyTorch DistributedDataParallel does it: gradients,
// in the order backward produces them, are grouped into buckets of about
// bucket_cap bytes (25 MiB by default; the first bucket 1 MiB, so
// communication starts early), and each bucket is all-reduced on a
// communication stream as soon as the backward kernels that produce its
// gradients have run, so communication overlaps the rest of backward.
//
// A training loop, per iteration and on every GPU's compute stream:
//
//   for each gradient g in backward order:
//     launch the backward kernel(s) producing g      (each rank's compute stream)
//     buckets.gradient_ready(g);
//   std::vector<Completion> done = buckets.finish();
//   launch the optimizer step                         (waits for `done` by stream order)
//
// gradient_ready records an event on each compute stream; the bucket's
// all-reduce waits for those events on the communication streams. Buckets are
// launched in order, as DDP does. finish() makes each compute stream wait for
// the communication stream (as DDP's end of backward does), so the optimizer
// step orders after the all-reduces without blocking the host, and returns
// each rank's last all-reduce completion. Then the next iteration may start.
//
// Thread safety: one host thread at a time, as the streams it uses.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gpemu/device/device.h"
#include "gpemu/interconnect/collectives.h"
#include "gpemu/timeline.h"

namespace gpemu {

struct GradientBucket {
  std::vector<int> gradients;  // gradient indices, in backward order
  std::uint64_t bytes = 0;
};

// PyTorch DDP's rule (steady state, after its first-iteration rebuild): walk
// the gradients in backward order adding each to the open bucket; when the
// bucket reaches its limit (>=) it closes, so a bucket may exceed its limit by
// its last gradient. The first bucket's limit is first_bucket_cap_bytes, every
// later one's bucket_cap_bytes. What remains forms the last bucket.
std::vector<GradientBucket> assign_buckets(std::span<const std::uint64_t> gradient_bytes,
                                           std::uint64_t first_bucket_cap_bytes, std::uint64_t bucket_cap_bytes);

struct BucketOptions {
  std::uint64_t bucket_cap_bytes = 25ull << 20;       // DDP bucket_cap_mb=25
  std::uint64_t first_bucket_cap_bytes = 1ull << 20;  // DDP's default first bucket
  CollectiveOptions collective;                       // name is set per bucket
};

class GradientBuckets {
 public:
  // compute_streams[r] and comm_streams[r] are streams of rank r's device.
  // gradient_bytes: per gradient (a parameter tensor, or a layer's gradients
  // together), in backward order. InputError for mismatched streams.
  GradientBuckets(Communicator& comm, std::vector<Stream*> compute_streams, std::vector<Stream*> comm_streams,
                  std::vector<std::uint64_t> gradient_bytes, BucketOptions options = {});
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  int gradient_count() const { return static_cast<int>(bucket_of_.size()); }
  int bucket_of(int gradient) const;

  // The kernels producing `gradient` have been issued on every compute
  // stream. Launches every bucket that is now complete and whose predecessors
  // have been launched. std::logic_error when called twice for one gradient
  // in an iteration; InputError for an unknown gradient.
  void gradient_ready(int gradient);

  // Ends the iteration (see top of file). std::logic_error if some gradient
  // was never reported ready.
  std::vector<Completion> finish();

  // Per-rank completions of a bucket's all-reduce in the current iteration
  // (or the last finished one); empty before the bucket was launched.
  const std::vector<Completion>& all_reduce_of(int bucket) const { return results_.at(bucket); }

 private:
  void launch(int bucket);

  Communicator* comm_;
  std::vector<Stream*> compute_;
  std::vector<Stream*> comm_streams_;
  BucketOptions options_;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<bool> ready_;
  std::vector<std::size_t> ready_count_;          // per bucket
  std::vector<std::vector<Event>> events_;        // [bucket][rank]: compute stream after its gradients
  std::vector<std::vector<Completion>> results_;  // [bucket][rank]
  int next_ = 0;                                  // next bucket to launch
};

}  // namespace gpemu
