// One step of a job, predicted by running two (include/gpemu/job/predict_step.h).
#include "gpemu/job/predict_step.h"

#include <stdexcept>

#include "gpemu/job/job.h"

namespace gpemu {

StepPrediction predict_step(const CostModel& costs, JobSpec spec, HostMemoryKind host) {
  spec.cluster.gpus = 1;
  spec.data = DataSpec{};
  spec.data.source = DataSource::Synthetic;
  spec.data.synthetic_batches = 2;
  spec.data.pin_memory = host == HostMemoryKind::Pinned;
  spec.compute.step_time = StepTime::CostModel;
  spec.compute.copy_batch = true;
  spec.compute.use_allocator = false;
  spec.compute.sync = SyncMode::AtEnd;
  spec.compute.variation.cv = 0;
  spec.compute.variation.warmup_factor = 1;
  spec.schedule = ScheduleSpec{};
  spec.trace = false;
  auto clock = make_virtual_clock();
  Job job(*clock, costs, spec);
  const RunRecord rec = job.run();
  if (rec.steps.size() < 2) throw std::logic_error("predict_step: the job ran fewer than two steps");
  const StepRecord& s = rec.steps[1];
  StepPrediction p;
  p.cost = job.cost();
  p.transfer = s.h2d_end - s.h2d_start;
  p.forward = s.forward_end - s.h2d_end;
  p.backward = s.backward_end - s.forward_end;
  p.iteration = p.transfer + p.forward + p.backward;
  return p;
}

}  // namespace gpemu
