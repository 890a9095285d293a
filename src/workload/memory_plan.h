// The even split: a model outside the model zoo gets its persistent and
// activation memory from the cost model's figures, split into tensors
// (check_memory, job/memory_check.h, and the job's devices use it).
#pragma once

#include <cstdint>
#include <vector>

#include "gpemu/cost/cost_model.h"

namespace gpemu {

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

}  // namespace gpemu
