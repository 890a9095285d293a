// The step program: the list of operations one step of a job issues (StepOp),
// the only thing that differs between a training step and a DLIO step.
#pragma once

#include <string_view>
#include <vector>

#include "gpemu/job/spec.h"

namespace gpemu {

enum class StepOp {
  CopyBatch,      // allocate the input on the GPU, copy it (pinned: async; pageable: the host waits)
  Forward,        // allocate activations (forward events of the memory plan), forward kernel
  Backward,       // backward (chunks with gradient-ready points under DDP), backward memory events
  AllReduceWait,  // the stream waits for the iteration's all-reduces (DDP)
  OptimizerStep,  // optimizer kernel and its memory events; frees the activations and the input
  LossItem,       // a 4-byte D2H copy the host waits for (loss.item())
  Compute,        // a kernel of the drawn fixed step time
  Synchronize,    // the host waits for the stream (torch.cuda.synchronize, DLIO's sleep)
  ReleaseBatch,   // the host drops the batch (its staging buffer) now, not at the next one
};
std::string_view to_string(StepOp op);

enum class RunPhase { Train, Eval };
std::string_view to_string(RunPhase p);

// The program of a phase's step for this spec (the Job walks it).
std::vector<StepOp> step_program(const JobSpec& spec, RunPhase phase);

}  // namespace gpemu
