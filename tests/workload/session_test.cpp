// The session (session.h): jobs added over time to GPUs that outlive them,
// placed by a policy, paused, preempted and resumed, and ending with events
// others wait on; every time checked against a hand computation under the
// virtual clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
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

struct SessionTest : ::testing::Test {
  std::unique_ptr<Clock> clock = make_virtual_clock();
  std::unique_ptr<CostModel> costs = make_cost_model(std::nullopt);
  SessionSpec spec(int gpus, std::string_view placement) {
    SessionSpec s;
    s.gpu = &find_gpu("A100-SXM4-40GB");
    s.gpus_per_node = gpus;
    s.placement = placement_policy(placement);
    return s;
  }
};

// A thousand jobs arrive over time at one session of 64 GPUs (8 nodes of 8),
// each given a GPU of its own in the order it arrived (first-fit). By hand:
// job i starts at max(its arrival, the earliest time a GPU is free after the
// jobs before it have started), ends steps x step later; its JCT is end -
// arrival. No GPU runs two jobs at once.
TEST_F(SessionTest, AThousandJobsOnSixtyFourGpusStartEndAndJctAsComputedByHand) {
  SessionSpec s = spec(8, "first-fit");
  s.nodes = 8;
  Session session(*clock, *costs, s);
  ASSERT_EQ(session.gpus(), 64);
  constexpr int kJobs = 1000;
  struct Hand {
    Time arrival, start, end;
  };
  std::vector<Hand> hand;
  std::vector<Time> gpu_free(64, 0);  // when each GPU is next free, by hand
  std::uint64_t x = 12345;
  Time arrival = 0;
  for (int i = 0; i < kJobs; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;  // a fixed LCG: varied, reproducible jobs
    const Duration step = (1 + static_cast<Duration>((x >> 33) % 50)) * kMillisecond;
    const std::int64_t steps = 1 + static_cast<std::int64_t>((x >> 20) % 40);
    arrival += static_cast<Duration>((x >> 45) % 10) * kMillisecond;  // faster than the GPUs serve: a queue
    session.add_job(fixed_job("job" + std::to_string(i), step, steps, arrival));
    auto earliest = std::min_element(gpu_free.begin(), gpu_free.end());
    const Time start = std::max(arrival, *earliest);
    const Time end = start + steps * step;
    *earliest = end;
    hand.push_back({arrival, start, end});
  }
  session.run();
  std::map<int, std::vector<std::pair<Time, Time>>> on_gpu;
  for (int i = 0; i < kJobs; ++i) {
    const JobOutcome& o = session.outcome(i);
    ASSERT_EQ(o.state, JobState::Finished) << o.name << ": " << o.error;
    EXPECT_EQ(o.arrival, hand[i].arrival) << o.name;
    EXPECT_EQ(o.start, hand[i].start) << o.name;
    EXPECT_EQ(o.end, hand[i].end) << o.name;
    EXPECT_EQ(o.jct(), hand[i].end - hand[i].arrival) << o.name;
    ASSERT_GE(o.gpu, 0);
    on_gpu[o.gpu].emplace_back(o.start, o.end);
  }
  for (auto& [g, spans] : on_gpu) {
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k) EXPECT_LE(spans[k - 1].second, spans[k].first) << "GPU " << g;
  }
  // The queue was long at times: some job waited, so placement was exercised.
  EXPECT_TRUE(std::any_of(hand.begin(), hand.end(), [](const Hand& h) { return h.start > h.arrival; }));
}

// A pause takes effect at the next step boundary and holds the GPU; the job
// goes on from there when resumed.
TEST_F(SessionTest, APausedJobStopsBetweenStepsAndGoesOnWhenResumed) {
  Session session(*clock, *costs, spec(1, "first-fit"));
  const JobId a = session.add_job(fixed_job("a", 100 * kMillisecond, 10, 0));
  const JobId b = session.add_job(fixed_job("b", 100 * kMillisecond, 5, 0));
  session.at(250 * kMillisecond, [a](Session& s) { s.pause(a); });
  session.at(1000 * kMillisecond, [a](Session& s) {
    EXPECT_EQ(s.state(a), JobState::Paused);
    s.resume(a);
  });
  session.run();
  const JobOutcome& oa = session.outcome(a);
  ASSERT_EQ(oa.pauses.size(), 1u);
  EXPECT_EQ(oa.pauses[0].from, 300 * kMillisecond);  // the end of its third step
  EXPECT_EQ(oa.pauses[0].to, 1000 * kMillisecond);
  EXPECT_FALSE(oa.pauses[0].preempted);
  EXPECT_EQ(oa.end, 1700 * kMillisecond);  // 7 steps after the resume
  // b waited for the GPU all along: a paused job keeps it.
  EXPECT_EQ(session.outcome(b).start, 1700 * kMillisecond);
  EXPECT_EQ(session.outcome(b).end, 2200 * kMillisecond);
}

// A preemption drains the GPU, writes the checkpoint and leaves the GPU to
// the queue; resumed, the job waits for its GPU, reads its checkpoint and goes on.
TEST_F(SessionTest, APreemptedJobPaysItsCheckpointAndGivesItsGpuToTheQueue) {
  Session session(*clock, *costs, spec(1, "first-fit"));
  SessionJob ja = fixed_job("a", 100 * kMillisecond, 10, 0);
  ja.checkpoint_save = 50 * kMillisecond;
  ja.checkpoint_restore = 20 * kMillisecond;
  const JobId a = session.add_job(std::move(ja));
  const JobId b = session.add_job(fixed_job("b", 100 * kMillisecond, 5, 0));
  session.at(250 * kMillisecond, [a](Session& s) { s.preempt(a); });
  session.at(400 * kMillisecond, [a](Session& s) {
    EXPECT_EQ(s.state(a), JobState::Preempted);
    s.resume(a);
  });
  session.run();
  const JobOutcome& oa = session.outcome(a);
  const JobOutcome& ob = session.outcome(b);
  // a: 3 steps (0.3 s), checkpoint written by 0.35 s; b runs 0.35 to 0.85 s;
  // a gets its GPU back at 0.85 s, reads 20 ms, runs its 7 steps left.
  EXPECT_EQ(ob.start, 350 * kMillisecond);
  EXPECT_EQ(ob.end, 850 * kMillisecond);
  ASSERT_EQ(oa.pauses.size(), 1u);
  EXPECT_TRUE(oa.pauses[0].preempted);
  EXPECT_EQ(oa.pauses[0].from, 300 * kMillisecond);
  EXPECT_EQ(oa.pauses[0].to, 870 * kMillisecond);
  EXPECT_EQ(oa.end, 1570 * kMillisecond);
  EXPECT_EQ(oa.record->ranks.front().iterations, 10);
}

// A job queued after another starts its delay at that job's end, to the
// nanosecond, however short the delay (an event, not a poll); a host thread
// of the session can wait on a job's end too.
TEST_F(SessionTest, AJobAfterAnotherStartsAtItsEndPlusTheDelayExactly) {
  Session session(*clock, *costs, spec(2, "pinned"));
  const JobId a = session.add_job(fixed_job("a", 7 * kMillisecond, 3, 5));
  SessionJob jb = fixed_job("b", kMillisecond, 2, 1);  // 1 ns after a's end
  jb.after = a;
  jb.gpu = 1;
  const JobId b = session.add_job(std::move(jb));
  Time seen = -1;
  session.at(0, [&](Session& s) {
    s.ended(b).wait();
    seen = s.clock().now();
  });
  // A scheduler's hook hears each end, as it happens, before the end event is set.
  std::vector<std::pair<std::string, Time>> ends;
  session.on_job_end([&](Session& s, const JobOutcome& o) {
    EXPECT_EQ(o.state, JobState::Finished);
    EXPECT_FALSE(s.ended(o.id).is_set());
    ends.emplace_back(o.name, s.clock().now());
  });
  session.run();
  EXPECT_EQ(ends, (std::vector<std::pair<std::string, Time>>{{"a", 5 + 21 * kMillisecond},
                                                             {"b", 5 + 23 * kMillisecond + 1}}));
  EXPECT_EQ(session.outcome(a).end, 5 + 21 * kMillisecond);
  EXPECT_EQ(session.outcome(b).arrival, 5 + 21 * kMillisecond + 1);
  EXPECT_EQ(session.outcome(b).end, 5 + 23 * kMillisecond + 1);
  EXPECT_EQ(seen, session.outcome(b).end);
  EXPECT_EQ(session.ended(b).set_at(), session.outcome(b).end);
}

// A job paused and never resumed cannot end: the run says so instead of hanging.
TEST_F(SessionTest, APauseNobodyResumesEndsTheJobWithAnErrorNotAHang) {
  Session session(*clock, *costs, spec(1, "pinned"));
  const JobId a = session.add_job(fixed_job("a", kMillisecond, 10, 0));
  session.at(kMillisecond / 2, [a](Session& s) { s.pause(a); });
  session.run();
  EXPECT_EQ(session.outcome(a).state, JobState::Failed);
  EXPECT_NE(session.outcome(a).error.find("no thread is left"), std::string::npos) << session.outcome(a).error;
}

// A placement policy of the caller's own (one class); one that never places a
// job leaves it failed, saying so, once nothing else can run.
class OnlyGpuZero final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "only-gpu-0"; }
  int place(const PlacementRequest& job, std::span<const GpuLoad> gpus) const override {
    return job.gpu == 1 ? -1 : (gpus[0].jobs == 0 ? 0 : -1);
  }
};

TEST_F(SessionTest, ACallersPlacementPolicyDecidesAndAJobItNeverPlacesFailsSayingSo) {
  SessionSpec s = spec(2, "pinned");
  s.placement = std::make_shared<OnlyGpuZero>();
  Session session(*clock, *costs, s);
  const JobId a = session.add_job(fixed_job("a", kMillisecond, 3, 0));
  const JobId b = session.add_job(fixed_job("b", kMillisecond, 2, 0));
  SessionJob jc = fixed_job("c", kMillisecond, 2, 0);
  jc.gpu = 1;
  const JobId c = session.add_job(std::move(jc));
  session.run();
  EXPECT_EQ(session.outcome(a).end, 3 * kMillisecond);
  EXPECT_EQ(session.outcome(b).start, 3 * kMillisecond);  // GPU 0 only, one job at a time
  EXPECT_EQ(session.outcome(b).end, 5 * kMillisecond);
  EXPECT_EQ(session.outcome(c).state, JobState::Failed);
  EXPECT_NE(session.outcome(c).error.find("never started: placement policy 'only-gpu-0'"), std::string::npos)
      << session.outcome(c).error;
  EXPECT_EQ(session.outcome(c).gpu, -1);
}

TEST_F(SessionTest, BadJobsAndPoliciesAreRefusedNamingWhatIsAccepted) {
  Session session(*clock, *costs, spec(2, "pinned"));
  SessionJob j = fixed_job("x", kMillisecond, 1, 0);
  j.gpu = 2;
  EXPECT_THROW(session.add_job(j), InputError);
  j.gpu = 0;
  j.after = 0;  // not an earlier job
  EXPECT_THROW(session.add_job(j), InputError);
  j.after.reset();
  j.job.cluster.gpus = 3;  // more than a node's
  EXPECT_THROW(session.add_job(j), InputError);
  j.job.cluster.gpus = 2;
  j.job.cluster.nodes = 2;
  EXPECT_THROW(session.add_job(j), InputError);
  try {
    placement_policy("round-robin");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pinned, first-fit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpemu
