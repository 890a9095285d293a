// The cluster layer (cluster.h): its files, the engine's job speed, the
// policies and the simulation, all in virtual time.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cluster/run_json.h"
#include "gpemu/cluster.h"
#include "gpemu/error.h"

namespace gpemu::cluster {
namespace {

const char* kCluster = R"({"nodes": [{"gpu": "v100", "gpus": 4, "cpus": 24, "dram_gib": 500, "count": 2}]})";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ClusterFile, ReadsNodesAndCountsThem) {
  const auto c = parse_cluster(kCluster, "c.json");
  ASSERT_EQ(c.nodes.size(), 1u);
  EXPECT_EQ(c.nodes[0].gpu, &find_gpu("v100"));
  EXPECT_EQ(c.total_gpus(), 8);
  EXPECT_EQ(c.total_nodes(), 2);
}

TEST(ClusterFile, NamesTheBadInput) {
  EXPECT_NE(error_of([] {
              parse_cluster(R"({"nodes": [{"gpu": "v999"}]})", "c.json");
            }).find("'v999' is not in the catalog"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_cluster(R"({"nodes": [{"gpu": "v100", "gpuz": 2}]})", "c.json");
            }).find("c.json: node 1: unknown key 'gpuz'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_cluster(R"({"nodes": []})", "c.json"); }).find("non-empty list"), std::string::npos);
  EXPECT_NE(error_of([] { parse_cluster(R"({"nodes": [{"gpu": "v100", "gpus": 0}]})", "c.json"); }).find("'gpus'"),
            std::string::npos);
}

TEST(TraceFile, ParsesSortsAndRoundTrips) {
  const auto c = parse_cluster(kCluster, "c.json");
  const auto t = parse_trace(
      "job,arrival_s,user,model,batch,gpus,iterations,duration_s,step_s,variant\n"
      "b,10,u2,resnet50,64,2,100,,,precision=amp;memory_format=channels_last\n"
      "# a comment\n"
      "a,0,u1,,,1,,60,0.5,\n",
      "t.csv", c);
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].id, "a");  // by arrival
  EXPECT_EQ(t.jobs[1].model_spec.name, "resnet50");
  EXPECT_EQ(t.jobs[1].model_spec.precision, zoo::Precision::AMP_FP16);
  const auto again = parse_trace(trace_csv(t), "again.csv", c);
  EXPECT_EQ(trace_csv(again), trace_csv(t));
}

TEST(TraceFile, NamesTheLineAndTheFix) {
  const auto c = parse_cluster(kCluster, "c.json");
  const std::string head = "job,arrival_s,model,batch,gpus,iterations\n";
  EXPECT_NE(error_of([&] {
              parse_trace(head + "a,0,resnet50,64,16,10\n", "t.csv", c);
            }).find("t.csv:2: job 'a' asks for 16 GPUs; the cluster has at most 8 of one model (V100-PCIE-32GB)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_trace(head + "a,0,resnet50,64,1,10\na,1,resnet50,64,1,10\n", "t.csv", c);
            }).find("t.csv:3"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_trace(head + "a,zero,resnet50,64,1,10\n", "t.csv", c);
            }).find("t.csv:2: 'arrival_s' is 'zero'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_trace(head + "a,0,nosuchnet,64,1,10\n", "t.csv", c); }).find("not a model of the zoo"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_trace("job,arrival_s,gpus,colour\n", "t.csv", c); }).find("unknown column 'colour'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_trace(head + "a,0,resnet50,64,1\n", "t.csv", c);
            }).find("5 fields where the header has 6"),
            std::string::npos);
}

TEST(TraceGenerator, FollowsSynergysLawsAndIsSeeded) {
  TraceOptions o;
  o.jobs = 4000;
  o.seed = 3;
  o.jobs_per_hour = 10;
  const auto t = generate_trace(o);
  ASSERT_EQ(t.jobs.size(), 4000u);
  int one = 0, eight = 0;
  double last = 0;
  for (const auto& j : t.jobs) {
    one += j.gpus == 1;
    eight += j.gpus == 8;
    EXPECT_GE(j.arrival_s, last);
    EXPECT_EQ(j.arrival_s, std::floor(j.arrival_s));
    last = j.arrival_s;
    EXPECT_GE(j.duration_s, std::round(60 * std::pow(10, 1.5)));
    EXPECT_LE(j.duration_s, 600000);
  }
  EXPECT_NEAR(one / 4000.0, 0.7, 0.03);
  EXPECT_NEAR(eight / 4000.0, 0.05, 0.015);
  // 10 jobs an hour: the last of 4000 arrives near 400 h.
  EXPECT_NEAR(last / 3600, 400, 40);
  EXPECT_EQ(trace_csv(generate_trace(o)), trace_csv(t));
  o.seed = 4;
  EXPECT_NE(trace_csv(generate_trace(o)), trace_csv(t));
}

// Fixed-step jobs on a small cluster under `policy` with rounds of 10 s.
constexpr const char* kOneGpu = R"({"nodes": [{"gpu": "v100", "gpus": 1, "cpus": 4}], "checkpoint_gib": 0})";
ClusterRun run_trace(const char* cluster, const std::string& trace, const std::string& policy,
                     const LasOptions& las = {}) {
  const auto c = parse_cluster(cluster, "c.json");
  JobSpeed speed;
  auto p = make_policy(policy, las);
  SimOptions o;
  o.round_s = 10;
  return simulate(c, parse_trace(trace, "t.csv", c), *p, o, speed);
}

LasOptions las_queues(std::vector<double> limits, double starvation = 0) {
  LasOptions o;
  o.queue_limits_gpu_s = std::move(limits);
  o.starvation_factor = starvation;
  return o;
}

// A parsed trace under `policy` with the CPU allocation `cpu`, rounds of 10 s.
ClusterRun run_allocation(const ClusterConfig& c, const Trace& t, const std::string& policy, CpuAllocation cpu) {
  JobSpeed speed;
  auto p = make_policy(policy);
  SimOptions o;
  o.round_s = 10;
  o.cpu = cpu;
  return simulate(c, t, *p, o, speed);
}

TEST(Simulation, FifoRunsInArrivalOrderWithExactTimes) {
  const auto run = run_trace(kOneGpu, "job,arrival_s,gpus,iterations,step_s\na,0,1,100,1\nb,0,1,50,1\n", "fifo");
  EXPECT_DOUBLE_EQ(run.jobs[0].finish_s, 100);
  EXPECT_DOUBLE_EQ(run.jobs[1].start_s, 100);
  EXPECT_DOUBLE_EQ(run.jobs[1].finish_s, 150);
  EXPECT_DOUBLE_EQ(run.mean_jct_s(), 125);
  EXPECT_DOUBLE_EQ(run.jobs[0].gpu_s, 100);
}

TEST(Simulation, SrtfPreemptsForTheShorterJobAndPaysTheCheckpoint) {
  const auto run = run_trace(
      R"({"nodes": [{"gpu": "v100", "gpus": 1, "cpus": 4}], "checkpoint_gib": 1, "storage_gb_per_s": 1.073741824})",
      "job,arrival_s,gpus,iterations,step_s\nlong,0,1,100,1\nshort,5,1,20,1\n", "srtf");
  // short arrives at 5, starts at the round at 10 and runs 20 s; long resumes
  // at 30 with 1 s of checkpoint write and 1 s of read, 90 iterations left.
  EXPECT_DOUBLE_EQ(run.jobs[1].start_s, 10);
  EXPECT_DOUBLE_EQ(run.jobs[1].finish_s, 30);
  EXPECT_DOUBLE_EQ(run.jobs[0].finish_s, 30 + 2 + 90);
  EXPECT_EQ(run.jobs[0].preemptions, 1);
}

TEST(Simulation, LasGivesTheNewcomerTheGpu) {
  const std::string trace = "job,arrival_s,gpus,iterations,step_s\nold,0,1,100,1\nnew,10,1,100,1\n";
  // Continuous LAS: the two alternate, tied at 10 s of service each round, older first.
  const auto run = run_trace(kOneGpu, trace, "las", las_queues({}));
  EXPECT_DOUBLE_EQ(run.jobs[1].start_s, 10);
  EXPECT_DOUBLE_EQ(run.jobs[0].finish_s + run.jobs[1].finish_s, 190 + 200);
  // Tiresias' queues with a 50 GPU-s limit: old runs 50 s, then new gets its 50.
  const auto run2 = run_trace(kOneGpu, trace, "las", las_queues({50}));
  EXPECT_GT(run2.jobs[0].preemptions, 0);
  EXPECT_DOUBLE_EQ(run2.makespan_s, 200);
}

TEST(Simulation, DrfFifoServesTheUserWithTheLeastDominantShare) {
  const char* two = R"({"nodes": [{"gpu": "v100", "gpus": 2, "cpus": 8}]})";
  const std::string trace =
      "job,arrival_s,user,gpus,iterations,step_s\na1,0,A,1,10,1\na2,0,A,1,10,1\na3,0,A,1,10,1\nb1,0,B,1,10,1\n";
  const auto by_fifo = run_trace(two, trace, "fifo");
  EXPECT_DOUBLE_EQ(by_fifo.jobs[3].start_s, 10);  // b1 after a1 and a2
  const auto by_drf = run_trace(two, trace, "drf-fifo");
  EXPECT_DOUBLE_EQ(by_drf.jobs[3].start_s, 0);  // B's share 0 < A's 1/2 after a1
  EXPECT_DOUBLE_EQ(by_drf.jobs[0].start_s, 0);
  EXPECT_DOUBLE_EQ(by_drf.jobs[1].start_s, 10);  // A's jobs in order
  EXPECT_DOUBLE_EQ(by_drf.jobs[2].start_s, 10);
  EXPECT_EQ(by_drf.policy, "drf-fifo");
}

// One GPU and 16 cores: a GPU job holds its 4 cores; a CPU configuration
// takes 8 of the 12 left (one CPU machine for AlloX). Rounds of 5 s.
constexpr const char* kHybrid = R"({"nodes": [{"gpu": "v100", "gpus": 1, "cpus": 16}], "checkpoint_gib": 0})";
ClusterRun run_hybrid(const std::string& jobs, const std::string& policy) {
  const auto c = parse_cluster(kHybrid, "c.json");
  JobSpeed speed;
  auto p = make_policy(policy);
  SimOptions o;
  o.round_s = 5;
  return simulate(
      c, parse_trace("job,arrival_s,gpus,iterations,step_s,cpus,cpu_config_cpus,cpu_step_s\n" + jobs, "t.csv", c), *p,
      o, speed);
}

TEST(Simulation, DrfRunsEachJobOnItsFasterConfigurationShortestFirst) {
  // long: 100 s on the GPU, 50 s on 8 cores; short: 10 s on the GPU only.
  const std::string jobs = "long,0,1,1,100,4,8,50\nshort,0,1,1,10,4,,\n";
  const auto drf = run_hybrid(jobs, "drf");
  EXPECT_DOUBLE_EQ(drf.jobs[1].finish_s, 10);
  EXPECT_DOUBLE_EQ(drf.jobs[0].finish_s, 50);  // at once, on its CPU configuration
  EXPECT_TRUE(drf.jobs[0].on_cpu);
  EXPECT_DOUBLE_EQ(drf.jobs[0].gpu_s, 0);
  EXPECT_DOUBLE_EQ(drf.jobs[0].cpu_s, 8 * 50);
  const auto fifo = run_hybrid(jobs, "drf-fifo");  // arrival order, on GPUs
  EXPECT_DOUBLE_EQ(fifo.jobs[0].finish_s, 100);
  EXPECT_DOUBLE_EQ(fifo.jobs[1].finish_s, 110);
  EXPECT_FALSE(fifo.jobs[0].on_cpu);
}

TEST(Simulation, AlloxMatchesJobsToMachinesForTheLeastTotalCompletionTime) {
  // GPU / CPU seconds: a 10 / 100, b 30 / 35, c 20 / 1000. The least sum of
  // completion times: a then c on the GPU (10 + 30), b on the CPU (35).
  const auto run = run_hybrid("a,0,1,1,10,4,8,100\nb,0,1,1,30,4,8,35\nc,0,1,1,20,4,8,1000\n", "allox");
  EXPECT_DOUBLE_EQ(run.jobs[0].finish_s, 10);
  EXPECT_TRUE(run.jobs[1].on_cpu);
  EXPECT_DOUBLE_EQ(run.jobs[1].finish_s, 35);
  EXPECT_DOUBLE_EQ(run.jobs[2].start_s, 10);
  EXPECT_DOUBLE_EQ(run.jobs[2].finish_s, 30);
  EXPECT_FALSE(run.jobs[2].on_cpu);
  // Two jobs slow on CPU: one waits for the GPU though the CPU is free.
  const auto wait = run_hybrid("a,0,1,1,10,4,8,100\nb,0,1,1,10,4,8,100\n", "allox");
  EXPECT_DOUBLE_EQ(wait.jobs[0].finish_s + wait.jobs[1].finish_s, 10 + 20);
  EXPECT_FALSE(wait.jobs[0].on_cpu || wait.jobs[1].on_cpu);
}

TEST(Simulation, AlloxMatchesTheJobsOfTheUsersOfLeastFairnessScore) {
  // alpha 0.5 of two users: one user's jobs each round. At 5 s x runs x1
  // (score 1/2 of the GPUs), y none: y's job takes the free GPU though x's
  // x2 is shorter; x2 follows it.
  const char* two = R"({"nodes": [{"gpu": "v100", "gpus": 2, "cpus": 16}], "checkpoint_gib": 0})";
  const std::string trace = "job,arrival_s,user,gpus,iterations,step_s\nx1,0,x,1,1,100\nx2,5,x,1,1,5\ny1,5,y,1,1,20\n";
  const auto run = run_trace(two, trace, "allox");
  EXPECT_DOUBLE_EQ(run.jobs[2].start_s, 10);  // the round after their arrival
  EXPECT_DOUBLE_EQ(run.jobs[1].start_s, 30);
  EXPECT_DOUBLE_EQ(run_trace(two, trace, "srtf").jobs[1].start_s, 10);
}

TEST(Simulation, EqualShareGivesEachUserItsShareOfGpusAndCpuConfigurations) {
  // 2 GPUs and 120 cores for 2 users: a GPU each, and (120 - 2 x 10) / 2 = 50
  // cores each for CPU configurations of 40 cores (one each, its GPU job's 10 counted).
  const auto run = run_trace(R"({"nodes": [{"gpu": "v100", "gpus": 1, "cpus": 60, "count": 2}], "checkpoint_gib": 0})",
                             "job,arrival_s,user,gpus,iterations,step_s,cpus,cpu_config_cpus,cpu_step_s\n"
                             "a,0,u1,1,10,1,10,40,3\n"
                             "b,0,u1,1,20,1,10,40,2\n"
                             "c,0,u1,1,5,1,10,40,10\n"
                             "d,0,u2,1,30,1,10,40,2\n",
                             "es");
  EXPECT_EQ(run.policy, "es");
  // u1 first (ties by the first waiting job): its shortest on a GPU, c; then
  // u2's d; no GPU left: u1, holding the fewest cores, its shortest on CPU, a;
  // b waits (u1's CPU share is used) until c's GPU is free at the next round.
  EXPECT_DOUBLE_EQ(run.jobs[2].finish_s, 5);
  EXPECT_DOUBLE_EQ(run.jobs[3].finish_s, 30);
  EXPECT_TRUE(run.jobs[0].on_cpu);
  EXPECT_DOUBLE_EQ(run.jobs[0].finish_s, 30);
  EXPECT_FALSE(run.jobs[1].on_cpu);
  EXPECT_DOUBLE_EQ(run.jobs[1].start_s, 10);
  EXPECT_DOUBLE_EQ(run.jobs[1].finish_s, 30);
}

TEST(Simulation, AJobPaysItsStartEachTimeItStarts) {
  const auto run = run_trace(R"({"nodes": [{"gpu": "v100", "gpus": 1, "cpus": 4}], "job_start_s": 2.5})",
                             "job,arrival_s,gpus,iterations,step_s\na,0,1,10,1\nb,0,1,10,1\n", "fifo");
  EXPECT_DOUBLE_EQ(run.jobs[0].finish_s, 12.5);
  EXPECT_DOUBLE_EQ(run.jobs[1].start_s, 20);  // the round after a's end
  EXPECT_DOUBLE_EQ(run.jobs[1].finish_s, 32.5);
}

TEST(TraceFile, ACpuConfigurationIsAStepJobsWithItsCoresAndTime) {
  const auto c = parse_cluster(kHybrid, "c.json");
  const std::string head = "job,arrival_s,gpus,iterations,step_s,model,cpu_config_cpus,cpu_step_s\n";
  EXPECT_NE(error_of([&] {
              parse_trace(head + "a,0,1,1,1,,8,\n", "t.csv", c);
            }).find("t.csv:2: job 'a': a CPU configuration is cpu_config_cpus and cpu_step_s together"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_trace(head + "a,0,1,1,,resnet18,8,2\n", "t.csv", c);
            }).find("no model of training on CPU cores"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_trace(head + "a,0,1,1,1,,64,2\n", "t.csv", c);
            }).find("asks for 64 cores on CPU; the cluster has 16"),
            std::string::npos);
  const auto t = parse_trace(head + "a,0,1,1,1,,8,2.5\n", "t.csv", c);
  EXPECT_EQ(trace_csv(parse_trace(trace_csv(t), "again.csv", c)), trace_csv(t));
  EXPECT_DOUBLE_EQ(t.jobs[0].cpu_step_s, 2.5);
}

TEST(Simulation, TimeSlicingTakesTurnsWhereLasServesTheNewcomerFirst) {
  const std::string trace = "job,arrival_s,gpus,iterations,step_s\na,0,1,100,1\nb,50,1,30,1\n";
  const auto by_las = run_trace(kOneGpu, trace, "las", las_queues({}));
  EXPECT_DOUBLE_EQ(by_las.jobs[1].finish_s, 80);  // b runs 50-80: less service than a
  EXPECT_DOUBLE_EQ(by_las.jobs[0].finish_s, 130);
  const auto by_turns = run_trace(kOneGpu, trace, "timeslice");
  EXPECT_DOUBLE_EQ(by_turns.jobs[1].finish_s, 100);  // b at 50, 70, 90; a at 60, 80, then 100-130
  EXPECT_DOUBLE_EQ(by_turns.jobs[0].finish_s, 130);
  EXPECT_EQ(by_turns.jobs[0].preemptions, 3);
}

TEST(Simulation, MaxMinFairnessGivesEachJobItsShareOfRounds) {
  // One GPU, two jobs: each's max-min share is half the time. Gavel's
  // priority (share / fraction received) alternates them, ties by arrival.
  const auto run = run_trace(kOneGpu, "job,arrival_s,gpus,iterations,step_s\na,0,1,30,1\nb,0,1,30,1\n", "max-min");
  EXPECT_DOUBLE_EQ(run.jobs[0].finish_s, 50);  // 0-10, 20-30, 40-50
  EXPECT_DOUBLE_EQ(run.jobs[1].finish_s, 60);  // 10-20, 30-40, 50-60
  EXPECT_EQ(run.jobs[0].preemptions, 2);
  EXPECT_EQ(run.jobs[1].preemptions, 2);
  // Four GPUs: 1 GPU and 4 GPUs water-fill to shares 1 and 3/4; the small
  // job first, the large one next round (it has had none of its share).
  const auto mixed = run_trace(R"({"nodes": [{"gpu": "v100", "gpus": 4, "cpus": 16}], "checkpoint_gib": 0})",
                               "job,arrival_s,gpus,iterations,step_s\nbig,0,4,10,1\nsmall,0,1,100,1\n", "max-min");
  EXPECT_DOUBLE_EQ(mixed.jobs[1].start_s, 0);
  EXPECT_DOUBLE_EQ(mixed.jobs[0].start_s, 10);
  EXPECT_DOUBLE_EQ(mixed.jobs[0].finish_s, 20);
}

TEST(Simulation, LasStarvationGuardGivesTheWaitingJobTurns) {
  const std::string trace = "job,arrival_s,gpus,iterations,step_s\na,0,1,100,1\nb,5,1,100,1\n";
  // Both pass 10 GPU-s, then share the lower queue by arrival: b waits for all of a.
  const auto starved = run_trace(kOneGpu, trace, "las", las_queues({10}));
  EXPECT_DOUBLE_EQ(starved.jobs[0].finish_s, 110);
  EXPECT_DOUBLE_EQ(starved.jobs[1].finish_s, 200);
  EXPECT_EQ(starved.jobs[1].preemptions, 1);  // resumed once, at 110
  // b is promoted after waiting twice its 10 s of running: it gets turns while a runs.
  const auto run = run_trace(kOneGpu, trace, "las", las_queues({10}, 2));
  EXPECT_GT(run.jobs[1].preemptions, 1);
  EXPECT_GT(run.jobs[0].finish_s, 110);
  EXPECT_DOUBLE_EQ(run.makespan_s, 200);
}

TEST(Simulation, SrtfUnderTuneOrdersByTheTunedRemainingTime) {
  // a (AlexNet reading Imagenette, 1 GPU) runs twice as fast with the node's
  // 24 cores as with its 3; b (8 GPUs, no loader) gains nothing. At fair
  // share a has more left than b, at its best less: Synergy's SRTF sorts by
  // remaining_duration(fair=False) under Tune, so a goes first there.
  const auto c = parse_cluster(R"({"nodes": [{"gpu": "v100", "gpus": 8, "cpus": 24}], "checkpoint_gib": 0})", "c.json");
  const auto t = parse_trace(
      "job,arrival_s,model,batch,gpus,iterations,dataset\na,0,alexnet,256,1,500,imagenette\n"
      "b,0,resnet18,64,8,1100,\n",
      "t.csv", c);
  JobSpeed speed;
  auto srtf = make_policy("srtf");
  SimOptions o;
  o.round_s = 10;
  const auto prop = simulate(c, t, *srtf, o, speed);
  EXPECT_DOUBLE_EQ(prop.jobs[1].start_s, 0);
  EXPECT_GT(prop.jobs[0].start_s, 0);
  o.cpu = CpuAllocation::Tune;
  const auto tune = simulate(c, t, *srtf, o, speed);
  EXPECT_DOUBLE_EQ(tune.jobs[0].start_s, 0);
  EXPECT_GT(tune.jobs[1].start_s, 0);
}

TEST(Simulation, SynergyTunePlacesAJobWhereItsBestCoresFit) {
  // Two nodes of 2 GPUs and 8 cores (4 a GPU); two 1-GPU jobs that want 8
  // cores each. Consolidation alone would put both on node 0 at 4 cores
  // each; Tune places the second where its 8 fit (Synergy's
  // allocate_synergy_tune tries the whole demand first), so both get 8.
  const auto c =
      parse_cluster(R"({"nodes": [{"gpu": "v100", "gpus": 2, "cpus": 8, "count": 2}], "checkpoint_gib": 0})", "c.json");
  const auto t = parse_trace("job,arrival_s,gpus,iterations,step_s,cpus\na,0,1,100,1,8\nb,0,1,100,1,8\n", "t.csv", c);
  const auto run = run_allocation(c, t, "fifo", CpuAllocation::Tune);
  EXPECT_DOUBLE_EQ(run.jobs[0].cpu_s, 8 * 100);
  EXPECT_DOUBLE_EQ(run.jobs[1].cpu_s, 8 * 100);
  // A third job that finds no node with its 8 stays where it is placed, at its fair share.
  const auto t3 =
      parse_trace("job,arrival_s,gpus,iterations,step_s,cpus\na,0,1,100,1,8\nb,0,1,100,1,8\nc,0,1,100,1,8\n", "t.csv",
                  c);
  const auto run3 = run_allocation(c, t3, "fifo", CpuAllocation::Tune);
  EXPECT_DOUBLE_EQ(run3.jobs[0].cpu_s + run3.jobs[1].cpu_s + run3.jobs[2].cpu_s, (8 + 4 + 4) * 100);
}

TEST(Simulation, DramIsPartOfSynergysDemandUnderGreedyAndTune) {
  // Two nodes of 2 GPUs, 8 cores and 100 GiB; three 1-GPU jobs of 60 GiB:
  // a node holds one of them beside the other's cores.
  const auto c = parse_cluster(
      R"({"nodes": [{"gpu": "v100", "gpus": 2, "cpus": 8, "dram_gib": 100, "count": 2}], "checkpoint_gib": 0})",
      "c.json");
  const auto t = parse_trace(
      "job,arrival_s,gpus,iterations,step_s,cpus,mem_gib\na,0,1,100,1,2,60\nb,0,1,100,1,2,60\nc,0,1,100,1,2,60\n",
      "t.csv", c);
  auto run = [&](CpuAllocation cpu) { return run_allocation(c, t, "fifo", cpu); };
  // Greedy: a on node 0, b moved to node 1 (node 0's 40 GiB left cannot hold
  // it), c waits for a's node (Synergy's skip).
  const auto greedy = run(CpuAllocation::Greedy);
  EXPECT_DOUBLE_EQ(greedy.jobs[1].start_s, 0);
  EXPECT_DOUBLE_EQ(greedy.jobs[2].start_s, 100);
  // Tune: c falls back to its fair share and starts at once; Prop has no demand.
  EXPECT_DOUBLE_EQ(run(CpuAllocation::Tune).jobs[2].start_s, 0);
  EXPECT_DOUBLE_EQ(run(CpuAllocation::Prop).jobs[2].start_s, 0);
  // Without mem_gib a job's demand is its proportional share (50 GiB a GPU): all three start.
  const auto t0 =
      parse_trace("job,arrival_s,gpus,iterations,step_s,cpus\na,0,1,100,1,2\nb,0,1,100,1,2\nc,0,1,100,1,2\n", "t.csv",
                  c);
  EXPECT_DOUBLE_EQ(run_allocation(c, t0, "fifo", CpuAllocation::Greedy).jobs[2].start_s, 0);
  // More DRAM than any node holds would wait for ever under Greedy: one line naming the job.
  const auto big = parse_trace("job,arrival_s,gpus,iterations,step_s,mem_gib\nhuge,0,1,10,1,150\n", "t.csv", c);
  EXPECT_NE(error_of([&] {
              run_allocation(c, big, "fifo", CpuAllocation::Greedy);
            }).find("job 'huge' asks for 150 GiB of DRAM over its 1 GPUs; under --cpu-allocation greedy"),
            std::string::npos);
}

TEST(Simulation, SynergyGreedyMakesAJobWaitForItsBestCores) {
  // Two GPUs and 8 cores; each job's best is 6 cores (its trace cpus).
  const auto c = parse_cluster(R"({"nodes": [{"gpu": "v100", "gpus": 2, "cpus": 8}], "checkpoint_gib": 0})", "c.json");
  const auto t = parse_trace("job,arrival_s,gpus,iterations,step_s,cpus\na,0,1,10,1,6\nb,0,1,10,1,6\n", "t.csv", c);
  JobSpeed speed;
  auto fifo = make_policy("fifo");
  SimOptions o;
  o.round_s = 10;
  o.cpu = CpuAllocation::Greedy;
  const auto greedy = simulate(c, t, *fifo, o, speed);
  EXPECT_DOUBLE_EQ(greedy.jobs[0].cpu_s, 6 * 10);
  EXPECT_DOUBLE_EQ(greedy.jobs[1].start_s, 10);  // a GPU was free, its cores were not
  EXPECT_DOUBLE_EQ(greedy.jobs[1].finish_s, 20);
  o.cpu = CpuAllocation::Tune;  // no job below its proportional share: both run
  EXPECT_DOUBLE_EQ(simulate(c, t, *fifo, o, speed).jobs[1].finish_s, 10);
  EXPECT_EQ(parse_cpu_allocation("greedy"), CpuAllocation::Greedy);
}

// A policy that runs jobs in arrival order, and throws PolicyFailure at its
// `fail_at`-th round (0: never), or orders none (`none`).
class Faulty final : public Policy {
 public:
  Faulty(int fail_at, bool none) : fail_at_(fail_at), none_(none) {}
  std::string name() const override { return "faulty"; }
  void order(const ClusterView&, std::vector<std::size_t>& order) override {
    if (++calls_ == fail_at_) throw PolicyFailure("faulty raised");
    if (none_) order.clear();
  }

 private:
  int calls_ = 0, fail_at_;
  bool none_;
};

TEST(Simulation, APolicyFailureEndsTheRunWithTheFinishedJobsRecorded) {
  const auto c = parse_cluster(kOneGpu, "c.json");
  const auto t = parse_trace("job,arrival_s,gpus,iterations,step_s\na,0,1,10,1\nb,0,1,100,1\n", "t.csv", c);
  JobSpeed speed;
  SimOptions o;
  o.round_s = 10;
  Faulty fails(2, false);
  const auto run = simulate(c, t, fails, o, speed);
  EXPECT_EQ(run.stopped, "faulty raised");
  EXPECT_DOUBLE_EQ(run.stopped_at_s, 10);
  EXPECT_DOUBLE_EQ(run.jobs[0].finish_s, 10);
  EXPECT_FALSE(run.jobs[1].finished());
  EXPECT_EQ(run_json(run)["stopped"]["why"], "faulty raised");
  Faulty idle(0, true);  // nothing would ever run: the run ends instead of spinning
  EXPECT_NE(simulate(c, t, idle, o, speed).stopped.find("faulty left every job waiting"), std::string::npos);
}

TEST(Simulation, JobSpeedComesFromTheEngineAndCoresMatter) {
  JobSpeed speed;
  TraceJob j;
  j.model = "resnet18";
  j.model_spec.name = "resnet18";
  j.batch = 256;
  j.dataset = "imagenette";
  Allocation a;
  a.gpu = &find_gpu("v100");
  a.cpus = 1;
  const double one_core = speed.iteration_s(j, a);
  a.cpus = 16;
  const double many = speed.iteration_s(j, a);
  EXPECT_GT(one_core, 2 * many);             // one core cannot decode 256 images as fast as a V100 trains
  EXPECT_EQ(speed.iteration_s(j, a), many);  // memoised
  const int best = speed.best_cpus(j, a, 24);
  EXPECT_GT(best, 1);
  EXPECT_LE(best, 24);
  // A node whose cores are slower per image (its decode_us) needs more of them.
  Allocation slow = a;
  slow.decode_us = 4000;
  slow.cpus = 3;
  EXPECT_GT(speed.iteration_s(j, slow), speed.iteration_s(j, Allocation{a.gpu, 1, 1, 3, 0}) * 1.5);
  EXPECT_GT(speed.best_cpus(j, slow, 24), best);
  j.dataset.clear();
  a.cpus = 1;
  const double gpu_only = speed.iteration_s(j, a);
  EXPECT_LE(gpu_only, many * 1.001);
}

// --fidelity iteration: every iteration of every job stepped by the engine,
// against the memoised speed per configuration.
TEST(Simulation, IterationFidelityStepsTheEngineAndAgreesWithTheSpeedWithinOnePercent) {
  const auto c = parse_cluster(
      R"({"nodes": [{"gpu": "v100", "gpus": 4, "cpus": 24}], "checkpoint_gib": 1, "storage_gb_per_s": 2})", "c.json");
  // Loader-bound jobs that cross epochs of Imagenette-10G (341 and 171 steps
  // an epoch), a job without loader; continuous LAS with rounds of 20 s
  // preempts and resumes them.
  const Trace t = parse_trace(
      "job,arrival_s,model,batch,gpus,iterations,dataset\n"
      "a,0,resnet18,128,2,500,imagenette10g\n"
      "b,10,resnet50,64,4,120,\n"
      "c,30,mobilenet_v2,128,2,400,imagenette10g\n",
      "t.csv", c);
  auto run = [&](Fidelity f) {
    JobSpeed speed;
    auto las = make_policy("las", las_queues({}));
    SimOptions o;
    o.round_s = 20;
    o.fidelity = f;
    return simulate(c, t, *las, o, speed);
  };
  const ClusterRun fast = run(Fidelity::Speed), stepped = run(Fidelity::Iteration);
  EXPECT_EQ(stepped.fidelity, "iteration");
  EXPECT_EQ(fast.engine_steps, 0);
  EXPECT_GE(stepped.engine_steps, 500 + 120 + 400);  // every iteration, at least once
  int preemptions = 0;
  for (std::size_t i = 0; i < t.jobs.size(); ++i) {
    SCOPED_TRACE(t.jobs[i].id);
    ASSERT_TRUE(fast.jobs[i].finished());
    ASSERT_TRUE(stepped.jobs[i].finished());
    EXPECT_NEAR(stepped.jobs[i].jct_s() / fast.jobs[i].jct_s(), 1, 0.01);
    EXPECT_EQ(stepped.jobs[i].preemptions, fast.jobs[i].preemptions);
    preemptions += stepped.jobs[i].preemptions;
  }
  EXPECT_GT(preemptions, 0);
  EXPECT_NEAR(stepped.mean_jct_s() / fast.mean_jct_s(), 1, 0.01);
  EXPECT_NE(stepped.mean_jct_s(), fast.mean_jct_s());  // the stepped run is its own figure

  // A job alone ends when the engine's run of its iterations does, exactly;
  // at the memoised speed, at iterations x that speed.
  const Trace one =
      parse_trace("job,arrival_s,model,batch,gpus,iterations,dataset\nx,5,resnet18,128,2,300,imagenette10g\n", "t.csv",
                  c);
  JobSpeed speed;
  auto fifo = make_policy("fifo");
  SimOptions o;
  o.round_s = 20;
  o.fidelity = Fidelity::Iteration;
  const ClusterRun alone = simulate(c, one, *fifo, o, speed);
  Allocation a{&find_gpu("v100"), 2, 1, 12, 0};
  EXPECT_DOUBLE_EQ(alone.jobs[0].finish_s, 20 + speed.step_ends(one.jobs[0], a, 300, 300).back());
  o.fidelity = Fidelity::Speed;
  EXPECT_DOUBLE_EQ(simulate(c, one, *fifo, o, speed).jobs[0].finish_s, 20 + 300 * speed.iteration_s(one.jobs[0], a));
  // A segment's longer run extends its shorter one (its lazy stepping relies on it).
  const std::vector<double> short_run = speed.step_ends(one.jobs[0], a, 100, 400);
  const std::vector<double> long_run = speed.step_ends(one.jobs[0], a, 400, 400);
  ASSERT_EQ(short_run.size(), 100u);
  EXPECT_EQ(short_run, std::vector<double>(long_run.begin(), long_run.begin() + 100));
  EXPECT_GT(std::abs(speed.step_ends(one.jobs[0], a, 300, 300).back() / (300 * speed.iteration_s(one.jobs[0], a)) - 1),
            1e-4);  // the two differ (the loader's first fill), so the first check tells them apart

  // Bad input: a large cluster, an unknown fidelity.
  const auto big = parse_cluster(R"({"nodes": [{"gpu": "v100", "gpus": 8, "count": 40}]})", "big.json");
  o.fidelity = Fidelity::Iteration;
  EXPECT_NE(error_of([&] {
              simulate(big, parse_trace(trace_csv(one), "t.csv", big), *fifo, o, speed);
            }).find("--fidelity iteration: the cluster has 320 GPUs"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_fidelity("exact"); }).find("--fidelity 'exact': unknown; accepted: speed"),
            std::string::npos);
}

TEST(Simulation, JsonIsByteIdenticalForTheSameInputs) {
  const auto c = parse_cluster(kCluster, "c.json");
  TraceOptions o;
  o.jobs = 30;
  o.seed = 7;
  o.jobs_per_hour = 20;
  o.models = {{"resnet18", 128, false}, {"alexnet", 128, false}};
  const Trace t = parse_trace(trace_csv(generate_trace(o)), "t.csv", c);
  SimOptions so;
  auto dump = [&] {
    JobSpeed speed;
    auto las = make_policy("las");
    return run_json(simulate(c, t, *las, so, speed)).dump();
  };
  const std::string a = dump();
  EXPECT_EQ(a, dump());
  JobSpeed speed;
  auto las = make_policy("las");
  const auto run = simulate(c, t, *las, so, speed);
  const std::string page = render_html_report(cluster_report(run));
  EXPECT_NE(page.find("30 jobs on 8 GPUs under las"), std::string::npos);
  EXPECT_NE(page.find("GPUs busy"), std::string::npos);
  EXPECT_NE(page.find("JCT of each job, shortest first"), std::string::npos);
  EXPECT_EQ(render_html_report(cluster_report(run)), page);
  const auto j = nlohmann::json::parse(a);
  EXPECT_EQ(j["summary"]["finished"], 30);
  EXPECT_GT(j["summary"]["mean_jct_s"].get<double>(), 0);
}

}  // namespace
}  // namespace gpemu::cluster
