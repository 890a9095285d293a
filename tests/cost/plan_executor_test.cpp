// The one executor of a memory plan (src/cost/plan_executor.h).
#include "cost/plan_executor.h"

#include <vector>

#include <gtest/gtest.h>

#include "gpemu/error.h"

namespace gpemu::zoo {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

// Slot 0 persistent; an iteration allocates slots 1 and 2 and frees them,
// with a second allocation of slot 1 and a second release of slot 1 that
// must change nothing.
ZooMemoryPlan small_plan() {
  ZooMemoryPlan p;
  // Sizes of 10 MiB and more: each block its own segment (no 20 MiB segments to split).
  p.slot_bytes = {16 * kMiB, 32 * kMiB, 64 * kMiB};
  p.slot_tensor = {-1, -1, -1};
  p.persistent = {0};
  p.steady_iteration = {{1, true, 0, Phase::Forward},   {2, true, 1, Phase::Forward},
                        {1, true, 1, Phase::Forward},   {2, false, 2, Phase::Backward},
                        {1, false, 2, Phase::Backward}, {1, false, 3, Phase::Optimizer}};
  p.first_iteration = p.steady_iteration;
  return p;
}

TEST(PlanExecutor, GivesEachSlotOneBlockAndBalancesAnIteration) {
  const ZooMemoryPlan plan = small_plan();
  CachingAllocator alloc(CachingAllocator::Options{});
  PlanSlots slots;
  int allocations = 0;
  allocate_persistent(alloc, plan, slots, [&] { ++allocations; });
  ASSERT_EQ(slots.size(), 3u);
  EXPECT_NE(slots[0], 0u);
  EXPECT_EQ(alloc.stats().allocated_bytes, 16 * kMiB);
  allocate_persistent(alloc, plan, slots);  // already there: nothing more
  EXPECT_EQ(alloc.stats().allocated_bytes, 16 * kMiB);

  std::vector<int> applied;
  const PlanHooks hooks{.applying = [&](const MemoryEvent& e) { applied.push_back(e.op); },
                        .allocated = [&] { ++allocations; }};
  for (int it = 0; it < 2; ++it) apply_events(alloc, plan, plan.steady_iteration, slots, hooks);
  EXPECT_EQ(allocations, 1 + 2 * 2);  // the persistent slot, then slots 1 and 2 each iteration
  EXPECT_EQ(applied.size(), 12u);     // every event is offered, the repeated ones change nothing
  EXPECT_EQ(alloc.stats().allocated_bytes, 16 * kMiB);
  EXPECT_EQ(alloc.stats().peak_allocated_bytes, 112 * kMiB);  // not 144: slot 1 holds one block
  EXPECT_EQ(slots[1], 0u);
  EXPECT_EQ(slots[2], 0u);
}

TEST(PlanExecutor, AppliesOnlyTheEventsTaken) {
  const ZooMemoryPlan plan = small_plan();
  CachingAllocator alloc(CachingAllocator::Options{});
  PlanSlots slots;
  apply_events(alloc, plan, plan.steady_iteration, slots,
               {.take = [](const MemoryEvent& e) { return e.phase == Phase::Forward; }});
  EXPECT_EQ(alloc.stats().allocated_bytes, 96 * kMiB);
  EXPECT_NE(slots[1], 0u);
  EXPECT_NE(slots[2], 0u);
  apply_events(alloc, plan, plan.steady_iteration, slots,
               {.take = [](const MemoryEvent& e) { return e.phase != Phase::Forward; }});
  EXPECT_EQ(alloc.stats().allocated_bytes, 0u);
}

TEST(PlanExecutor, OutOfMemoryComesFromTheEventBeingApplied) {
  const ZooMemoryPlan plan = small_plan();
  CachingAllocator::Options o;
  o.capacity_bytes = 64 * kMiB;  // slot 2 does not fit beside slot 1
  CachingAllocator alloc(o);
  PlanSlots slots;
  const MemoryEvent* at = nullptr;
  EXPECT_THROW(apply_events(alloc, plan, plan.steady_iteration, slots,
                            {.applying = [&](const MemoryEvent& e) { at = &e; }}),
               OutOfMemoryError);
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(at->slot, 2);
}

}  // namespace
}  // namespace gpemu::zoo
