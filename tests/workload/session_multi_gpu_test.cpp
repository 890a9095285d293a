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
#include "gpemu/pipeline/storage_model.h"
#include "gpemu/session.h"
#include "support/session_jobs.h"

namespace gpemu {
namespace {

using testing::ddp_job;

// The same job on a node of its own (Job builds it) under a clock of its own.
RunRecord alone(const CostModel& costs, JobSpec spec) {
  auto clock = make_virtual_clock();
  Job job(*clock, costs, std::move(spec));
  return job.run();
}

struct SessionMultiGpuTest : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  std::unique_ptr<CostModel> costs = make_cost_model(std::nullopt);
  static SessionSpec spec(int nodes, int gpus_per_node, std::string_view placement) {
    return testing::a100_session(nodes, gpus_per_node, placement);
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
  // Of two nodes: as many free ones on each, the lowest nodes first.
  EXPECT_EQ(free_gpus_of_nodes({.gpus = 2, .nodes = 2}, loads), (std::vector<int>{0, 2}));
  EXPECT_TRUE(free_gpus_of_nodes({.gpus = 4, .nodes = 2}, loads).empty());  // node 0 has one free
  // A preempted job of several GPUs wants its own back, and waits while one is busy.
  const std::vector<GpuLoad> one_busy = {{0, 0, 0}, {1, 0, 1}, {2, 0, 0}};
  EXPECT_EQ(free_gpus_of_one_node({.gpu = 0, .gpus = 2, .want = {0, 2}}, one_busy), (std::vector<int>{0, 2}));
  EXPECT_TRUE(free_gpus_of_one_node({.gpu = 0, .gpus = 2, .want = {0, 1}}, loads).empty());
  EXPECT_EQ(placement_policy("first-fit")->place_gpus({.gpu = 0, .gpus = 2, .want = {2, 3}}, loads),
            (std::vector<int>{2, 3}));
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

// A job of `gpus` GPUs whose every rank runs `steps` steps of `step` of GPU
// time and nothing else (no all-reduce, copies or memory): exactly steps x
// step once started.
SessionJob fixed_job(std::string name, int gpus, Duration step, std::int64_t steps) {
  return gpemu::testing::fixed_job(std::move(name), step, steps, 0, gpus);
}

// A job of two GPUs pauses as one: both ranks stop before the same step and
// keep their GPUs, so a job waiting for two GPUs waits for its end.
TEST_F(SessionMultiGpuTest, AJobOfTwoGpusPausesAsOneAndKeepsItsGpus) {
  SessionSpec s = spec(1, 2, "first-fit");
  s.exclusive = true;
  Session session(*clock, *costs, s);
  const JobId a = session.add_job(fixed_job("a", 2, 100 * kMillisecond, 10));
  const JobId b = session.add_job(fixed_job("b", 2, 100 * kMillisecond, 5));
  session.at(250 * kMillisecond, [a](Session& s) { s.pause(a); });
  session.at(1000 * kMillisecond, [a](Session& s) {
    EXPECT_EQ(s.state(a), JobState::Paused);
    s.resume(a);
  });
  session.run();
  const JobOutcome& oa = session.outcome(a);
  ASSERT_EQ(oa.state, JobState::Finished) << oa.error;
  ASSERT_EQ(oa.pauses.size(), 1u);
  EXPECT_FALSE(oa.pauses[0].preempted);
  EXPECT_EQ(oa.pauses[0].from, 300 * kMillisecond);  // both ranks ended step 3
  EXPECT_EQ(oa.pauses[0].to, 1000 * kMillisecond);
  EXPECT_EQ(oa.end, 1700 * kMillisecond);  // 7 steps after the resume
  for (const RankRecord& r : oa.record->ranks) EXPECT_EQ(r.iterations, 10) << "GPU " << r.gpu;
  EXPECT_EQ(session.outcome(b).start, 1700 * kMillisecond);
  EXPECT_EQ(session.outcome(b).end, 2200 * kMillisecond);
}

// Preempted, a job of two GPUs drains both, writes its checkpoint once
// through the session's storage (behind another job's), frees both GPUs and,
// resumed, waits for them, reads the checkpoint once and goes on. By hand,
// storage 1 ms + 100 MB at 1 GB/s = 101 ms a request, one at a time:
//   c (1 GPU, GPU 2) preempted at 250 ms: stops at 300, writes 300-401, frees GPU 2 at 401;
//   a (GPUs 0-1) preempted at 350 ms: stops at 400, writes 401-502 (after c's), frees 0-1 at 502;
//   b (2 GPUs) waited for two free GPUs: 2-3 at 401, runs 5 steps to 901;
//   resumed at 600: a gets 0-1 at once, reads 600-701, restores 20 ms, 6 steps: 721 to 1321;
//   c waits for GPU 2 (b's) until 901, reads 901-1002, 7 steps: 1002 to 1702.
TEST_F(SessionMultiGpuTest, APreemptedJobOfTwoGpusWritesOneCheckpointThroughTheSessionsStorage) {
  SessionSpec s = spec(1, 4, "first-fit");
  s.exclusive = true;
  pipeline::StorageDevice disk;
  disk.name = "disk";
  disk.latency = kMillisecond;
  disk.bytes_per_s = 1e9;
  s.checkpoint_storage = disk;
  Session session(*clock, *costs, s);
  SessionJob ja = fixed_job("a", 2, 100 * kMillisecond, 10);
  ja.checkpoint_bytes = 100'000'000;
  ja.checkpoint_restore = 20 * kMillisecond;
  SessionJob jc = fixed_job("c", 1, 100 * kMillisecond, 10);
  jc.checkpoint_bytes = 100'000'000;
  const JobId a = session.add_job(std::move(ja));
  const JobId c = session.add_job(std::move(jc));
  const JobId b = session.add_job(fixed_job("b", 2, 100 * kMillisecond, 5));
  session.at(250 * kMillisecond, [c](Session& s) { s.preempt(c); });
  session.at(350 * kMillisecond, [a](Session& s) { s.preempt(a); });
  session.at(450 * kMillisecond, [a, c](Session& s) {
    EXPECT_EQ(s.state(a), JobState::Preempted);
    EXPECT_EQ(s.state(c), JobState::Preempted);
  });
  session.at(600 * kMillisecond, [a, c](Session& s) {
    s.resume(a);
    s.resume(c);
  });
  session.run();
  const JobOutcome &oa = session.outcome(a), &ob = session.outcome(b), &oc = session.outcome(c);
  for (const JobOutcome* o : {&oa, &ob, &oc}) ASSERT_EQ(o->state, JobState::Finished) << o->name << ": " << o->error;
  EXPECT_EQ(oa.gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(oc.gpus, (std::vector<int>{2}));
  EXPECT_EQ(ob.gpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(ob.start, 401 * kMillisecond);
  EXPECT_EQ(ob.end, 901 * kMillisecond);
  ASSERT_EQ(oc.pauses.size(), 1u);
  EXPECT_TRUE(oc.pauses[0].preempted);
  EXPECT_EQ(oc.pauses[0].from, 300 * kMillisecond);
  EXPECT_EQ(oc.pauses[0].to, 1002 * kMillisecond);
  EXPECT_EQ(oc.end, 1702 * kMillisecond);
  ASSERT_EQ(oa.pauses.size(), 1u);
  EXPECT_TRUE(oa.pauses[0].preempted);
  EXPECT_EQ(oa.pauses[0].from, 400 * kMillisecond);
  EXPECT_EQ(oa.pauses[0].to, 721 * kMillisecond);
  EXPECT_EQ(oa.end, 1321 * kMillisecond);
  for (const RankRecord& r : oa.record->ranks) EXPECT_EQ(r.iterations, 10) << "GPU " << r.gpu;
}

// A data-parallel job (all-reduce over the node's links) preempted gives
// every GPU's memory back and, resumed, allocates its state on every GPU
// again; every rank stops before the same step and runs its steps to the end.
TEST_F(SessionMultiGpuTest, APreemptedDdpJobFreesAndRestoresTheMemoryOfEveryGpu) {
  SessionSpec s = spec(1, 2, "first-fit");
  s.exclusive = true;
  Session session(*clock, *costs, s);
  Job* job = nullptr;
  SessionJob j{.name = "ddp", .job = ddp_job(2, 6)};
  j.checkpoint_save = 10 * kMillisecond;
  j.on_start = [&job](Job& started) { job = &started; };
  const JobId id = session.add_job(std::move(j));
  const Duration step = summarize(alone(*costs, ddp_job(2, 6))).elapsed / 6;
  std::vector<std::uint64_t> running(2), preempted(2);
  session.at(2 * step + step / 2, [&](Session& s) {
    for (int g = 0; g < 2; ++g) running[g] = job->device(g).allocator().stats().allocated_bytes;
    s.preempt(id);
  });
  session.at(20 * step, [&](Session& s) {
    EXPECT_EQ(s.state(id), JobState::Preempted);
    for (int g = 0; g < 2; ++g) preempted[g] = job->device(g).allocator().stats().reserved_bytes;
    s.resume(id);
  });
  std::vector<std::uint64_t> restarted(2);
  session.at(20 * step + step / 2, [&](Session&) {
    for (int g = 0; g < 2; ++g) restarted[g] = job->device(g).allocator().stats().allocated_bytes;
  });
  session.run();
  const JobOutcome& o = session.outcome(id);
  ASSERT_EQ(o.state, JobState::Finished) << o.error;
  ASSERT_EQ(o.pauses.size(), 1u);
  const JobPause& p = o.pauses[0];
  // Its ranks are alike: after the restart each GPU holds what the other does.
  EXPECT_GT(restarted[0], 0u);
  EXPECT_EQ(restarted[1], restarted[0]);
  for (int g = 0; g < 2; ++g) {
    EXPECT_GT(running[g], 0u) << "GPU " << g;
    EXPECT_EQ(preempted[g], 0u) << "GPU " << g;  // tensors and cached segments given back
    EXPECT_EQ(o.record->ranks[g].iterations, 6) << "GPU " << g;
  }
  // Each rank: the steps before the stop ended before it, the ones after started after it.
  std::int64_t before = -1;
  for (int g = 0; g < 2; ++g) {
    std::int64_t n = 0;
    for (const StepRecord& st : o.record->steps) {
      if (st.gpu != g || st.phase != RunPhase::Train) continue;
      if (st.next_called < p.from) {
        ++n;
        EXPECT_LE(st.step_end, p.from) << "GPU " << g << " step " << st.iteration;
      } else {
        EXPECT_GE(st.next_called, p.to) << "GPU " << g << " step " << st.iteration;
      }
    }
    if (before >= 0) {
      EXPECT_EQ(n, before);  // both ranks stopped before the same step
    }
    before = n;
  }
  EXPECT_GE(before, 2);
  EXPECT_EQ(p.to, 20 * step);
  // The restored state on every GPU is as before: the peaks equal those of the job alone.
  const RunRecord ref = alone(*costs, ddp_job(2, 6));
  for (int g = 0; g < 2; ++g)
    EXPECT_EQ(o.record->ranks[g].peak_allocated_bytes, ref.ranks[g].peak_allocated_bytes) << "GPU " << g;
}

// Jobs of two nodes on a session of two nodes of two GPUs (first-fit: a gets
// GPU 0 of each node, b GPU 1 of each) all-reduce over the session's
// network. With one NIC a node they share it (and the switch): each is
// slower than alone on the session. With two NICs a node, GPU 1's rail
// sends on NIC 1 and the non-blocking switch has room for both: each runs
// step for step as alone, as the model's max-min sharing says by hand.
TEST_F(SessionMultiGpuTest, JobsOfTwoNodesShareTheSessionsNetworkWhereTheirLinksMeet) {
  auto two_nodes = [](std::int64_t steps) {
    JobSpec j = ddp_job(2, steps);
    j.cluster.nodes = 2;
    j.compute.copy_batch = false;  // no PCIe copies: the network is what they could share
    return j;
  };
  for (const int nics : {1, 2}) {
    auto run = [&](bool both) {
      auto clk = make_virtual_clock();
      SessionSpec s = spec(2, 2, "first-fit");
      s.exclusive = true;
      s.network = network_preset("10gbe");
      s.network.nics_per_node = nics;
      Session session(*clk, *costs, s);
      session.add_job({.name = "a", .job = two_nodes(4)});
      if (both) session.add_job({.name = "b", .job = two_nodes(4)});
      session.run();
      std::vector<JobOutcome> out;
      for (std::size_t i = 0; i < session.jobs(); ++i) out.push_back(session.outcome(static_cast<JobId>(i)));
      return out;
    };
    const std::vector<JobOutcome> alone = run(false), both = run(true);
    ASSERT_EQ(alone[0].state, JobState::Finished) << alone[0].error;
    EXPECT_EQ(alone[0].gpus, (std::vector<int>{0, 2}));
    EXPECT_EQ(alone[0].record->nodes, 2);
    EXPECT_EQ(alone[0].record->network, "10gbe");
    EXPECT_GT(alone[0].record->all_reduces, 0u);
    ASSERT_EQ(both.size(), 2u);
    for (const JobOutcome& o : both) ASSERT_EQ(o.state, JobState::Finished) << o.name << ": " << o.error;
    EXPECT_EQ(both[1].gpus, (std::vector<int>{1, 3}));
    for (const JobOutcome& o : both) {
      if (nics == 1) {
        EXPECT_GT(o.end, alone[0].end) << o.name;
        continue;
      }
      EXPECT_EQ(o.end, alone[0].end) << o.name;
      ASSERT_EQ(o.record->steps.size(), alone[0].record->steps.size()) << o.name;
      for (std::size_t i = 0; i < o.record->steps.size(); ++i)
        EXPECT_EQ(o.record->steps[i].all_reduce_end, alone[0].record->steps[i].all_reduce_end) << o.name << i;
    }
  }
  // A job of two nodes is preempted and resumed as one: back on its own GPUs, every rank's steps run.
  {
    auto clk = make_virtual_clock();
    SessionSpec s = spec(2, 2, "first-fit");
    s.exclusive = true;
    s.network = network_preset("10gbe");
    Session session(*clk, *costs, s);
    const JobId id = session.add_job({.name = "a", .job = two_nodes(6), .checkpoint_save = kMillisecond});
    session.at(kMillisecond, [id](Session& s) { s.preempt(id); });
    session.at(10 * kSecond, [id](Session& s) {
      EXPECT_EQ(s.state(id), JobState::Preempted);
      s.resume(id);
    });
    session.run();
    const JobOutcome& o = session.outcome(id);
    ASSERT_EQ(o.state, JobState::Finished) << o.error;
    EXPECT_EQ(o.gpus, (std::vector<int>{0, 2}));
    ASSERT_EQ(o.pauses.size(), 1u);
    EXPECT_TRUE(o.pauses[0].preempted);
    EXPECT_EQ(o.pauses[0].to, 10 * kSecond);
    for (const RankRecord& r : o.record->ranks) EXPECT_EQ(r.iterations, 6) << "GPU " << r.gpu;
  }
  // Several nodes need a policy that divides kernels on shared GPUs, no more nodes than the
  // session has, as many GPUs on each, a network.
  auto clk = make_virtual_clock();
  Session shared(*clk, *costs, spec(2, 2, "first-fit"));  // fifo
  try {
    shared.add_job({.name = "x", .job = two_nodes(1)});
    ADD_FAILURE() << "a job of two nodes on fifo-shared GPUs was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fifo"), std::string::npos) << e.what();
  }
  SessionSpec s = spec(2, 2, "first-fit");
  s.exclusive = true;
  Session exclusive(*clk, *costs, s);  // no network given
  EXPECT_THROW(exclusive.add_job({.name = "y", .job = two_nodes(1)}), InputError);
  JobSpec three = two_nodes(1);
  three.cluster.gpus = 3;
  EXPECT_THROW(exclusive.add_job({.name = "z", .job = three}), InputError);
}

// Jobs of two nodes on GPUs the session shares (mps): each rank's Device is
// a view of its node's SharedGpu, and its all-reduce crosses the session's
// network (10gbe). Alone on the shared session a job runs step for step as
// on an exclusive one. Two such jobs on the same GPUs (pinned) share each
// GPU: its memory holds both jobs' (twice one job's peak), and each runs
// slower than alone and than on GPUs of its own behind the same NIC, the
// later no faster than one GPU doing both jobs' kernels back to back. On
// GPUs of their own (first-fit, 2 GPUs and 2 NICs a node) each runs as alone.
// Jobs of two nodes that move no bytes share their GPUs too.
TEST_F(SessionMultiGpuTest, JobsOfTwoNodesRunOnSharedGpusAsOnExclusiveOnesAndShareThem) {
  JobSpec wide = ddp_job(2, 4);
  wide.cluster.nodes = 2;
  wide.compute.copy_batch = false;
  struct Run {
    std::vector<JobOutcome> jobs;
    std::vector<std::uint64_t> peak_used;  // each shared GPU's memory
  };
  auto run = [&](bool exclusive, std::string_view placement, int gpus_per_node, int jobs, int nics = 0) {
    auto clk = make_virtual_clock();
    SessionSpec s = spec(2, gpus_per_node, placement);
    s.exclusive = exclusive;
    s.share.policy = SharePolicy::Mps;
    s.network = network_preset("10gbe");
    s.network.nics_per_node = nics > 0 ? nics : gpus_per_node;
    Session session(*clk, *costs, s);
    for (int i = 0; i < jobs; ++i) session.add_job({.name = "j" + std::to_string(i), .job = wide});
    session.run();
    Run out;
    for (std::size_t i = 0; i < session.jobs(); ++i) out.jobs.push_back(session.take_outcome(static_cast<JobId>(i)));
    for (const JobOutcome& o : out.jobs) EXPECT_EQ(o.state, JobState::Finished) << o.name << ": " << o.error;
    for (int g = 0; g < session.gpus() && !exclusive; ++g) out.peak_used.push_back(session.gpu(g).memory().peak_used());
    return out;
  };
  auto same = [](const JobOutcome& a, const JobOutcome& b, const std::string& what) {
    EXPECT_EQ(a.end - a.start, b.end - b.start) << what;
    ASSERT_EQ(a.record->steps.size(), b.record->steps.size()) << what;
    for (std::size_t i = 0; i < a.record->steps.size(); ++i) {
      EXPECT_EQ(a.record->steps[i].step_end - a.start, b.record->steps[i].step_end - b.start) << what << i;
      EXPECT_EQ(a.record->steps[i].all_reduce_end - a.start, b.record->steps[i].all_reduce_end - b.start) << what << i;
    }
    for (std::size_t r = 0; r < a.record->ranks.size(); ++r) {
      EXPECT_EQ(a.record->ranks[r].compute_busy, b.record->ranks[r].compute_busy) << what << r;
      EXPECT_EQ(a.record->ranks[r].peak_allocated_bytes, b.record->ranks[r].peak_allocated_bytes) << what << r;
    }
  };
  const Run exclusive = run(true, "first-fit", 1, 1), lone = run(false, "pinned", 1, 1);
  ASSERT_TRUE(exclusive.jobs[0].record && lone.jobs[0].record);
  const JobOutcome& one = lone.jobs[0];
  EXPECT_EQ(one.gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(one.record->nodes, 2);
  EXPECT_GT(one.record->all_reduces, 0u);
  same(one, exclusive.jobs[0], "lone on shared GPUs vs exclusive ");
  ASSERT_EQ(lone.peak_used.size(), 2u);
  EXPECT_GT(lone.peak_used[0], 0u);  // its ranks' memory is the shared GPUs'

  const Run both = run(false, "pinned", 1, 2);
  ASSERT_TRUE(both.jobs[0].record && both.jobs[1].record);
  for (int g = 0; g < 2; ++g) EXPECT_EQ(both.peak_used[g], 2 * lone.peak_used[g]) << "GPU " << g;
  for (const JobOutcome& o : both.jobs) {
    EXPECT_EQ(o.gpus, (std::vector<int>{0, 1})) << o.name;
    EXPECT_EQ(o.start, 0) << o.name;
    EXPECT_GT(o.end, one.end) << o.name;
  }
  const Run one_nic = run(false, "first-fit", 2, 2, 1);  // GPUs of their own, one NIC a node
  for (int i = 0; i < 2; ++i) EXPECT_GT(both.jobs[i].end, one_nic.jobs[i].end) << both.jobs[i].name;
  const Time last = std::max(both.jobs[0].end, both.jobs[1].end);
  for (int r = 0; r < 2; ++r)
    EXPECT_GE(last, both.jobs[0].record->ranks[r].compute_busy + both.jobs[1].record->ranks[r].compute_busy)
        << "GPU " << r;

  const Run apart = run(false, "first-fit", 2, 2), alone = run(false, "first-fit", 2, 1);
  ASSERT_TRUE(apart.jobs[0].record && apart.jobs[1].record && alone.jobs[0].record);
  EXPECT_EQ(apart.jobs[0].gpus, (std::vector<int>{0, 2}));
  EXPECT_EQ(apart.jobs[1].gpus, (std::vector<int>{1, 3}));
  for (const JobOutcome& o : apart.jobs) same(o, alone.jobs[0], o.name + " on GPUs of its own vs alone ");

  // Jobs of two nodes that move no bytes (fixed steps: no links, no network)
  // share their GPUs too: two on the same GPUs under fifo keep each GPU busy
  // with one step at a time, so the last ends after both jobs' 3 steps of
  // 10 ms, at 60 ms; alone one would end at 30 ms.
  auto clk = make_virtual_clock();
  Session fixed(*clk, *costs, spec(2, 1, "pinned"));  // fifo
  for (const char* name : {"f0", "f1"}) {
    SessionJob j = fixed_job(name, 2, 10 * kMillisecond, 3);
    j.job.cluster.nodes = 2;
    fixed.add_job(std::move(j));
  }
  fixed.run();
  for (JobId id : {0, 1}) {
    ASSERT_EQ(fixed.outcome(id).state, JobState::Finished) << fixed.outcome(id).error;
    EXPECT_EQ(fixed.outcome(id).gpus, (std::vector<int>{0, 1}));
    EXPECT_GE(fixed.outcome(id).end, 30 * kMillisecond);
  }
  EXPECT_EQ(std::max(fixed.outcome(0).end, fixed.outcome(1).end), 60 * kMillisecond);
}

}  // namespace
}  // namespace gpemu
