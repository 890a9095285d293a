// Workloads: a deep-learning training job expressed as operations on an
// emulated device, with the host blocking where a real PyTorch loop blocks.
//
// One iteration, as `for x, y in loader: x = x.to(dev); loss = model(x);
// loss.backward(); opt.step(); loss.item()` does it:
//   1. the input batch is allocated on the GPU and copied host-to-device
//      (from pinned memory: asynchronous; from pageable: the host waits),
//   2. forward: activations are allocated, the forward kernel runs,
//   3. backward + optimizer step (GPEmu's "backward" phase): the backward
//      kernel runs, activations and the input are freed,
//   4. with SyncMode::EveryIteration the host reads the loss back
//      (a 4-byte D2H copy it waits for), as loss.item() does.
// Memory goes through the device's caching allocator, so a batch that does
// not fit raises OutOfMemoryError at the same step as on the card.
//
// Thread safety: a TrainingJob is driven by one host thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpemu/cost_model.h"
#include "gpemu/device.h"

namespace gpemu {

enum class SyncMode {
  EveryIteration,  // loss.item() each iteration
  AtEnd,           // only torch.cuda.synchronize() at the end
};
// "iteration" or "end"; InputError otherwise.
SyncMode parse_sync_mode(std::string_view s);
std::string_view to_string(SyncMode m);

// The allocations one training iteration makes, derived from a StepCost.
// Persistent state (weights, gradients, optimizer state) is allocated as
// per-tensor blocks once; each iteration allocates the input batch and the
// activations layer by layer during forward and frees them in reverse during
// backward. Until per-model tensor graphs exist (the model zoo), tensors are
// split evenly: docs/workload.md.
struct MemoryPlan {
  std::vector<std::uint64_t> persistent_tensors;
  std::uint64_t input_bytes = 0;
  std::vector<std::uint64_t> activation_tensors;  // allocation order
};
MemoryPlan make_memory_plan(const StepCost& cost, int batch_size);

struct MemoryCheck {
  bool fits = true;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::string reason;  // why it does not fit: the OOM message, or the measured evidence
};
// Replays two iterations of the plan through a fresh caching allocator of the
// device's capacity (no timing). A batch at or beyond measured OOM evidence
// does not fit, whatever the replay says.
MemoryCheck check_memory(const StepCost& cost, int batch_size, std::uint64_t capacity_bytes);

struct TrainingOptions {
  std::string model = std::string(kDefaultModel);
  int batch_size = 64;
  int iterations = 300;
  HostMemoryKind host_memory = HostMemoryKind::Pinned;
  SyncMode sync = SyncMode::EveryIteration;
  VariationOptions variation;  // cv is replaced by the profile's measured cv when it has one
};

struct IterationTiming {
  Time start = 0;    // host issued the copy
  Time h2d_end = 0;
  Time forward_end = 0;
  Time backward_end = 0;
};

struct TrainingResult {
  int iterations = 0;
  std::int64_t samples = 0;
  Duration elapsed = 0;  // emulated time from the first issue to the last completion
  double iterations_per_s = 0;
  double samples_per_s = 0;
  double gpu_busy_pct = 0;  // compute engine busy / elapsed
  Duration forward_total = 0, backward_total = 0, h2d_total = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  StepCost cost;  // the mean costs used
};

class TrainingJob {
 public:
  // Allocates the persistent state on the device (throws OutOfMemoryError
  // when even that does not fit) and prepares the per-iteration samplers.
  TrainingJob(Device& device, const CostModel& costs, TrainingOptions options);
  ~TrainingJob();
  TrainingJob(const TrainingJob&) = delete;
  TrainingJob& operator=(const TrainingJob&) = delete;

  const StepCost& cost() const { return cost_; }
  const TrainingOptions& options() const { return options_; }

  // One iteration whose input batch is ready in host memory now. Throws
  // OutOfMemoryError when its allocations do not fit.
  IterationTiming step();
  // `iterations` steps, then waits for the device; on_iteration(i) after each.
  TrainingResult run(const std::function<void(int)>& on_iteration = {});
  // Summary of the iterations so far (waits for the device).
  TrainingResult summarize();

 private:
  Device& device_;
  TrainingOptions options_;
  StepCost cost_;
  MemoryPlan plan_;
  Variation forward_noise_, backward_noise_;
  std::vector<CachingAllocator::Ptr> persistent_;
  std::int64_t iteration_ = 0;
  Time first_issue_ = -1;
  Duration forward_total_ = 0, backward_total_ = 0, h2d_total_ = 0;
};

}  // namespace gpemu
