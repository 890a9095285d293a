// FastFlow's offloading policy (fastflow.h): its local-ratio rule, and its
// choice on jobs whose profiles are known exactly under the virtual clock.
#include <gtest/gtest.h>

#include "gpemu/catalog.h"
#include "gpemu/cost_model.h"
#include "gpemu/fastflow.h"
#include "gpemu/job.h"
#include "gpemu/session.h"

namespace gpemu {
namespace {

TEST(FastFlow, TheLocalRatioRuleIsThePapersCode) {
  // lthp > rthp: off is the mean of rthp and decode_off (60 x 1.5 = 90); lthp + rthp < gthp: lthp / (lthp + rthp).
  EXPECT_DOUBLE_EQ(fastflow_local_ratio(100, 40, 30, 1.0, 0.5), 40.0 / 70.0);
  // lthp <= rthp: off = max(rthp, decode_off) = 90; lthp + rthp >= gthp: (gthp - off) / gthp.
  EXPECT_DOUBLE_EQ(fastflow_local_ratio(100, 40, 80, 1.0, 0.5), 0.1);
  // More remote throughput than the GPU takes: nothing stays local.
  EXPECT_DOUBLE_EQ(fastflow_local_ratio(100, 40, 200, 1.0, 0.5), 0.0);
}

// 200 JPEGs, batches of 2, each sample 10 ms of decoding: one client worker makes a batch in 20 ms. The
// step is a fixed `step_ms`.
JobSpec job(double step_ms, int remote_cpus) {
  JobSpec s;
  s.cluster.gpu = &find_gpu("a100");
  s.batch_size = 2;
  s.compute.step_time = StepTime::Fixed;
  s.compute.fixed_train = TimeSpec::constant(step_ms / 1000.0);
  s.compute.copy_batch = false;
  s.compute.use_allocator = false;
  s.data.source = DataSource::Modelled;
  for (std::uint64_t i = 0; i < 200; ++i)
    s.data.dataset.samples.push_back(
        {.path = "f", .offset = i * 1000, .length = 1000, .format = pipeline::SampleFormat::Jpeg});
  s.data.dataset.root = "two hundred";
  s.data.loader.batch_size = 2;
  s.data.loader.num_workers = 1;
  s.data.loader.transform.height = s.data.loader.transform.width = 8;
  pipeline::LoaderModelOptions& m = s.data.model;
  m.read_per_sample = 0;
  m.read_bytes_per_s = 0;
  m.decode_per_sample = 10 * kMillisecond;
  m.decode_ns_per_byte = 0;
  m.cores = 64;
  pipeline::PrepServiceOptions p;  // a network and serialisation that cost nothing
  p.workers = 1;
  p.cpus_per_worker = remote_cpus;
  p.nic_bytes_per_s = p.serialize_bytes_per_s = p.deserialize_bytes_per_s = 1e18;
  p.latency = 0;
  m.prep_service = p;
  return s;
}

TEST(FastFlow, OffloadsWhatFreesTheClientAndKeepsWhatTheServiceCannotTake) {
  const auto costs = make_cost_model(std::nullopt);
  // A worker of 4 CPUs makes a batch in 5 ms: every decode-or-later offload keeps up with the 10 ms step.
  FastFlowChoice c = fastflow_choice(*costs, job(10, 4));
  EXPECT_NEAR(c.lthp, 50.0, 1e-9);  // the client's 20 ms a batch
  EXPECT_NEAR(c.gthp, 100.0, 1e-9);
  EXPECT_TRUE(c.bottleneck);
  ASSERT_EQ(c.candidates.size(), 3u);
  EXPECT_EQ(c.candidates[0].offload, pipeline::PrepOffload::Decode);
  EXPECT_NEAR(c.candidates[0].rthp, 100.0, 1e-9);
  EXPECT_NEAR(c.candidates[0].calibrated, 150.0, 1e-9);  // and the client's CPU is free
  EXPECT_NEAR(c.candidates[2].rthp, 50.0, 1e-9);         // read: the client still decodes
  EXPECT_NEAR(c.candidates[2].calibrated, 50.0, 1e-9);
  EXPECT_EQ(c.offload, pipeline::PrepOffload::Decode);  // tied with all; FastFlow takes the first
  EXPECT_DOUBLE_EQ(c.local_share, 0.0);
  // A worker of one CPU is as fast as the client: half the batches stay local.
  c = fastflow_choice(*costs, job(10, 1));
  EXPECT_EQ(c.offload, pipeline::PrepOffload::Decode);
  EXPECT_NEAR(c.candidates[0].rthp, 50.0, 1e-9);
  EXPECT_NEAR(c.local_share, 0.5, 1e-9);
  // Trained so, the client and the worker each make every other batch: the GPU's pace, 10 ms a step.
  JobSpec chosen = job(10, 1);
  chosen.data.model.prep_service->offload = c.offload;
  chosen.data.model.prep_service->local_share = c.local_share;
  auto clock = make_virtual_clock();
  const RunRecord rec = run_alone(*clock, *costs, chosen);
  ASSERT_EQ(rec.steps.size(), 100u);
  EXPECT_EQ(rec.steps[99].step_end - rec.steps[49].step_end, 50 * 10 * kMillisecond);
  // A 30 ms step: the local pipeline keeps up, nothing is offloaded.
  c = fastflow_choice(*costs, job(30, 4));
  EXPECT_FALSE(c.bottleneck);
  EXPECT_EQ(c.offload, pipeline::PrepOffload::None);
  EXPECT_TRUE(c.candidates.empty());
  EXPECT_NE(c.describe().find("no offloading"), std::string::npos) << c.describe();
}

TEST(FastFlow, NeedsAServiceToOffloadTo) {
  const auto costs = make_cost_model(std::nullopt);
  JobSpec s = job(10, 4);
  s.data.model.prep_service.reset();
  EXPECT_THROW(fastflow_choice(*costs, s), InputError);
}

}  // namespace
}  // namespace gpemu
