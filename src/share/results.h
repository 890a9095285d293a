// What run_shared (share.h) and run_shared_remote (serve.h) do alike: check the jobs'
// models up front, start each job's result from its spec, and sum up the jobs.
#pragma once

#include <vector>

#include "gpemu/session.h"
#include "gpemu/share.h"

namespace gpemu::share_detail {

// Each model job's step cost at its batch (a default StepCost for a fixed-step
// job); InputError naming the job for an unknown model.
std::vector<StepCost> model_steps(const CostModel& costs, const ShareSpec& spec);
// InputError when the jobs' arrivals and steps (`steps` from model_steps),
// one after the other, would not fit the emulated clock.
void check_fits_clock(const ShareSpec& spec, const std::vector<StepCost>& steps);

// A job's result before it runs: its name, priority, slice and arrival (its
// end, until it runs), and a record of its spec (model, card, batch size).
SharedJobResult start_result(const SharedJobSpec& job, const GpuSpec& gpu);

// The job as a session's, pinned to `gpu`: its name, spec, arrival, policy
// priority and slice, and cost model.
SessionJob session_job(const SharedJobSpec& job, int gpu);

// A job's result from its outcome on a GPU (a Session's, in process or
// served): its record moved in, its arrival, end and what ended it.
SharedJobResult job_result(const SharedJobSpec& job, const GpuSpec& gpu, JobOutcome outcome);

// The makespan and the mean JCT over the jobs that finished.
void sum_up(ShareResult& result);

}  // namespace gpemu::share_detail
