// GPU memory of a training iteration from the model zoo's traced tensor
// lifetimes (zoo.h), replayed through gpemu's emulation of PyTorch's caching
// allocator (caching_allocator.h). docs/zoo-memory.md has the rules and the
// measured error against GPEmu's memory tables.
//
// The replay (replay_memory):
//   1. parameters, buffers and other pre-existing non-input tensors are
//      allocated once, in tensor-id order;
//   2. iteration 0 ("cold", as a training loop's first step): the input batch
//      is allocated, then per op the tensors it creates and the tensors that
//      die after it; gradients are created by their backward op, optimizer
//      state (momentum, Adam moments) at its first use in the first step;
//   3. iterations 1.. ("steady"): as 2., with gradients and optimizer state
//      already there. With ReplayOptions::keep_grads (zero_grad() with
//      set_to_none=False, PyTorch < 2.0's default and how GPEmu measured)
//      a backward op's gradient output is a temporary that is accumulated
//      into the kept .grad and freed after the op; otherwise the grads are
//      created in backward and released at the iteration's end;
//   4. the input batch is released at each iteration's end.
// Peak allocated / reserved are the allocator's peaks over all iterations.
// ReplayOptions::until_steady replays until the allocator's state repeats and
// warm_start makes grads and optimizer state before iteration 0; oom_capacity()
// and oom_replay_options() decide whether a batch fits a catalogued card.
//
// Thread safety: free functions on immutable inputs; callable from any thread.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/cost/cost_model.h"
#include "gpemu/device/device.h"
#include "gpemu/zoo.h"

namespace gpemu::zoo {

struct ReplayOptions {
  Precision precision = Precision::FP32;
  Optimizer optimizer = Optimizer::SGD;
  // true: optimizer.zero_grad() keeps the .grad tensors (set_to_none=False;
  // PyTorch < 2.0 default; GPEmu's measurements). false: set_to_none=True
  // (PyTorch >= 2.0 default; what the zoo trace records).
  bool keep_grads = true;
  // PyTorch < 1.10 saved the *result* of in-place hardtanh_ (ReLU6(inplace=True))
  // for backward; from 1.10 on autograd saves a clone of its input (the zoo's
  // trace, torch 1.13). true drops those clones (GPEmu's V100/P100/M40 tables
  // were measured with the older PyTorch: docs/zoo-memory.md).
  bool legacy_inplace_hardtanh = false;
  // true: the training loop holds the model's output until the step ends
  // (`output = model(x); loss = criterion(output, y)` as imagenet's main.py
  // and GPEmu's profiler write it; the zoo's trace). false: only the loss is
  // kept (`F.cross_entropy(model(x), y)`, Hugging Face's `model(...).loss`):
  // a forward result that no backward op reads dies at its last forward use.
  bool keep_output = true;
  // Iterations replayed: the first is cold, the rest steady (>= 1).
  int iterations = 2;
  // After `iterations`, keep replaying steady iterations until one reserves
  // and releases no segment (the allocator's state then repeats, so every
  // later iteration is the same), at most `max_iterations` in all. The
  // allocator's layout can take several iterations to settle, and a later
  // iteration can need more memory than the first two: a batch fits a card
  // only if the settled iterations do (docs/zoo-memory.md).
  bool until_steady = false;
  int max_iterations = 16;
  // Gradients (with keep_grads) and optimizer state exist before iteration 0
  // and were made apart from this batch's activations: allocated right after
  // the parameters, and every iteration is a steady one. This is a process
  // that has already trained (GPEmu's profiler ran batch sizes 1, 2, ... in one
  // process, emptying the cache in between) or that restored its optimizer
  // from a checkpoint. false: iteration 0 creates them, as a fresh job does.
  // (until_steady and warm_start shape replay_memory and max_batch only;
  // zoo_memory_plan ignores them.)
  bool warm_start = false;
  // PyTorch's max_split_size_mb, in bytes (CachingAllocator::Options).
  std::uint64_t max_split_size_bytes = std::numeric_limits<std::uint64_t>::max();
};

// One allocation or release in a replay plan.
struct MemoryEvent {
  int slot = 0;       // index into ZooMemoryPlan::slot_bytes
  bool alloc = true;  // false: release
  // Op (index into ModelGraph::ops() with the same precision/optimizer) the
  // event belongs to: -1 at the iteration's start (input batch), ops.size()
  // at its end (input and set_to_none grads).
  int op = -1;
  Phase phase = Phase::Forward;  // phase of `op` (start: Forward, end: Optimizer)
};

// Per-tensor allocations of training iterations, for a workload to drive a
// device's allocator with (TrainingJob): allocate `persistent` once, run
// `first_iteration` for iteration 0 and `steady_iteration` for every later
// one, applying each event when its op's phase runs. Slots are storages
// (zoo tensors plus, with keep_grads, one temporary per gradient).
struct ZooMemoryPlan {
  std::vector<std::uint64_t> slot_bytes;  // exact storage bytes (the allocator rounds)
  std::vector<int> slot_tensor;           // slot -> index into ModelGraph::tensors() (-1: none)
  std::vector<int> persistent;            // slots allocated before iteration 0, in order
  std::vector<MemoryEvent> first_iteration;
  std::vector<MemoryEvent> steady_iteration;
  int op_count = 0;               // ModelGraph::ops().size()
  std::uint64_t input_bytes = 0;  // the batch's bytes (role "input")
};
ZooMemoryPlan zoo_memory_plan(const ModelGraph& model, Shape shape, const ReplayOptions& options = {});

// What a replay found.
struct MemoryReplay {
  bool fits = true;
  std::uint64_t capacity_bytes = 0;
  Shape shape;  // resolved (defaults filled in)
  // Allocated bytes live across iterations at the end of the replay (weights,
  // buffers, optimizer state, kept grads; not the input), allocator block sizes.
  std::uint64_t persistent_bytes = 0;
  std::uint64_t input_bytes = 0;  // the batch, exact bytes
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  int iterations_replayed = 0;  // with until_steady, how many it took
  int peak_iteration = -1;      // where allocated memory peaked
  int peak_op = -1;             // op index (see MemoryEvent::op)
  Phase peak_phase = Phase::Forward;
  // Out of memory: PyTorch's message and where it happened.
  std::string oom_message;
  int oom_iteration = -1, oom_op = -1;
  Phase oom_phase = Phase::Forward;
};

// Replays `options.iterations` iterations at `shape` through a fresh
// CachingAllocator of `capacity_bytes` (CachingAllocator::kUnlimited: no limit).
MemoryReplay replay_memory(const ModelGraph& model, Shape shape, std::uint64_t capacity_bytes,
                           const ReplayOptions& options = {});

// The largest batch size (at shape.seq_len) whose replay fits in
// `capacity_bytes`: exponential search, then binary search. 0 when batch 1
// does not fit; `limit` when everything up to it fits.
std::int64_t max_batch(std::uint64_t capacity_bytes, const ModelGraph& model, Shape shape,
                       const ReplayOptions& options = {}, std::int64_t limit = std::int64_t{1} << 20);

// ---- will a batch fit on a real card? ----------------------------------------

// The replay holds exactly the traced storages. A real run also allocates
// cuDNN convolution workspaces through the caching allocator and the
// segments they leave behind fragment it, so a real card runs out of memory
// when the replay still has some room. kDefaultWorkspaceMargin (device.h) is
// that extra, as a share of what the replay needs: a batch fits when the
// replay fits in (card memory - context) / (1 + margin); fitted on GPEmu's four
// measured cards and cross-checked leaving one card out (docs/zoo-memory.md,
// "Out-of-memory points").

// The capacity to replay with to decide whether a batch fits `gpu`: its
// reported total memory (GpuSpec::reported_memory) less the CUDA context
// (Device::default_context_reserve), divided by 1 + margin. margin >= 0.
std::uint64_t oom_capacity(const GpuSpec& gpu, double margin = kDefaultWorkspaceMargin);

// The replay options for that decision: `options` with until_steady set.
ReplayOptions oom_replay_options(ReplayOptions options);

// ---- cost-model integration ------------------------------------------------

// Fills a StepCost's memory figures from the zoo replay (unlimited capacity)
// when the model is in the zoo and the cost's memory is not measured
// (provenance Measured or Interpolated keep precedence): persistent_bytes,
// peak_bytes, peak_reserved_bytes, input_bytes_per_sample; memory_provenance
// Estimated; a sentence appended to the note. Returns whether it applied.
bool apply_zoo_memory(StepCost& cost, std::string_view model, int batch_size, const ReplayOptions& options = {},
                      std::int64_t seq_len = 0);

// A CostModel that forwards to `inner` and applies apply_zoo_memory() to
// every StepCost it returns. models() is inner's.
std::unique_ptr<CostModel> with_zoo_memory(std::unique_ptr<CostModel> inner, ReplayOptions options = {});

}  // namespace gpemu::zoo
