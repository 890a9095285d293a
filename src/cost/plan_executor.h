// The one executor of a memory plan (ZooMemoryPlan, cost/zoo_memory.h): it
// applies a plan's allocations and releases to a caching allocator, slot by
// slot. replay_memory runs whole iterations through it on an allocator of its
// own (predict's and the cost model's figures); the job runs each phase's
// events through it on its device's allocator as it issues the phase; and
// check_memory runs the even split of a model outside the zoo through it, as
// a plan too (even_split_plan, src/workload/memory_plan.cpp).
//
// Thread safety: none of its own; the allocator is locked by itself.
#pragma once

#include <functional>
#include <vector>

#include "gpemu/cost/zoo_memory.h"
#include "gpemu/device/caching_allocator.h"

namespace gpemu::zoo {

// Where each plan slot's storage lives in one allocator (0: not allocated).
using PlanSlots = std::vector<CachingAllocator::Ptr>;

struct PlanHooks {
  // Which of the events to apply now (a phase's); empty: all of them.
  std::function<bool(const MemoryEvent&)> take;
  // Called before an event is applied (an OutOfMemoryError comes from the
  // last one it was called with) and after each allocation succeeded.
  std::function<void(const MemoryEvent&)> applying;
  std::function<void()> allocated;
};

// Allocates the plan's persistent slots, in order (slots grow to the plan's).
void allocate_persistent(CachingAllocator& alloc, const ZooMemoryPlan& plan, PlanSlots& slots,
                         const std::function<void()>& allocated = {});

// Applies `events` in order (those hooks.take accepts): an allocation gives
// its slot a block unless it has one, a release frees the slot's block unless
// it has none. OutOfMemoryError from the allocator is not caught.
void apply_events(CachingAllocator& alloc, const ZooMemoryPlan& plan, const std::vector<MemoryEvent>& events,
                  PlanSlots& slots, const PlanHooks& hooks = {});

}  // namespace gpemu::zoo
