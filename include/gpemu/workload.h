// Pieces of a training step shared by the job (job.h) and predict: when the
// host waits for the GPU, and the even-split memory plan used for models that
// are not in the model zoo.
//
// Thread safety: free functions on values.
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

}  // namespace gpemu
