#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "cost/plan_executor.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "workload/memory_plan.h"

namespace gpemu {

SyncMode parse_sync_mode(std::string_view s) {
  if (s == "iteration") return SyncMode::EveryIteration;
  if (s == "end") return SyncMode::AtEnd;
  throw InputError(
      fmt::format("unknown sync mode '{}': accepted 'iteration' (loss.item() every iteration) or 'end'", s));
}

std::string_view to_string(SyncMode m) { return m == SyncMode::EveryIteration ? "iteration" : "end"; }

namespace {

constexpr int kPersistentGroups = 3;    // weights, gradients, optimizer state
constexpr int kTensorsPerGroup = 60;    // parameter tensors of a mid-sized CNN
constexpr int kActivationTensors = 48;  // saved activations of a mid-sized CNN

void split(std::uint64_t total, int parts, std::vector<std::uint64_t>& out) {
  if (total == 0) return;
  const std::uint64_t each = std::max<std::uint64_t>(1, total / parts);
  std::uint64_t left = total;
  for (int i = 0; i < parts && left > 0; ++i) {
    const std::uint64_t n = (i == parts - 1) ? left : std::min(each, left);
    out.push_back(n);
    left -= n;
  }
}

// The even split as a plan for the one executor (cost/plan_executor.h): the
// persistent tensors, then each iteration the input and the activations in
// order, released in reverse.
zoo::ZooMemoryPlan even_split_plan(const MemoryPlan& even) {
  zoo::ZooMemoryPlan plan;
  const auto add_slot = [&](std::uint64_t bytes) {
    plan.slot_bytes.push_back(bytes);
    plan.slot_tensor.push_back(-1);
    return static_cast<int>(plan.slot_bytes.size()) - 1;
  };
  for (std::uint64_t t : even.persistent_tensors) plan.persistent.push_back(add_slot(t));
  std::vector<int> live{add_slot(even.input_bytes)};
  for (std::uint64_t t : even.activation_tensors) live.push_back(add_slot(t));
  for (int s : live) plan.steady_iteration.push_back(zoo::MemoryEvent{s, true});
  for (auto s = live.rbegin(); s != live.rend(); ++s) plan.steady_iteration.push_back(zoo::MemoryEvent{*s, false});
  plan.first_iteration = plan.steady_iteration;
  plan.input_bytes = even.input_bytes;
  return plan;
}

}  // namespace

MemoryPlan make_memory_plan(const StepCost& cost, int batch_size) {
  if (batch_size < 1) throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", batch_size));
  MemoryPlan plan;
  for (int g = 0; g < kPersistentGroups; ++g)
    split(cost.persistent_bytes / kPersistentGroups + (g == 0 ? cost.persistent_bytes % kPersistentGroups : 0),
          kTensorsPerGroup, plan.persistent_tensors);
  plan.input_bytes = cost.input_bytes_per_sample * static_cast<std::uint64_t>(batch_size);
  const std::uint64_t floor = cost.persistent_bytes + plan.input_bytes;
  const std::uint64_t activations = cost.peak_bytes > floor ? cost.peak_bytes - floor : 0;
  split(activations, kActivationTensors, plan.activation_tensors);
  return plan;
}

MemoryCheck check_memory(const StepCost& cost, int batch_size, std::uint64_t capacity_bytes) {
  MemoryCheck check;
  check.capacity_bytes = capacity_bytes;
  const zoo::ZooMemoryPlan plan = even_split_plan(make_memory_plan(cost, batch_size));
  CachingAllocator::Options o;
  o.capacity_bytes = capacity_bytes;
  CachingAllocator alloc(o);
  try {
    zoo::PlanSlots slots;
    zoo::allocate_persistent(alloc, plan, slots);
    for (int it = 0; it < 2; ++it) zoo::apply_events(alloc, plan, plan.steady_iteration, slots);
  } catch (const OutOfMemoryError& e) {
    check.fits = false;
    check.reason = e.what();
  }
  const AllocatorStats s = alloc.stats();
  check.peak_allocated_bytes = s.peak_allocated_bytes;
  check.peak_reserved_bytes = s.peak_reserved_bytes;
  if (check.fits && cost.oom_evidence_batch && batch_size >= *cost.oom_evidence_batch) {
    check.fits = false;
    check.reason =
        fmt::format("measured profile: batch size {} ran out of memory on the real card (first failing batch {})",
                    batch_size, *cost.oom_evidence_batch);
  }
  return check;
}

}  // namespace gpemu
