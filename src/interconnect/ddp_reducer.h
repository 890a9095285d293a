// PyTorch DDP's gradient reducer, driven by one host thread per rank.
//
// DDP's buckets (interconnect/gradient_buckets.h, assign_buckets): each rank
// reports when its compute stream has produced a gradient; when every rank
// has reported every gradient of a bucket (and the buckets before it are
// launched, DDP launches them in order), the reporting thread (the last to
// arrive) issues that bucket's ring all-reduce on every rank's communication
// stream, after the rank's reported point. finish() is the end of DDP's
// backward: the rank's host thread waits until all of the iteration's buckets
// have been issued (the host-side analogue of NCCL's receiver waiting for its
// peers) and gets its communication stream's tail, which the optimizer step
// must wait for.
//
// Thread safety: DdpReducer is called from the ranks' host threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "clock/host_sync.h"
#include "gpemu/interconnect.h"

namespace gpemu {

class DdpReducer {
 public:
  // comm_streams[r]: rank r's communication stream (non-blocking, as
  // PyTorch's NCCL streams). Ranks are the communicator's.
  DdpReducer(AllReduceGroup& comm, HostSync& sync, std::vector<Stream*> comm_streams,
             std::vector<std::uint64_t> gradient_bytes, BucketOptions options = {});
  DdpReducer(const DdpReducer&) = delete;
  DdpReducer& operator=(const DdpReducer&) = delete;

  const std::vector<GradientBucket>& buckets() const { return buckets_; }

  // Rank's gradient `gradient` of `iteration` is produced by the work on its
  // compute stream up to `ready` (the stream's tail after the kernel).
  // std::logic_error when reported twice.
  void gradient_ready(int rank, std::int64_t iteration, int gradient, const Completion& ready);
  // See the top of the file. std::logic_error if the rank has not reported
  // every gradient; PeerFailed if another rank failed.
  Completion finish(int rank, std::int64_t iteration);

  std::uint64_t all_reduces() const;  // buckets launched so far

 private:
  struct Iteration {
    std::vector<std::vector<int>> count;        // [bucket][rank]: gradients reported
    std::vector<int> complete;                  // [bucket]: ranks that reported all of its gradients
    std::vector<std::vector<Completion>> last;  // [bucket][rank]: latest reported point
    std::vector<std::vector<bool>> reported;    // [gradient][rank]
    int launched = 0;
    int finished = 0;
  };
  Iteration& state(std::int64_t iteration);
  // Launches what became ready; returns whether it launched anything.
  bool launch_ready(Iteration& it);

  AllReduceGroup& comm_;
  HostSync& sync_;
  std::vector<Stream*> comm_streams_;
  std::vector<std::uint64_t> gradient_bytes_;
  BucketOptions options_;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<std::string> names_;
  std::map<std::int64_t, Iteration> iterations_;
  std::uint64_t launched_total_ = 0;
};

}  // namespace gpemu
