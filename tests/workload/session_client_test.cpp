// A session's clients (session.h, Session::attach): processes driven from
// outside, op by op, that are jobs of the session: placed as they attach,
// counted in their GPUs' load, sharing the GPU with its jobs under the
// sharing policy, and ending with the session's end event and an outcome.
// Times are checked against a hand computation under the virtual clock.
#include <gtest/gtest.h>

#include <memory>
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

using gpemu::testing::fixed_job;

struct SessionClient : gpemu::testing::SessionFixture {
  static int jobs_on(const Session& s, int gpu) { return s.loads()[static_cast<std::size_t>(gpu)].jobs; }
};

// A client's kernel and a job's share GPU 0 under mps. By hand: the job's
// first 100 ms kernel and the client's 100 ms kernel both want all the SMs
// from 0, so each runs at half speed and both end at 200 ms; the job's two
// other kernels then run alone, to 400 ms. The client ends when it detaches
// (200 ms): its outcome, its end event and the observers say so, and the
// GPU's load counts it until then. A pause of a client is ignored.
TEST_F(SessionClient, AClientsKernelSharesTheGpuWithAJobAndItsEndIsAnEvent) {
  Session session(*clock, *costs, spec(1, "pinned", {.policy = SharePolicy::Mps}));
  const JobId a = session.add_job(fixed_job("a", 100 * kMillisecond, 3));
  ClientHandle c = session.attach({.name = "script.py", .gpu = 0});
  const JobId cid = c.id();
  EXPECT_EQ(cid, 1);
  EXPECT_EQ(session.jobs(), 2u);
  EXPECT_EQ(session.state(cid), JobState::Running);
  EXPECT_EQ(jobs_on(session, 0), 1);  // the client; job a is not placed before run()
  EXPECT_EQ(c.gpus(), 1);
  EXPECT_EQ(c.device().index(), 0);
  std::vector<std::pair<JobId, Time>> ended;
  session.on_job_end([&](Session& s, const JobOutcome& o) { ended.emplace_back(o.id, s.clock().now()); });
  Time kernel_end = -1;
  session.at(0, [&](Session& s) {
    s.pause(cid);
    EXPECT_EQ(s.state(cid), JobState::Running);
    Stream& stream = c.device().default_stream();
    stream.launch_kernel(100 * kMillisecond, "client kernel", {1.0F, 1.0F});
    stream.synchronize();
    kernel_end = s.clock().now();
    EXPECT_EQ(jobs_on(s, 0), 2);  // job a beside it
    c.detach();
    EXPECT_EQ(jobs_on(s, 0), 1);
  });
  session.run();
  EXPECT_EQ(kernel_end, 200 * kMillisecond);
  EXPECT_EQ(session.outcome(a).end, 400 * kMillisecond);
  const JobOutcome& oc = session.outcome(cid);
  EXPECT_EQ(oc.state, JobState::Finished);
  EXPECT_EQ(oc.name, "script.py");
  EXPECT_EQ(oc.arrival, 0);
  EXPECT_EQ(oc.start, 0);
  EXPECT_EQ(oc.end, 200 * kMillisecond);
  EXPECT_EQ(oc.gpus, std::vector<int>{0});
  EXPECT_FALSE(oc.record.has_value());
  EXPECT_TRUE(oc.error.empty()) << oc.error;
  EXPECT_EQ(*session.ended(cid).set_at(), 200 * kMillisecond);
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[0], std::make_pair(cid, 200 * kMillisecond));
  EXPECT_EQ(ended[1], std::make_pair(a, 400 * kMillisecond));
  EXPECT_EQ(jobs_on(session, 0), 0);
  EXPECT_FALSE(c.attached());
  c.detach();  // once only
  EXPECT_EQ(ended.size(), 2u);
}

// Under first-fit a client takes the lowest free GPU, so a job goes to the
// next; a client naming a busy GPU is refused (no job added); the client's
// detach at 50 ms gives its GPU to the queued job. By hand: a on GPU 1 from
// 0 to 100 ms; b queued until 50 ms, then on GPU 0 to 150 ms.
TEST_F(SessionClient, APlacementPolicyPlacesClientsAndTheirEndWakesTheQueue) {
  Session session(*clock, *costs, spec(2, "first-fit"));
  ClientHandle c = session.attach({.name = "c"});
  EXPECT_EQ(c.gpu(), 0);
  EXPECT_EQ(jobs_on(session, 0), 1);
  EXPECT_EQ(jobs_on(session, 1), 0);
  try {
    session.attach({.name = "late", .gpu = 0});
    ADD_FAILURE() << "a client on a busy GPU was placed under first-fit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("client 1 ('late'): placement policy 'first-fit' gives it no GPU now"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(session.jobs(), 1u);
  const JobId a = session.add_job(fixed_job("a", 100 * kMillisecond, 1));
  const JobId b = session.add_job(fixed_job("b", 100 * kMillisecond, 1));
  session.at(50 * kMillisecond, [&](Session&) { c.detach(); });
  session.run();
  EXPECT_EQ(session.outcome(a).gpu, 1);
  EXPECT_EQ(session.outcome(a).end, 100 * kMillisecond);
  EXPECT_EQ(session.outcome(b).gpu, 0);
  EXPECT_EQ(session.outcome(b).start, 50 * kMillisecond);
  EXPECT_EQ(session.outcome(b).end, 150 * kMillisecond);
  EXPECT_EQ(session.outcome(c.id()).end, 50 * kMillisecond);
}

// On an exclusive session (the torch runtime's own GPUs) a client of several
// GPUs has whole cards, one Device each with its GPU's index; a second
// client on them is refused.
TEST_F(SessionClient, OnAnExclusiveSessionAClientHasWholeCards) {
  SessionSpec s = spec(2, "pinned");
  s.exclusive = true;
  Session session(*clock, *costs, s);
  ClientHandle c = session.attach({.name = "ranks", .gpu = 0, .gpus = 2});
  ASSERT_EQ(c.gpus(), 2);
  EXPECT_EQ(c.device(1).index(), 1);
  EXPECT_EQ(c.device(1).allocator().capacity(), c.device(0).allocator().capacity());
  EXPECT_EQ(jobs_on(session, 0), 1);
  EXPECT_EQ(jobs_on(session, 1), 1);
  EXPECT_THROW(session.attach({.name = "other", .gpu = 1}), Error);
  EXPECT_THROW(c.device(2), InputError);
  // Its Devices are the session's timeline's: a kernel on GPU 1 ends there.
  const Completion k = c.device(1).default_stream().launch_kernel(5 * kMillisecond);
  EXPECT_EQ(session.timeline().end_time(k), 5 * kMillisecond);
  c.detach();
  EXPECT_EQ(session.outcome(0).end, 0);  // detached before the clock moved
  EXPECT_EQ(jobs_on(session, 1), 0);
  EXPECT_EQ(session.attach({.name = "next", .gpu = 1}).gpu(), 1);
}

// A bad client spec is refused naming the field; a client whose Device
// cannot be made (no MIG slice left) has ended failed, with that error, and
// leaves its GPU's load as it was.
TEST_F(SessionClient, BadClientsAreRefusedAndOneWithoutRoomEndsFailed) {
  Session session(*clock, *costs, spec(2, "pinned", {.policy = SharePolicy::Mig}));
  for (const ClientSpec& bad : {ClientSpec{.name = "x", .gpus = 0}, ClientSpec{.name = "x", .gpus = 3},
                                ClientSpec{.name = "x", .gpu = 2}, ClientSpec{.name = "x", .gpu = 1, .gpus = 2}}) {
    try {
      session.attach(bad);
      ADD_FAILURE() << "accepted gpu " << bad.gpu << ", gpus " << bad.gpus;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("session: client 0 ('x'): gpu"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(session.jobs(), 0u);
  int failed = 0;
  session.on_job_end([&](Session&, const JobOutcome& o) { failed += o.state == JobState::Failed; });
  ClientHandle whole = session.attach({.name = "whole", .gpu = 0, .mig = "7g.40gb"});
  EXPECT_THROW(session.attach({.name = "small", .gpu = 0, .mig = "1g.5gb"}), InputError);
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(session.outcome(1).state, JobState::Failed);
  EXPECT_FALSE(session.outcome(1).error.empty());
  EXPECT_TRUE(session.ended(1).is_set());
  EXPECT_EQ(jobs_on(session, 0), 1);

  SessionSpec exclusive = spec(1, "pinned");
  exclusive.exclusive = true;
  Session cards(*clock, *costs, exclusive);
  try {
    cards.attach({.name = "y", .mig = "1g.5gb"});
    ADD_FAILURE() << "a slice on an exclusive session was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mig '1g.5gb': an exclusive session's GPUs are whole cards"),
              std::string::npos)
        << e.what();
  }
}

// An open session under the real clock takes clients while it runs, from
// any thread; another thread waits for a client's end on its event. A
// session that is not open takes none once it has run.
TEST_F(SessionClient, AnOpenSessionTakesClientsWhileItRuns) {
  const auto real = make_real_clock();
  SessionSpec s = spec(1, "pinned");
  s.open = true;
  Session open(*real, *costs, s);
  std::thread runner([&] { open.run(); });
  ClientHandle c = open.attach({.name = "live"});
  std::thread waiter([&] { open.ended(c.id()).wait(); });
  EXPECT_EQ(jobs_on(open, 0), 1);
  const JobId id = c.id();
  c.detach();
  waiter.join();
  EXPECT_EQ(open.state(id), JobState::Finished);
  EXPECT_GE(open.outcome(id).end, open.outcome(id).start);
  open.close();
  runner.join();
  EXPECT_THROW(open.attach({.name = "after close"}), std::logic_error);

  Session closed(*clock, *costs, spec(1, "pinned"));
  closed.run();
  EXPECT_THROW(closed.attach({.name = "after run"}), std::logic_error);
}

}  // namespace
}  // namespace gpemu
