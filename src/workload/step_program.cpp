// The step program: the operations one step of a phase issues for a spec
// (include/gpemu/job/step_program.h); the Job walks it (step_loop.cpp).
#include "gpemu/job/step_program.h"

namespace gpemu {

std::string_view to_string(StepOp op) {
  switch (op) {
    case StepOp::CopyBatch: return "copy batch";
    case StepOp::Forward: return "forward";
    case StepOp::Backward: return "backward";
    case StepOp::AllReduceWait: return "all-reduce wait";
    case StepOp::OptimizerStep: return "optimizer step";
    case StepOp::LossItem: return "loss.item()";
    case StepOp::Compute: return "compute";
    case StepOp::Synchronize: return "synchronize";
    case StepOp::ReleaseBatch: return "release batch";
  }
  return "?";
}

std::string_view to_string(RunPhase p) { return p == RunPhase::Train ? "train" : "eval"; }

std::vector<StepOp> step_program(const JobSpec& spec, RunPhase phase) {
  const ComputeSpec& c = spec.compute;
  std::vector<StepOp> p;
  if (c.step_time == StepTime::Fixed) {
    p = {StepOp::Compute, StepOp::Synchronize, StepOp::ReleaseBatch};
    return p;
  }
  if (c.copy_batch || c.use_allocator) p.push_back(StepOp::CopyBatch);
  p.push_back(StepOp::Forward);
  if (phase == RunPhase::Train) {
    p.push_back(StepOp::Backward);
    if (spec.cluster.gpus > 1 && c.all_reduce) p.push_back(StepOp::AllReduceWait);
    p.push_back(StepOp::OptimizerStep);
  }
  if (c.sync == SyncMode::EveryIteration) p.push_back(c.copy_batch ? StepOp::LossItem : StepOp::Synchronize);
  return p;
}

}  // namespace gpemu
