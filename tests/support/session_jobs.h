// A session's job for tests whose times are computed by hand.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "gpemu/session.h"

namespace gpemu::testing {

// A job of `gpus` GPUs whose every rank runs `steps` steps of `step` of GPU
// time and nothing else (no all-reduce, copies or memory): exactly steps x
// step once started, `arrival` the time it is queued.
inline SessionJob fixed_session_job(std::string name, Duration step, std::int64_t steps, Time arrival = 0,
                                    int gpus = 1) {
  SessionJob j;
  j.name = std::move(name);
  j.arrival = arrival;
  JobSpec& s = j.job;
  s.batch_size = 32;
  s.compute.step_time = StepTime::Fixed;
  s.compute.fixed_train = TimeSpec::constant(to_seconds(step));
  s.compute.copy_batch = false;
  s.compute.use_allocator = false;
  s.data.source = DataSource::Synthetic;
  s.data.synthetic_batches = steps;
  s.cluster.gpus = gpus;
  return j;
}

}  // namespace gpemu::testing
