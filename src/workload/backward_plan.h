// How backward is split so that a gradient all-reduce can overlap it.
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
// The DDP reducer that consumes the plan is interconnect/ddp_reducer.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/interconnect.h"

namespace gpemu {

struct BackwardChunk {
  double share = 0;            // of the backward figure (chunks + optimizer_share = 1)
  std::vector<int> gradients;  // gradient ids ready after this chunk
};

struct BackwardPlan {
  std::vector<BackwardChunk> chunks;
  double optimizer_share = 0;
  std::vector<std::uint64_t> gradient_bytes;  // per gradient id, in backward order
  std::string source;                         // how the split was made, for people
};

// See the top of the file. InputError for even_chunks < 1 or max_chunks < 1.
BackwardPlan plan_backward(const GpuSpec& gpu, std::string_view model, const StepCost& cost, int batch_size,
                           int even_chunks = 16, int max_chunks = 64);

// Splits a sampled backward duration by the plan: one duration per chunk,
// then the optimizer step's (the last element). They sum to `backward` exactly.
std::vector<Duration> split_backward(const BackwardPlan& plan, Duration backward);

// Where the plan's chunks must stay apart for DDP: after each chunk that
// completes a bucket (holds the last gradient, in backward order, of one of
// `buckets`), and after the last chunk. Returns those chunk ends (exclusive
// indices, increasing). The chunks between two ends run back to back on one
// stream and start no all-reduce, so a job issues each run as one kernel of
// their summed time: every end time, and so every bucket's ready point, is
// the same, with far fewer emulated operations (docs/workload.md).
std::vector<std::size_t> bucket_chunk_ends(const BackwardPlan& plan, std::span<const GradientBucket> buckets);

}  // namespace gpemu
