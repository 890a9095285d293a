// One step of a job, predicted: its times and memory without running it.
#pragma once

#include "gpemu/cost/cost_model.h"
#include "gpemu/device/host_memory.h"
#include "gpemu/job/spec.h"
#include "gpemu/time.h"

namespace gpemu {

struct StepPrediction {
  Duration transfer = 0, forward = 0, backward = 0;
  Duration iteration = 0;  // transfer + forward + backward
  StepCost cost;           // the cost model's figures behind them
};
// `gpemu predict`'s times: the job itself runs two steps of `spec` on one GPU
// (in-memory batches from `host` memory, no variation, the host not waiting)
// under a virtual clock, and the second step's phases are read from its
// record, so a prediction is what a training run would show. Memory is not
// replayed here (predict replays the same zoo plan until the allocator
// settles: zoo_memory.h).
StepPrediction predict_step(const CostModel& costs, JobSpec spec, HostMemoryKind host);

}  // namespace gpemu
