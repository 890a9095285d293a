// Data-parallel training pieces: how backward is split so that gradient
// all-reduce can overlap it, and a DDP reducer driven by one host thread per
// GPU.
//
// BackwardPlan. The cost model gives one "backward" figure per iteration
// (GPEmu's definition: loss + zero_grad + backward + optimizer step). For DDP
// it is split into backward chunks, each producing some gradients, and the
// optimizer step:
//  - with the model's zoo graph (include/gpemu/zoo.h): one chunk per point
//    at which parameter gradients become ready (ParamGrad::grad_ready_op),
//    each chunk taking the share of the backward work of the ops up to that
//    point, the optimizer step the share of the optimizer ops; an op's work is
//    its roofline time on this GPU (max of FLOPs / peak FP32 and bytes /
//    memory bandwidth, at least 2 us for a kernel). Gradients are the
//    parameter tensors, in the order backward produces them, with their real
//    sizes. More than max_chunks ready points are merged into max_chunks
//    chunks of about equal work.
//  - without a zoo graph: `even_chunks` chunks of equal time and equal
//    gradient bytes (4 bytes per parameter), and an optimizer step of
//    20 bytes of memory traffic per parameter (SGD with momentum: read weight,
//    gradient and momentum, write weight and momentum) over memory bandwidth
//    plus 1 ms of per-tensor kernel launches, at most a quarter of backward.
//
// DdpReducer. PyTorch DDP's buckets (interconnect/gradient_buckets.h,
// assign_buckets) with one host thread per rank: each rank reports when its
// compute stream has produced a gradient; when every rank has reported every
// gradient of a bucket (and the buckets before it are launched, DDP launches
// them in order), the reporting thread (the last to arrive) issues that
// bucket's ring all-reduce on every rank's communication stream, after the
// rank's reported point. finish() is the end of DDP's backward: the rank's
// host thread waits until all of the iteration's buckets have been issued
// (the host-side analogue of NCCL's receiver waiting for its peers) and gets
// its communication stream's tail, which the optimizer step must wait for.
//
// Thread safety: DdpReducer is called from the ranks' host threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/interconnect/collectives.h"
#include "gpemu/interconnect/gradient_buckets.h"
#include "gpemu/interconnect/topology.h"
#include "gpemu/train/host_sync.h"

namespace gpemu::train {

struct BackwardChunk {
  double share = 0;               // of the backward figure (chunks + optimizer_share = 1)
  std::vector<int> gradients;     // gradient ids ready after this chunk
};

struct BackwardPlan {
  std::vector<BackwardChunk> chunks;
  double optimizer_share = 0;
  std::vector<std::uint64_t> gradient_bytes;  // per gradient id, in backward order
  std::string source;                          // how the split was made, for people
};

// See the top of the file. InputError for even_chunks < 1 or max_chunks < 1.
BackwardPlan plan_backward(const GpuSpec& gpu, std::string_view model, const StepCost& cost, int batch_size,
                           int even_chunks = 16, int max_chunks = 64);

// Splits a sampled backward duration by the plan: one duration per chunk,
// then the optimizer step's (the last element). They sum to `backward` exactly.
std::vector<Duration> split_backward(const BackwardPlan& plan, Duration backward);

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
    std::vector<std::vector<int>> count;       // [bucket][rank]: gradients reported
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

}  // namespace gpemu::train
