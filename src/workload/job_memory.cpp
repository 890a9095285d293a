// A rank's device memory under the job's plan: a batch size's cost and
// memory plan (made once for all ranks), the persistent state allocated
// before the first step, and everything given back when the rank leaves its
// GPU. The per-step events are applied by the step loop (step_loop.cpp).
#include "cost/plan_executor.h"
#include "workload/job_impl.h"

namespace gpemu {

using job_detail::StepMemory;

const std::pair<StepCost, StepMemory>& Job::Plan::batch(int n, const CostModel& costs, const JobSpec& spec,
                                                        const StepCost& full) {
  std::lock_guard lock(per_batch_mu);
  auto found = per_batch.find(n);
  if (found != per_batch.end()) return found->second;
  StepCost c = n == spec.batch_size ? full : costs.step_cost(*spec.cluster.gpu, spec.compute.model.name, n);
  if (const Duration d = spec.compute.time_divisor; d > 1) {
    // GPEmu's "N GPUs": each batch's time divided by N (ComputeSpec::time_divisor).
    c.forward /= d;
    c.backward /= d;
    if (c.transfer_pinned) *c.transfer_pinned /= d;
    if (c.transfer_pageable) *c.transfer_pageable /= d;
  }
  StepMemory m;
  if (graph) {
    m.zoo = true;
    m.plan = zoo::zoo_memory_plan(*graph, zoo::Shape{n, spec.compute.model.seq_len}, replay);
  } else {
    m.even = make_memory_plan(c, n);
  }
  return per_batch.emplace(n, std::make_pair(std::move(c), std::move(m))).first->second;
}

void Job::Rank::release_all() {
  current.reset();
  if (!device) return;
  CachingAllocator& a = device->allocator();
  for (auto q = live.rbegin(); q != live.rend(); ++q) a.free(*q);
  live.clear();
  for (auto& p : slots)
    if (p) a.free(p);
  slots.clear();
  for (auto q = persistent.rbegin(); q != persistent.rend(); ++q) a.free(*q);
  persistent.clear();
  prep_bytes = 0;
}

// Persistent state (weights, gradients, optimizer state) on the rank's GPU.
void Job::allocate_persistent(Rank& r) {
  if (spec_.compute.step_time != StepTime::CostModel || !spec_.compute.use_allocator || !spec_.schedule.train) return;
  CachingAllocator& a = r.device->allocator();
  if (plan_->graph) {
    zoo::allocate_persistent(a, plan_->batch(spec_.batch_size, costs_, spec_, cost_).second.plan, r.slots);
  } else {
    const MemoryPlan full = make_memory_plan(cost_, spec_.batch_size);
    for (std::uint64_t t : full.persistent_tensors) r.persistent.push_back(a.allocate(t));
  }
}

}  // namespace gpemu
