// Session jobs whose times are known by hand (session.h), for the session's
// tests. Shared by tests/workload.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/session.h"

namespace gpemu::testing {

// A job whose every rank (of `gpus` GPUs of one node) runs `steps` steps of
// one kernel of `step` each (demand 1 of the SMs and of the bandwidth) and
// nothing else: no copies, no memory, no all-reduce. Alone it runs exactly
// steps x step once started; it arrives at `arrival`.
inline SessionJob fixed_job(std::string name, Duration step, std::int64_t steps, Time arrival = 0, int gpus = 1) {
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

// A virtual clock, the default cost model, and sessions of A100s on it.
struct SessionFixture : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  std::unique_ptr<CostModel> costs = make_cost_model(std::nullopt);
  // One node of `gpus` A100-SXM4-40GB placed by `placement`, shared as `share` says.
  static SessionSpec spec(int gpus, std::string_view placement, ShareOptions share = {}) {
    SessionSpec s;
    s.gpu = &find_gpu("A100-SXM4-40GB");
    s.gpus_per_node = gpus;
    s.placement = placement_policy(placement);
    s.share = share;
    return s;
  }
};

}  // namespace gpemu::testing
