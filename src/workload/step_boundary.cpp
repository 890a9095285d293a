// What a between_steps hook may do at a rank's step boundary (StepBoundary,
// include/gpemu/job/spec.h): the rank's time, its GPU's work, its memory and
// the job's barrier.
#include <memory>
#include <utility>

#include "gpemu/job/job.h"
#include "workload/job_impl.h"

namespace gpemu {

int StepBoundary::rank() const { return static_cast<Job::Rank*>(rank_)->index; }

std::int64_t StepBoundary::iterations() const { return static_cast<Job::Rank*>(rank_)->iterations; }

void StepBoundary::sleep_until(Time t) const { static_cast<Job::Rank*>(rank_)->sleep(t); }

void StepBoundary::drain() const {
  Job::Rank& r = *static_cast<Job::Rank*>(rank_);
  for (Stream* s : {r.stream, r.comm, r.prep})
    if (s) job_.timeline().wait(s->tail(), r.sleep);
}

void StepBoundary::release_memory() const {
  Job::Rank& r = *static_cast<Job::Rank*>(rank_);
  std::shared_ptr<void> batch = std::move(r.current);  // the host keeps its batch
  r.release_all();
  r.current = std::move(batch);
  r.device->allocator().empty_cache();
  // The first iteration after a restart makes its gradients and optimizer state again.
  r.steady = false;
  r.memory_fixed_point = nullptr;
}

}  // namespace gpemu
