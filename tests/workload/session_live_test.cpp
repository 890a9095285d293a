// An open session (session.h, SessionSpec::open): jobs added while it runs,
// from another thread, under the real clock (a server's clients arriving).
// What a live job does is checked against the same jobs added up front with
// the same arrivals, in the parts that do not depend on the clock.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "gpemu/catalog.h"
#include "gpemu/clock.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/session.h"
#include "support/session_jobs.h"

namespace gpemu {
namespace {

using testing::model_job;

SessionSpec one_gpu(bool open) {
  SessionSpec s;
  s.gpu = &find_gpu("A100-SXM4-40GB");
  s.share.policy = SharePolicy::Mps;
  s.open = open;
  return s;
}

// Job a runs; job b is added from this (the test's) thread while it does,
// arriving "now". Both end with their end events (waited
// on, never polled); run() returns only once the session is closed. Their
// iterations, samples, kernels' time alone and allocator peaks are those of
// the same two jobs added up front with the same arrivals (under the
// virtual clock): only when steps end depends on the clock.
TEST(SessionLive, AJobAddedWhileAnotherRunsDoesWhatItWouldHaveDoneAddedUpFront) {
  const auto costs = make_cost_model(std::nullopt);
  const auto clock = make_real_clock();
  Session session(*clock, *costs, one_gpu(true));
  ClockEvent a_started(*clock), b_added(*clock);
  SessionJob a = model_job("a", 16, 6);
  a.on_start = [&](Job&) { a_started.set(); };
  // a cannot end before b is added: b arrives while a runs, whatever the machine's speed.
  a.job.schedule.between_steps = [&](const StepBoundary& s) {
    if (s.iterations() == 2) b_added.wait();
  };
  const JobId ia = session.add_job(std::move(a));
  std::thread runner([&] { session.run(); });
  a_started.wait();  // the session runs: b is a live arrival
  const JobId ib = session.add_job(model_job("b", 8, 4));
  b_added.set();
  session.ended(ia).wait();
  session.ended(ib).wait();
  EXPECT_EQ(session.state(ia), JobState::Finished);
  EXPECT_EQ(session.state(ib), JobState::Finished);
  session.close();
  runner.join();
  EXPECT_THROW(session.add_job(model_job("late", 8, 1)), std::logic_error);

  const JobOutcome &la = session.outcome(ia), &lb = session.outcome(ib);
  ASSERT_TRUE(la.error.empty() && lb.error.empty()) << la.error << " / " << lb.error;
  EXPECT_LT(lb.arrival, la.end);  // b arrived while a ran
  EXPECT_GE(lb.start, lb.arrival);
  EXPECT_GE(*session.ended(ib).set_at(), lb.end);

  const auto virtual_clock = make_virtual_clock();
  Session upfront(*virtual_clock, *costs, one_gpu(false));
  upfront.add_job(model_job("a", 16, 6));
  SessionJob b = model_job("b", 8, 4);
  b.arrival = lb.arrival;
  upfront.add_job(std::move(b));
  upfront.run();
  for (const JobId id : {ia, ib}) {
    const RunRecord &live = record_of(session.outcome(id)), &added = record_of(upfront.outcome(id));
    ASSERT_EQ(live.ranks.size(), 1u);
    ASSERT_EQ(added.ranks.size(), 1u);
    const RankRecord &l = live.ranks[0], &u = added.ranks[0];
    EXPECT_EQ(l.iterations, id == ia ? 6 : 4) << id;
    EXPECT_EQ(l.iterations, u.iterations) << id;
    EXPECT_EQ(l.train.samples, u.train.samples) << id;
    EXPECT_EQ(l.compute_busy, u.compute_busy) << id;
    EXPECT_GT(l.peak_allocated_bytes, 0u) << id;
    EXPECT_EQ(l.peak_allocated_bytes, u.peak_allocated_bytes) << id;
    EXPECT_EQ(l.peak_reserved_bytes, u.peak_reserved_bytes) << id;
  }
}

// Live arrivals are an open session's, under the real clock; a job added
// after run() to a session that is not open, or of several nodes while it
// runs, is refused.
TEST(SessionLive, OnlyAnOpenSessionUnderTheRealClockTakesJobsWhileItRuns) {
  const auto costs = make_cost_model(std::nullopt);
  const auto virtual_clock = make_virtual_clock();
  try {
    Session s(*virtual_clock, *costs, one_gpu(true));
    ADD_FAILURE() << "an open session under the virtual clock was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("real clock"), std::string::npos) << e.what();
  }
  Session closed(*virtual_clock, *costs, one_gpu(false));
  closed.add_job(model_job("a", 8, 1));
  closed.run();
  EXPECT_THROW(closed.add_job(model_job("b", 8, 1)), std::logic_error);

  const auto clock = make_real_clock();
  Session open(*clock, *costs, one_gpu(true));
  std::thread runner([&] { open.run(); });
  SessionJob wide = model_job("wide", 8, 1);
  wide.job.cluster.nodes = 2;
  wide.job.cluster.gpus = 2;
  EXPECT_THROW(open.add_job(std::move(wide)), InputError);
  open.close();
  runner.join();
  EXPECT_EQ(open.jobs(), 0u);
}

}  // namespace
}  // namespace gpemu
