// FastFlow's offloading policy (Um et al., "FastFlow: Accelerating Deep
// Learning Model Training with Smart Offloading of Input Data Pipeline",
// VLDB 2023; its code, SamsungLabs/FastFlow fastflow/model.py and utils.py,
// was read for this and not copied): before training, profile the job's
// throughput for a few steps
//   lthp  with the whole pipeline on the client (its CPU time: pcycle),
//   gthp  with batches always ready (the GPU's pace),
//   rthp  with each candidate offload on the preprocessing service
//         (FastFlow's ELEMENT, BATCH and MIDDLE: here decode, all and read;
//         the client's CPU time: its cycles),
// and, when gthp / lthp exceeds cpu_bottleneck_threshold (the input pipeline
// is the bottleneck), take the candidate whose rthp plus the client time it
// frees (lthp x (1 - cycles / pcycle)) is largest, and the share of batches
// the client keeps (ratio_local) by FastFlow's rule:
//   ideal = gthp - lthp;  decode_off = ideal x (1 + dcycle / pcycle)
//   off   = (rthp + decode_off) / 2  if lthp > rthp,  else max(rthp, decode_off)
//   ratio = lthp / (lthp + rthp)     if lthp + rthp < gthp,  else (gthp - off) / gthp  (at least 0)
// with rthp the whole service's (FastFlow's one worker). Profiles run the job
// itself under a virtual clock of their own, so the choice is deterministic.
#pragma once

#include <string>
#include <vector>

#include "gpemu/cost_model.h"
#include "gpemu/job.h"
#include "gpemu/prep_service.h"

namespace gpemu {

struct FastFlowOptions {
  int profile_steps = 100;  // FastFlow's num_profile_steps (GPEmu's default_config.yaml)
  int initial_steps = 10;   // num_initial_steps: skipped before timing
  double cpu_bottleneck_threshold = 1.3;
};

struct FastFlowCandidate {
  pipeline::PrepOffload offload = pipeline::PrepOffload::All;
  double rthp = 0;        // steps/s
  double cycles = 0;      // the client's CPU seconds over the profiled steps
  double calibrated = 0;  // rthp + the client's throughput it frees
};

struct FastFlowChoice {
  double lthp = 0, gthp = 0;                  // steps/s
  double pcycle = 0;                          // the client's CPU seconds over the profiled steps, all local
  bool bottleneck = false;                    // gthp / lthp > threshold
  std::vector<FastFlowCandidate> candidates;  // decode, all, read (FastFlow's order)
  pipeline::PrepOffload offload = pipeline::PrepOffload::None;  // None: no offloading
  double local_share = 0;                                       // ratio_local
  std::string describe() const;
};

// `job` has its preprocessing service (data.model.prep_service: workers,
// CPUs, network), whose offload and local share are what is chosen; one GPU.
// InputError when it has none.
FastFlowChoice fastflow_choice(const CostModel& costs, const JobSpec& job, const FastFlowOptions& options = {});
// FastFlow's ratio_local rule (above), for tests and docs.
double fastflow_local_ratio(double gthp, double lthp, double rthp, double pcycle, double dcycle);

}  // namespace gpemu
