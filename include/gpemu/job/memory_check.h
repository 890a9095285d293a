// Will a batch fit, for a model outside the model zoo: the cost model's
// figures split evenly into tensors (src/workload/memory_plan.h) and replayed
// through a caching allocator. A model in the zoo is replayed from its traced
// tensor lifetimes instead (cost_model.h, "zoo memory").
//
// Thread safety: free functions on values.
#pragma once

#include <cstdint>
#include <string>

#include "gpemu/cost/cost_model.h"

namespace gpemu {

struct MemoryCheck {
  bool fits = true;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::string reason;  // why it does not fit: the OOM message, or the measured evidence
};

// Replays two iterations of the even split through a fresh caching allocator of the
// device's capacity (no timing). A batch at or beyond measured OOM evidence
// does not fit, whatever the replay says.
MemoryCheck check_memory(const StepCost& cost, int batch_size, std::uint64_t capacity_bytes);

}  // namespace gpemu
