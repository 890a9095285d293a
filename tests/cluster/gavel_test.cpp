// Gavel's heterogeneity-aware max-min fairness (policy_max_min_perf.cpp):
// its LP, by hand, and its allocation over GPU models on a cluster of two.
#include <gtest/gtest.h>

#include "cluster/max_min_lp.h"
#include "gpemu/cluster.h"

namespace gpemu::cluster {
namespace {

TEST(MaxMinLp, GivesEachJobTheModelItGainsMostOnByHand) {
  // One GPU of each of two models. Job 0 runs 3x as fast on model 1, job 1
  // the same on both; normalised by the equal share (half of each):
  // c0 = [1, 3] / 2 = [0.5, 1.5], c1 = [1, 1]. Job 1 can reach at most 1, so
  // the least is 1 at best, and of those allocations the one that uses the
  // GPUs best gives job 0 model 1 and job 1 model 0.
  const auto x = detail::solve_max_min({{0.5, 1.5}, {1, 1}}, {1, 1}, {1, 1});
  ASSERT_EQ(x.size(), 2u);
  EXPECT_NEAR(x[0][0], 0, 1e-9);
  EXPECT_NEAR(x[0][1], 1, 1e-9);
  EXPECT_NEAR(x[1][0], 1, 1e-9);
  EXPECT_NEAR(x[1][1], 0, 1e-9);
}

TEST(MaxMinLp, OnOneModelIsTheWaterFillingOfGpuShares) {
  // Four GPUs, jobs of 4 and 1 GPUs, equal throughputs: Gavel's scale
  // factor makes the objective the GPU share, so the max-min allocation is
  // the water-filling of `max-min`: the small job all the time (1 GPU), the
  // large one 3/4 of it (3 GPUs' worth). The equal share is 4 / 5 of the
  // time each, so c = scale / (4 / 5): 5 and 1.25. (Without the scale, c =
  // 1.25 each, it would be the equal time share, 4 / 5 each.)
  const auto x = detail::solve_max_min({{5}, {1.25}}, {4, 1}, {4});
  EXPECT_NEAR(x[0][0], 0.75, 1e-9);
  EXPECT_NEAR(x[1][0], 1, 1e-9);
}

TEST(MaxMinPerf, PutsEachJobOnItsModelByTheEnginesThroughputs) {
  // The policy alone, on a view whose throughput matrix is the test's.
  std::vector<TraceJob> trace(2);
  trace[0].id = "a", trace[1].id = "b";
  std::vector<JobState> jobs(2);
  for (std::size_t i = 0; i < 2; ++i) jobs[i].index = i, jobs[i].job = &trace[i];
  ClusterView view;
  view.total_gpus = 2;
  view.jobs = &jobs;
  view.gpu_models = {{&find_gpu("k80"), 1}, {&find_gpu("v100"), 1}};
  const double iteration_s[2][2] = {{1, 1.0 / 3}, {1, 1}};  // a: 3x as fast on model 1
  view.iteration_s = [&](std::size_t i, int m) { return iteration_s[i][m]; };
  auto p = make_policy("max-min-perf");
  EXPECT_TRUE(p->every_round());
  std::vector<std::size_t> order = {0, 1};
  p->order(view, order);
  EXPECT_EQ(order, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(jobs[0].gpu_model, 1);
  EXPECT_EQ(jobs[1].gpu_model, 0);
  // Heterogeneity-agnostic max-min leaves the model to the placement.
  for (auto& j : jobs) j.gpu_model = -1;
  make_policy("max-min")->order(view, order);
  EXPECT_EQ(jobs[0].gpu_model, -1);
}

TEST(MaxMinPerf, SharesTheFastModelWhereAgnosticMaxMinLeavesAJobOnTheSlowOne) {
  // One V100 and one K80. AlexNet gains 3.4x from the V100, ResNet-50 in AMP
  // (its tensor cores) 8.8x. Agnostic max-min places the first job (AlexNet)
  // on the first model with room for good; Gavel's equalises the normalised
  // throughputs: each job half the time on each model, by turns each round.
  const auto c = parse_cluster(
      R"({"nodes": [{"gpu": "v100", "gpus": 1, "cpus": 4}, {"gpu": "k80", "gpus": 1, "cpus": 4}],
          "checkpoint_gib": 0})",
      "c.json");
  const auto t = parse_trace(
      "job,arrival_s,model,batch,gpus,iterations,variant\n"
      "e,0,alexnet,128,1,4000,\n"
      "a,0,resnet50,64,1,400,precision=amp\n",
      "t.csv", c);
  SimOptions o;
  o.round_s = 10;
  JobSpeed speed;
  auto agnostic = make_policy("max-min");
  const auto stuck = simulate(c, t, *agnostic, o, speed);
  const double a_on_k80 = speed.iteration_s(t.jobs[1], Allocation{&find_gpu("k80"), 1, 1, 4, 0});
  EXPECT_NEAR(stuck.jobs[1].finish_s, 400 * a_on_k80, 1e-6);  // on the K80 all along
  auto aware = make_policy("max-min-perf");
  const auto shared = simulate(c, t, *aware, o, speed);
  EXPECT_LT(shared.jobs[1].finish_s, 0.5 * stuck.jobs[1].finish_s);
  EXPECT_GT(shared.jobs[0].finish_s, stuck.jobs[0].finish_s);  // AlexNet gives up half its V100 time
  EXPECT_GE(shared.jobs[1].migrations, 4);                     // from model to model, round by round
  EXPECT_GE(shared.rounds, static_cast<std::int64_t>(shared.jobs[0].finish_s / o.round_s));  // every round asked
}

}  // namespace
}  // namespace gpemu::cluster
