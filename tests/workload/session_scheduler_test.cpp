// Jobs added while a session runs, from its own host threads (session.h):
// a scheduler in virtual time (an on_job_end observer, an at() action) adds
// jobs as it decides, and they run exactly (hand-computed times) and
// deterministically, as the same jobs added up front with the same arrivals.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/session.h"
#include "support/session_jobs.h"

namespace gpemu {
namespace {

using testing::fixed_job;
using testing::model_job;

struct SessionSchedulerTest : ::testing::Test {
  std::unique_ptr<CostModel> costs = make_cost_model(std::nullopt);
  static SessionSpec spec(int nodes, int gpus_per_node, std::string_view placement) {
    return testing::a100_session(nodes, gpus_per_node, placement);
  }
};

// A chain: when c0 ends, an on_job_end observer adds c1 (arriving 50 ms after
// c0's end); when c1 ends, c2 (arrival 0: now). A job bg queued on the one
// GPU meanwhile (first-fit) goes first. By hand: c0 runs 0-500 ms; bg,
// arrived at 100 ms, gets the GPU at 500 ms and runs 2 x 100 ms to 700 ms;
// c1, queued at 550 ms, runs 700-820 ms (4 x 30 ms, JCT 270 ms); c2 arrives
// at 820 ms and runs 3 x 20 ms to 880 ms.
TEST_F(SessionSchedulerTest, AnEndObserverAddsTheNextJobOfAChainAtTheTimesComputedByHand) {
  auto clock = make_virtual_clock();
  Session session(*clock, *costs, spec(1, 1, "first-fit"));
  const JobId c0 = session.add_job(fixed_job("c0", 100 * kMillisecond, 5, 0));
  const JobId bg = session.add_job(fixed_job("bg", 100 * kMillisecond, 2, 100 * kMillisecond));
  std::vector<JobId> added;
  std::vector<Time> added_at;
  session.on_job_end([&](Session& s, const JobOutcome& o) {
    if (o.name == "c0") {
      added_at.push_back(clock->now());
      added.push_back(s.add_job(fixed_job("c1", 30 * kMillisecond, 4, o.end + 50 * kMillisecond)));
    } else if (o.name == "c1") {
      added_at.push_back(clock->now());
      added.push_back(s.add_job(fixed_job("c2", 20 * kMillisecond, 3, 0)));
    }
  });
  session.run();
  ASSERT_EQ(added, (std::vector<JobId>{2, 3}));
  EXPECT_EQ(added_at, (std::vector<Time>{500 * kMillisecond, 820 * kMillisecond}));
  ASSERT_EQ(session.jobs(), 4u);
  struct Hand {
    JobId id;
    Time arrival, start, end;
  };
  for (const Hand& h :
       {Hand{c0, 0, 0, 500 * kMillisecond}, Hand{bg, 100 * kMillisecond, 500 * kMillisecond, 700 * kMillisecond},
        Hand{2, 550 * kMillisecond, 700 * kMillisecond, 820 * kMillisecond},
        Hand{3, 820 * kMillisecond, 820 * kMillisecond, 880 * kMillisecond}}) {
    const JobOutcome& o = session.outcome(h.id);
    ASSERT_EQ(o.state, JobState::Finished) << o.name << ": " << o.error;
    EXPECT_EQ(o.arrival, h.arrival) << o.name;
    EXPECT_EQ(o.start, h.start) << o.name;
    EXPECT_EQ(o.end, h.end) << o.name;
    EXPECT_EQ(o.jct(), h.end - h.arrival) << o.name;
    EXPECT_EQ(o.gpu, 0) << o.name;
    EXPECT_EQ(session.ended(h.id).set_at(), h.end) << o.name;  // its end event, at its end
  }
  EXPECT_EQ(session.outcome(2).jct(), 270 * kMillisecond);
}

// Model jobs sharing one GPU (mps, pinned): bg runs throughout while a chain
// is added by an end observer (c1 1 ms after c0's end, c2 at c1's end).
// Returns every job's outcome in id order.
std::vector<JobOutcome> chain_on_a_shared_gpu(const CostModel& costs, const std::vector<Time>* upfront_arrivals) {
  auto clock = make_virtual_clock();
  SessionSpec s;
  s.gpu = &find_gpu("A100-SXM4-40GB");
  s.share.policy = SharePolicy::Mps;
  Session session(*clock, costs, s);
  session.add_job(model_job("bg", 16, 8));
  session.add_job(model_job("c0", 8, 3));
  if (upfront_arrivals) {
    for (int k = 1; k <= 2; ++k) {
      SessionJob j = model_job("c" + std::to_string(k), 8, 3);
      j.arrival = (*upfront_arrivals)[static_cast<std::size_t>(k) + 1];  // ids: bg 0, c0 1, c1 2, c2 3
      session.add_job(std::move(j));
    }
  } else {
    session.on_job_end([](Session& s, const JobOutcome& o) {
      SessionJob j = model_job("", 8, 3);
      if (o.name == "c0") {
        j.name = "c1";
        j.arrival = o.end + kMillisecond;
      } else if (o.name == "c1") {
        j.name = "c2";  // arrival 0: now
      } else {
        return;
      }
      s.add_job(std::move(j));
    });
  }
  session.run();
  std::vector<JobOutcome> out;
  for (std::size_t i = 0; i < session.jobs(); ++i) out.push_back(session.take_outcome(static_cast<JobId>(i)));
  return out;
}

void expect_same_outcomes(const std::vector<JobOutcome>& a, const std::vector<JobOutcome>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const JobOutcome &x = a[i], &y = b[i];
    ASSERT_EQ(x.name, y.name);
    ASSERT_EQ(x.state, JobState::Finished) << x.name << ": " << x.error;
    ASSERT_EQ(y.state, JobState::Finished) << y.name << ": " << y.error;
    EXPECT_EQ(x.arrival, y.arrival) << x.name;
    EXPECT_EQ(x.start, y.start) << x.name;
    EXPECT_EQ(x.end, y.end) << x.name;
    EXPECT_EQ(x.gpus, y.gpus) << x.name;
    ASSERT_EQ(x.record->ranks.size(), y.record->ranks.size()) << x.name;
    for (std::size_t r = 0; r < x.record->ranks.size(); ++r) {
      const RankRecord &p = x.record->ranks[r], &q = y.record->ranks[r];
      EXPECT_EQ(p.iterations, q.iterations) << x.name;
      EXPECT_EQ(p.train.samples, q.train.samples) << x.name;
      EXPECT_EQ(p.compute_busy, q.compute_busy) << x.name;
      EXPECT_EQ(p.peak_allocated_bytes, q.peak_allocated_bytes) << x.name;
      EXPECT_EQ(p.peak_reserved_bytes, q.peak_reserved_bytes) << x.name;
    }
    ASSERT_EQ(x.record->steps.size(), y.record->steps.size()) << x.name;
    for (std::size_t k = 0; k < x.record->steps.size(); ++k)
      EXPECT_EQ(x.record->steps[k].step_end, y.record->steps[k].step_end) << x.name << " step " << k;
  }
}

// The chain added while it runs is the same as the same jobs added up front
// with the arrivals they got (start, end, iterations, kernels' time,
// allocator peaks, every step's end); and two runs are identical.
TEST_F(SessionSchedulerTest, JobsAddedWhileItRunsEqualTheSameJobsAddedUpFrontAndRunsRepeat) {
  const std::vector<JobOutcome> live = chain_on_a_shared_gpu(*costs, nullptr);
  ASSERT_EQ(live.size(), 4u);
  for (const JobOutcome& o : live) {
    ASSERT_EQ(o.state, JobState::Finished) << o.name << ": " << o.error;
    EXPECT_GT(o.record->ranks[0].peak_allocated_bytes, 0u) << o.name;
  }
  EXPECT_EQ(live[2].arrival, live[1].end + kMillisecond);  // c1: 1 ms after c0's end
  EXPECT_GE(live[3].arrival, live[2].end);                 // c2: at c1's end (its host thread's now)
  EXPECT_LT(live[3].start, live[0].end);                   // bg still ran: the GPU was shared
  std::vector<Time> arrivals;
  for (const JobOutcome& o : live) arrivals.push_back(o.arrival);
  expect_same_outcomes(live, chain_on_a_shared_gpu(*costs, &arrivals));
  expect_same_outcomes(live, chain_on_a_shared_gpu(*costs, nullptr));
}

// A data-parallel training job of `gpus` GPUs, no PCIe copies (the node's
// NVLink all-reduce is what it uses).
JobSpec ddp_job(int gpus, std::int64_t steps) {
  JobSpec s = testing::ddp_job(gpus, steps);
  s.compute.copy_batch = false;
  return s;
}

// An at(200 ms) action adds two jobs of 2 GPUs to a node of 4 (exclusive,
// first-fit) where u0 holds GPU 0 to 1 s and u1 GPU 1 to 300 ms: d0 gets
// GPUs 2-3 at once; d1 waits for two free GPUs and gets 1-2 when d0 ends.
// Each runs step for step as the same job alone, shifted to its start.
TEST_F(SessionSchedulerTest, AnActionAddsJobsOfTwoGpusPlacedFirstFit) {
  auto clock = make_virtual_clock();
  SessionSpec s = spec(1, 4, "first-fit");
  s.exclusive = true;
  Session session(*clock, *costs, s);
  const JobId u0 = session.add_job(fixed_job("u0", 100 * kMillisecond, 10, 0));
  const JobId u1 = session.add_job(fixed_job("u1", 100 * kMillisecond, 3, 0));
  JobId d0 = -1, d1 = -1;
  session.at(200 * kMillisecond, [&](Session& se) {
    d0 = se.add_job({.name = "d0", .job = ddp_job(2, 3)});
    d1 = se.add_job({.name = "d1", .job = ddp_job(2, 2)});
  });
  session.run();
  ASSERT_EQ(d0, 2);
  ASSERT_EQ(d1, 3);
  EXPECT_EQ(session.outcome(u0).end, kSecond);
  EXPECT_EQ(session.outcome(u1).end, 300 * kMillisecond);
  const JobOutcome &o0 = session.outcome(d0), &o1 = session.outcome(d1);
  for (const JobOutcome* o : {&o0, &o1}) ASSERT_EQ(o->state, JobState::Finished) << o->name << ": " << o->error;
  EXPECT_EQ(o0.arrival, 200 * kMillisecond);
  EXPECT_EQ(o0.start, 200 * kMillisecond);
  EXPECT_EQ(o0.gpus, (std::vector<int>{2, 3}));
  ASSERT_LT(o0.end, kSecond);  // d0 frees its GPUs before u0 ends
  EXPECT_EQ(o1.arrival, 200 * kMillisecond);
  EXPECT_EQ(o1.start, o0.end);
  EXPECT_EQ(o1.gpus, (std::vector<int>{1, 2}));
  for (const auto& [o, steps] : {std::pair{&o0, 3}, std::pair{&o1, 2}}) {
    auto alone_clock = make_virtual_clock();
    Job alone(*alone_clock, *costs, ddp_job(2, steps));
    const RunRecord ref = alone.run();
    const RunRecord& rec = *o->record;
    ASSERT_EQ(rec.gpus, 2) << o->name;
    EXPECT_GT(rec.all_reduces, 0u) << o->name;
    ASSERT_EQ(rec.steps.size(), ref.steps.size()) << o->name;
    for (std::size_t i = 0; i < rec.steps.size(); ++i)
      EXPECT_EQ(rec.steps[i].step_end - o->start, ref.steps[i].step_end) << o->name << " step " << i;
    EXPECT_EQ(o->end - o->start, summarize(ref).elapsed) << o->name;
  }
}

// A job of two nodes added by an action runs as the same job added up front
// with the same arrival (the session's network made while it runs).
TEST_F(SessionSchedulerTest, AnActionAddsAJobOfTwoNodesThatRunsAsAddedUpFront) {
  auto run = [&](bool live) {
    auto clock = make_virtual_clock();
    SessionSpec s = spec(2, 1, "first-fit");
    s.exclusive = true;
    s.network = network_preset("10gbe");
    Session session(*clock, *costs, s);
    session.add_job(fixed_job("u", 10 * kMillisecond, 3, 0));
    JobSpec wide = ddp_job(2, 3);
    wide.cluster.nodes = 2;
    if (live)
      session.at(50 * kMillisecond, [wide](Session& se) { se.add_job({.name = "w", .job = wide}); });
    else
      session.add_job({.name = "w", .job = wide, .arrival = 50 * kMillisecond});
    session.run();
    std::vector<JobOutcome> out;
    for (std::size_t i = 0; i < session.jobs(); ++i) out.push_back(session.take_outcome(static_cast<JobId>(i)));
    return out;
  };
  const std::vector<JobOutcome> live = run(true);
  ASSERT_EQ(live.size(), 2u);
  ASSERT_EQ(live[1].state, JobState::Finished) << live[1].error;
  EXPECT_EQ(live[1].start, 50 * kMillisecond);
  EXPECT_EQ(live[1].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(live[1].record->nodes, 2);
  EXPECT_GT(live[1].record->all_reduces, 0u);
  expect_same_outcomes(live, run(false));
}

// Under the virtual clock only the session's host threads add jobs while it
// runs: a thread an action starts itself is refused with one line saying
// where jobs may be added, as is the caller once run() returned. Under the
// real clock an action of a session that is not open adds a job too, and
// run() returns once it has ended.
TEST_F(SessionSchedulerTest, OnlyTheSessionsHostThreadsAddJobsWhileItRuns) {
  auto clock = make_virtual_clock();
  Session session(*clock, *costs, spec(1, 1, "first-fit"));
  session.add_job(fixed_job("a", 10 * kMillisecond, 3, 0));
  std::string refused;
  session.at(5 * kMillisecond, [&](Session& s) {
    std::thread([&] {
      try {
        s.add_job(fixed_job("foreign", kMillisecond, 1, 0));
      } catch (const std::logic_error& e) {
        refused = e.what();
      }
    }).join();
  });
  session.run();
  EXPECT_NE(refused.find("not one of its host threads"), std::string::npos) << refused;
  EXPECT_NE(refused.find("at() action"), std::string::npos) << refused;
  EXPECT_EQ(refused.find('\n'), std::string::npos) << refused;
  EXPECT_EQ(session.jobs(), 1u);
  EXPECT_THROW(session.add_job(fixed_job("late", kMillisecond, 1, 0)), std::logic_error);

  auto real = make_real_clock();
  Session on_real(*real, *costs, spec(1, 1, "first-fit"));
  on_real.add_job(fixed_job("a", kMillisecond, 2, 0));
  on_real.at(kMillisecond, [](Session& s) { s.add_job(fixed_job("b", kMillisecond, 2, 0)); });
  on_real.run();
  ASSERT_EQ(on_real.jobs(), 2u);
  EXPECT_TRUE(on_real.ended(1).is_set());
  EXPECT_EQ(on_real.outcome(1).state, JobState::Finished) << on_real.outcome(1).error;
  EXPECT_GE(on_real.outcome(1).arrival, kMillisecond);
}

}  // namespace
}  // namespace gpemu
