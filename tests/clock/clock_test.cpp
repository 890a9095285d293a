#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/sanitizers.h"
#include "gpemu/clock.h"
#include "gpemu/error.h"

namespace gpemu {
namespace {

TEST(VirtualClock, StartsAtZeroAndJumpsToDeadlines) {
  auto clock = make_virtual_clock();
  EXPECT_TRUE(clock->is_virtual());
  EXPECT_EQ(clock->now(), 0);
  clock->sleep_until(5 * kMillisecond);
  EXPECT_EQ(clock->now(), 5 * kMillisecond);
  clock->sleep_for(250);
  EXPECT_EQ(clock->now(), 5 * kMillisecond + 250);
}

TEST(VirtualClock, SleepingIntoThePastDoesNotMoveTimeBack) {
  auto clock = make_virtual_clock();
  clock->sleep_until(100);
  clock->sleep_until(40);
  EXPECT_EQ(clock->now(), 100);
}

TEST(VirtualClock, CooperativeThreadsWakeInDeadlineOrderTiesByIndex) {
  auto clock = make_virtual_clock();
  std::vector<std::string> log;  // only one cooperative thread runs at a time
  auto body = [&](std::string name, std::vector<Duration> sleeps) {
    return [&, name, sleeps] {
      for (Duration d : sleeps) {
        clock->sleep_for(d);
        log.push_back(name + "@" + std::to_string(clock->now()));
      }
    };
  };
  clock->run_concurrently({body("a", {30, 30}), body("b", {10, 50}), body("c", {30})});
  std::vector<std::string> expected = {"b@10", "a@30", "c@30", "a@60", "b@60"};
  EXPECT_EQ(log, expected);
  EXPECT_EQ(clock->now(), 60);
}

TEST(VirtualClock, RunConcurrentlyIsDeterministic) {
  auto run = [] {
    auto clock = make_virtual_clock();
    std::vector<int> order;
    std::vector<std::function<void()>> bodies;
    for (int i = 0; i < 6; ++i)
      bodies.push_back([&, i] {
        for (int k = 0; k < 20; ++k) {
          clock->sleep_for((i * 7 + k * 3) % 11);
          order.push_back(i);
        }
      });
    clock->run_concurrently(std::move(bodies));
    return order;
  };
  EXPECT_EQ(run(), run());
}

TEST(VirtualClock, RunConcurrentlyRethrowsTheFirstError) {
  auto clock = make_virtual_clock();
  int finished = 0;
  EXPECT_THROW(clock->run_concurrently({[&] { throw std::runtime_error("boom"); },
                                        [&] {
                                          clock->sleep_for(10);
                                          ++finished;
                                        }}),
               std::runtime_error);
  EXPECT_EQ(finished, 1);
}

// Under the virtual clock on x86-64 Linux release builds the host threads are
// fibers, each stack with a guard page; more of them than the kernel's
// vm.max_map_count allows guards for is an error saying so, not stacks that
// silently overflow into each other. (Sanitizer builds use OS threads.)
#if defined(__x86_64__) && defined(__linux__) && !defined(GPEMU_ASAN) && !defined(GPEMU_TSAN)
TEST(VirtualClock, MoreHostThreadsThanGuardPagesIsAClearError) {
  std::ifstream f("/proc/sys/vm/max_map_count");
  long long max_maps = 0;
  if (!(f >> max_maps) || max_maps > 200000)
    GTEST_SKIP() << "vm.max_map_count is " << max_maps << ": too many to exceed here";
  auto clock = make_virtual_clock();
  int ran = 0;
  std::vector<std::function<void()>> bodies(static_cast<std::size_t>(max_maps / 2 + 1000), [&] { ++ran; });
  try {
    clock->run_concurrently(std::move(bodies));
    FAIL() << "no error for " << max_maps / 2 + 1000 << " host threads";
  } catch (const std::runtime_error& e) {
    // Where the kernel refuses the stacks' mapping itself (strict overcommit),
    // that is the error instead; either names the host threads.
    const std::string what = e.what();
    EXPECT_TRUE(what.find("vm.max_map_count") != std::string::npos ||
                what.find("cannot map stacks") != std::string::npos)
        << what;
  }
  EXPECT_EQ(ran, 0);
  // The clock is usable afterwards.
  clock->run_concurrently({[&] {
    clock->sleep_for(5);
    ++ran;
  }});
  EXPECT_EQ(ran, 1);
}
#endif

// Clock::spawn: a host thread starts another, due at its now(); the new one
// takes the next index, so at one time it runs after the spawner (which goes
// on until it sleeps) and after every thread due then with a lower index.
// run_concurrently returns once spawned threads have finished too.
TEST(VirtualClock, ASpawnedThreadStartsAtTheSpawnersNowAfterLowerIndexesAndIsJoined) {
  auto clock = make_virtual_clock();
  std::vector<std::string> log;  // only one cooperative thread runs at a time
  auto note = [&](const std::string& who) { log.push_back(who + "@" + std::to_string(clock->now())); };
  ClockEvent go(*clock);
  clock->run_concurrently({[&] {  // index 0
                             EXPECT_TRUE(clock->on_host_thread());
                             clock->sleep_until(10);
                             clock->spawn([&] {  // index 2
                               note("x");
                               clock->sleep_for(5);
                               note("x");
                               clock->spawn([&] {  // index 3: due at 15, after b (1) and x (2)
                                 note("y");
                                 go.wait();  // set at 40 by a
                                 note("y");
                                 clock->sleep_for(60);
                                 note("y");
                               });
                             });
                             note("a");
                             clock->sleep_until(40);
                             note("a");
                             go.set();
                           },
                           [&] {  // index 1
                             clock->sleep_until(10);
                             note("b");
                             clock->sleep_until(15);
                             note("b");
                           }});
  const std::vector<std::string> expected = {"a@10", "b@10", "x@10", "b@15", "x@15", "y@15", "a@40", "y@40", "y@100"};
  EXPECT_EQ(log, expected);
  EXPECT_EQ(clock->now(), 100);  // y, the last to finish, was waited for
  EXPECT_FALSE(clock->on_host_thread());
}

TEST(VirtualClock, ASpawnedThreadsErrorIsRethrownAndSpawnOutsideTheGroupIsRefused) {
  auto clock = make_virtual_clock();
  int finished = 0;
  try {
    clock->run_concurrently({[&] {
      clock->spawn([&] {
        clock->sleep_for(10);
        throw std::runtime_error("spawned boom");
      });
      clock->sleep_for(20);
      ++finished;
    }});
    ADD_FAILURE() << "the spawned thread's error was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "spawned boom");
  }
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(clock->now(), 20);
  try {
    clock->spawn([] {});
    ADD_FAILURE() << "spawn outside run_concurrently was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a host thread"), std::string::npos) << e.what();
  }
  // A thread the body starts itself is not one of the clock's.
  clock->run_concurrently({[&] {
    bool refused = false, host = true;
    std::thread([&] {
      host = clock->on_host_thread();
      try {
        clock->spawn([] {});
      } catch (const std::logic_error&) {
        refused = true;
      }
    }).join();
    EXPECT_TRUE(refused);
    EXPECT_FALSE(host);
  }});
}

// Many threads spawned in a chain, each from the last, each on a stack of
// its own: every one runs, in order, at its time.
TEST(VirtualClock, AChainOfSpawnedThreadsRunsEachAtItsTime) {
  auto clock = make_virtual_clock();
  std::vector<Time> ran;
  std::function<void(int)> link = [&](int k) {
    ran.push_back(clock->now());
    clock->sleep_for(3);
    if (k < 199) clock->spawn([&, k] { link(k + 1); });
    clock->sleep_for(1000);  // each stays alive while the next ones run
  };
  clock->run_concurrently({[&] { link(0); }});
  ASSERT_EQ(ran.size(), 200u);
  for (std::size_t k = 0; k < ran.size(); ++k) EXPECT_EQ(ran[k], static_cast<Time>(3 * k)) << k;
  EXPECT_EQ(clock->now(), 3 * 199 + 3 + 1000);
}

TEST(RealClock, SleepUntilNeverReturnsBeforeTheDeadline) {
  auto clock = make_real_clock();
  EXPECT_FALSE(clock->is_virtual());
  for (Duration d : {Duration(0), 50 * kMicrosecond, 2 * kMillisecond}) {
    const Time deadline = clock->now() + d;
    clock->sleep_until(deadline);
    EXPECT_GE(clock->now(), deadline);
  }
}

TEST(RealClock, RunConcurrentlyRunsEveryBody) {
  auto clock = make_real_clock();
  std::mutex m;
  int count = 0;
  std::vector<std::function<void()>> bodies(4, [&] {
    std::lock_guard<std::mutex> lock(m);
    ++count;
  });
  clock->run_concurrently(bodies);
  EXPECT_EQ(count, 4);
}

// Under the real clock a spawned thread is a plain thread that
// run_concurrently joins, with one body (run on the caller's thread) or several.
TEST(RealClock, RunConcurrentlyJoinsSpawnedThreadsAndRethrowsTheirErrors) {
  auto clock = make_real_clock();
  for (int bodies : {1, 2}) {
    std::atomic<int> done{0};
    std::vector<std::function<void()>> group(static_cast<std::size_t>(bodies), [&] {
      EXPECT_TRUE(clock->on_host_thread());
      clock->spawn([&] {
        clock->sleep_for(2 * kMillisecond);
        clock->spawn([&] { ++done; });
        ++done;
      });
    });
    clock->run_concurrently(std::move(group));
    EXPECT_EQ(done.load(), 2 * bodies) << bodies << " bodies";
  }
  EXPECT_FALSE(clock->on_host_thread());
  EXPECT_THROW(clock->spawn([] {}), std::logic_error);
  EXPECT_THROW(clock->run_concurrently({[&] { clock->spawn([] { throw std::runtime_error("boom"); }); }}),
               std::runtime_error);
}

TEST(MakeClock, AcceptsRealAndVirtualOnly) {
  EXPECT_FALSE(make_clock("real")->is_virtual());
  EXPECT_TRUE(make_clock("virtual")->is_virtual());
  try {
    make_clock("wall");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'wall'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("virtual"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpemu

namespace gpemu {
namespace {

// ClockEvent: a host thread waits for another's event without polling; under
// the virtual clock it runs again at the very time the event was set.
TEST(ClockEvent, AWaiterRunsAtTheTimeTheEventIsSetUnderTheVirtualClock) {
  auto clock = make_virtual_clock();
  ClockEvent done(*clock);
  std::vector<Time> woke;
  clock->run_concurrently({
      [&] {
        done.wait();
        woke.push_back(clock->now());
      },
      [&] {
        clock->sleep_until(1234);
        done.set();
        clock->sleep_until(5000);
        done.set();  // a second set changes nothing
      },
      [&] {
        clock->sleep_until(2000);
        done.wait();  // set already: returns at once
        woke.push_back(clock->now());
      },
  });
  EXPECT_EQ(woke, (std::vector<Time>{1234, 2000}));
  EXPECT_EQ(done.set_at(), 1234);
}

TEST(ClockEvent, AWaitNobodyCanEndThrowsInsteadOfHanging) {
  auto clock = make_virtual_clock();
  ClockEvent never(*clock);
  EXPECT_THROW(never.wait(), std::logic_error);  // a lone thread
  int threw = 0;
  clock->run_concurrently({[&] {
                             try {
                               never.wait();
                             } catch (const std::logic_error&) {
                               ++threw;
                             }
                           },
                           [&] { clock->sleep_until(10); }});
  EXPECT_EQ(threw, 1);
  EXPECT_FALSE(never.is_set());
}

TEST(ClockEvent, WorksOnTheRealClock) {
  auto clock = make_real_clock();
  ClockEvent done(*clock);
  Time set_at = -1, woke = -1;
  clock->run_concurrently({[&] {
                             done.wait();
                             woke = clock->now();
                           },
                           [&] {
                             clock->sleep_for(kMillisecond);
                             set_at = clock->now();
                             done.set();
                           }});
  EXPECT_GE(woke, set_at);
  EXPECT_TRUE(done.is_set());
}

}  // namespace
}  // namespace gpemu
