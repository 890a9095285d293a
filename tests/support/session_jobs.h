// Jobs and sessions for the session's tests (tests/workload/session*_test.cpp):
// a job whose times are computed by hand, a model's job, a data-parallel
// job, sessions of A100s.
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

// A session of `nodes` nodes of `gpus_per_node` A100s under a placement policy.
inline SessionSpec a100_session(int nodes, int gpus_per_node, std::string_view placement) {
  SessionSpec s;
  s.gpu = &find_gpu("A100-SXM4-40GB");
  s.nodes = nodes;
  s.gpus_per_node = gpus_per_node;
  s.placement = placement_policy(placement);
  return s;
}

// A virtual clock, the default cost model, and sessions of A100s on it.
struct SessionFixture : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  std::unique_ptr<CostModel> costs = make_cost_model(std::nullopt);
  // One node of `gpus` A100-SXM4-40GB placed by `placement`, shared as `share` says.
  static SessionSpec spec(int gpus, std::string_view placement, ShareOptions share = {}) {
    SessionSpec s = a100_session(1, gpus, placement);
    s.share = share;
    return s;
  }
};

// A model's job on in-memory batches on GPU 0: copies, its memory plan
// through its caching allocator, kernels, loss.item().
inline SessionJob model_job(std::string name, int batch, std::int64_t steps) {
  SessionJob j;
  j.name = std::move(name);
  j.gpu = 0;
  j.job.compute.model.name = "resnet18";
  j.job.batch_size = batch;
  j.job.data.source = DataSource::Synthetic;
  j.job.data.synthetic_batches = steps;
  return j;
}

// A data-parallel training job: ResNet-50 on in-memory batches, `gpus` ranks.
inline JobSpec ddp_job(int gpus, std::int64_t steps) {
  JobSpec s;
  s.compute.model.name = "resnet50";
  s.batch_size = 32;
  s.data.source = DataSource::Synthetic;
  s.data.synthetic_batches = steps;
  s.cluster.gpu = &find_gpu("A100-SXM4-40GB");
  s.cluster.gpus = gpus;
  return s;
}

}  // namespace gpemu::testing
