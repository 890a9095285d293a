#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
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
