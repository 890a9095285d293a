// A session's job of several GPUs (session.h): placed on free GPUs of one
// node, run with its all-reduce over the node's links, its GPUs freed at its
// end; on GPUs of its own it runs exactly as the same Job on a node of its own.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/session.h"

namespace gpemu {
namespace {

// A data-parallel training job: ResNet-50 on in-memory batches, `gpus` ranks.
JobSpec ddp_job(int gpus, std::int64_t steps) {
  JobSpec s;
  s.compute.model.name = "resnet50";
  s.batch_size = 32;
  s.data.source = DataSource::Synthetic;
  s.data.synthetic_batches = steps;
  s.cluster.gpu = &find_gpu("A100-SXM4-40GB");
  s.cluster.gpus = gpus;
  return s;
}

// The same job on a node of its own (Job builds it) under a clock of its own.
RunRecord alone(const CostModel& costs, JobSpec spec) {
  auto clock = make_virtual_clock();
  Job job(*clock, costs, std::move(spec));
  return job.run();
}

struct SessionMultiGpuTest : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  std::unique_ptr<CostModel> costs = make_cost_model(std::nullopt);
  SessionSpec spec(int nodes, int gpus_per_node, std::string_view placement) {
    SessionSpec s;
    s.gpu = &find_gpu("A100-SXM4-40GB");
    s.nodes = nodes;
    s.gpus_per_node = gpus_per_node;
    s.placement = placement_policy(placement);
    return s;
  }
};

// Two jobs of 2 GPUs arrive together on a node of 4 (NVSwitch, two GPUs a
// PCIe switch) and get GPUs 0-1 and 2-3: they share no link, so each runs
// step for step as alone. A job of 4 GPUs that arrived with them waits for
// all four and then runs as alone, shifted to its start.
TEST_F(SessionMultiGpuTest, DdpJobsGetFreeGpusOfOneNodeAndRunAsOnANodeOfTheirOwn) {
  SessionSpec s = spec(1, 4, "first-fit");
  s.exclusive = true;
  Session session(*clock, *costs, s);
  SessionJob a{.name = "a", .job = ddp_job(2, 4)};
  SessionJob b{.name = "b", .job = ddp_job(2, 6)};
  SessionJob c{.name = "c", .job = ddp_job(4, 3)};
  const JobId ia = session.add_job(a), ib = session.add_job(b), ic = session.add_job(c);
  session.run();
  const JobOutcome &oa = session.outcome(ia), &ob = session.outcome(ib), &oc = session.outcome(ic);
  for (const JobOutcome* o : {&oa, &ob, &oc}) ASSERT_EQ(o->state, JobState::Finished) << o->name << ": " << o->error;
  EXPECT_EQ(oa.gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(ob.gpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(oc.gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(oa.start, 0);
  EXPECT_EQ(ob.start, 0);
  EXPECT_EQ(oc.start, std::max(oa.end, ob.end));  // it needs every GPU
  EXPECT_GT(ob.end, oa.end);                      // b runs more steps

  for (const auto& [o, gpus, steps] : {std::tuple{&oa, 2, 4}, std::tuple{&ob, 2, 6}, std::tuple{&oc, 4, 3}}) {
    const RunRecord ref = alone(*costs, ddp_job(gpus, steps));
    const RunRecord& rec = *o->record;
    ASSERT_EQ(rec.gpus, gpus) << o->name;
    EXPECT_EQ(rec.all_reduces, ref.all_reduces) << o->name;
    EXPECT_GT(rec.all_reduces, 0u) << o->name;
    ASSERT_EQ(rec.steps.size(), ref.steps.size()) << o->name;
    for (std::size_t i = 0; i < rec.steps.size(); ++i) {
      EXPECT_EQ(rec.steps[i].step_end - o->start, ref.steps[i].step_end) << o->name << " step " << i;
      EXPECT_EQ(rec.steps[i].all_reduce_end - o->start, ref.steps[i].all_reduce_end) << o->name << " step " << i;
    }
    EXPECT_EQ(o->end - o->start, summarize(ref).elapsed) << o->name;
  }
}

// Several GPUs take free ones of one node: not two half-free nodes.
TEST_F(SessionMultiGpuTest, FreeGpusOfOneNodeAreTakenFromOneNodeOnly) {
  const std::vector<GpuLoad> loads = {{0, 0, 0}, {1, 0, 1}, {2, 1, 0}, {3, 1, 0}};
  EXPECT_EQ(free_gpus_of_one_node({.gpus = 2}, loads), (std::vector<int>{2, 3}));
  EXPECT_EQ(free_gpus_of_one_node({.gpu = 2, .gpus = 2}, loads), (std::vector<int>{2, 3}));
  EXPECT_TRUE(free_gpus_of_one_node({.gpu = 0, .gpus = 2}, loads).empty());  // GPU 1 is busy
  EXPECT_TRUE(free_gpus_of_one_node({.gpus = 3}, loads).empty());
  EXPECT_EQ(placement_policy("pinned")->place_gpus({.gpu = 0, .gpus = 2}, loads), (std::vector<int>{0, 1}));
}

// On shared GPUs a data-parallel job runs beside a job of one GPU under a
// policy that divides kernels (mps), slower than alone; fifo, which holds the
// GPU through a step while a rank waits for its peers, is refused.
TEST_F(SessionMultiGpuTest, OnSharedGpusADdpJobSharesThemUnderAPolicyThatDividesKernels) {
  SessionSpec s = spec(1, 2, "pinned");
  s.share.policy = SharePolicy::Mps;
  Session session(*clock, *costs, s);
  const JobId ddp = session.add_job({.name = "ddp", .job = ddp_job(2, 4)});
  const JobId one = session.add_job({.name = "one", .job = ddp_job(1, 8), .gpu = 1});
  session.run();
  ASSERT_EQ(session.outcome(ddp).state, JobState::Finished) << session.outcome(ddp).error;
  ASSERT_EQ(session.outcome(one).state, JobState::Finished) << session.outcome(one).error;
  EXPECT_EQ(session.outcome(ddp).gpus, (std::vector<int>{0, 1}));
  EXPECT_GT(session.outcome(ddp).end, summarize(alone(*costs, ddp_job(2, 4))).elapsed);

  auto clock2 = make_virtual_clock();
  Session fifo(*clock2, *costs, spec(1, 2, "pinned"));
  try {
    fifo.add_job({.name = "ddp", .job = ddp_job(2, 4)});
    FAIL() << "a DDP job on fifo-shared GPUs was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fifo"), std::string::npos) << e.what();
  }
  SessionJob cross{.name = "cross", .job = ddp_job(2, 1), .gpu = 1};
  auto clock3 = make_virtual_clock();
  Session two_nodes(*clock3, *costs, spec(2, 2, "first-fit"));
  EXPECT_THROW(two_nodes.add_job(cross), InputError);  // GPUs 1 and 2 are of two nodes
}

}  // namespace
}  // namespace gpemu
