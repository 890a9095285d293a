#include <sys/prctl.h>
#include <time.h>

#include <chrono>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "common/checked.h"
#include "gpemu/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GPEMU_CPU_RELAX() _mm_pause()
#else
#define GPEMU_CPU_RELAX() ((void)0)
#endif

namespace gpemu {
namespace {

std::int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * kSecond + ts.tv_nsec;
}

// Default timer slack is 50 us per thread; a waiting emulated host thread
// wants its wake-up on time, so each thread that sleeps lowers its own slack.
void lower_timer_slack_once() {
  thread_local bool done = false;
  if (!done) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    done = true;
  }
}

// The host threads of one run_concurrently call: its bodies' and those they
// spawn, joined before it returns (the first exception kept).
struct Group {
  explicit Group(const Clock* c) : clock(c) {}
  const Clock* clock;
  std::mutex m;
  std::deque<std::thread> threads;  // stable: a thread spawns while others are joined
  std::exception_ptr first;

  void run(std::function<void()>& body) {
    try {
      body();
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (!first) first = std::current_exception();
    }
  }
  void start(std::function<void()> body);
  // Every thread, those started while it joins included: a thread is
  // started only by one not yet joined.
  void join() {
    for (std::size_t i = 0;; ++i) {
      std::thread* t = nullptr;
      {
        std::lock_guard<std::mutex> lock(m);
        if (i >= threads.size()) return;
        t = &threads[i];
      }
      t->join();
    }
  }
};
// The group the calling thread is one of.
thread_local Group* tl_group = nullptr;

void Group::start(std::function<void()> body) {
  std::lock_guard<std::mutex> lock(m);
  threads.emplace_back([this, body = std::move(body)]() mutable {
    tl_group = this;
    run(body);
    tl_group = nullptr;
  });
}

class RealClock final : public Clock {
 public:
  explicit RealClock(RealClockOptions o) : options_(o), epoch_(monotonic_ns()) {}

  Time now() const override { return monotonic_ns() - epoch_; }

  void sleep_until(Time deadline) override {
    // A deadline near kTimeInfinity must not wrap into the past.
    const std::int64_t target = saturating_add(epoch_, deadline);
    std::int64_t t = monotonic_ns();
    if (target - t > options_.spin_window) {
      lower_timer_slack_once();
      const std::int64_t wake = target - options_.spin_window;
      timespec ts{static_cast<time_t>(wake / kSecond), static_cast<long>(wake % kSecond)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
    }
    while (monotonic_ns() < target) GPEMU_CPU_RELAX();
  }

  void run_concurrently(std::vector<std::function<void()>> bodies) override {
    Group group(this);
    // One body runs on the calling thread: no thread to start, and its
    // allocations come from the main malloc arena, which grows in large
    // steps (a thread's arena grows by mprotect in page steps, a system call
    // between two emulated steps every few kilobytes of records).
    if (bodies.size() == 1) {
      Group* outer = std::exchange(tl_group, &group);
      group.run(bodies.front());
      tl_group = outer;
    } else {
      for (auto& body : bodies) group.start(std::move(body));
    }
    group.join();
    if (group.first) std::rethrow_exception(group.first);
  }

  // A plain thread that the caller's run_concurrently joins.
  void spawn(std::function<void()> body) override {
    if (!on_host_thread())
      throw std::logic_error(
          "Clock::spawn: the calling thread is not a host thread of the real clock's run_concurrently");
    tl_group->start(std::move(body));
  }
  bool on_host_thread() const override { return tl_group && tl_group->clock == this; }

  std::optional<std::int64_t> monotonic_epoch_ns() const override { return epoch_; }
  bool is_virtual() const override { return false; }
  std::string_view name() const override { return "real"; }

 private:
  RealClockOptions options_;
  std::int64_t epoch_;
};

}  // namespace

std::unique_ptr<Clock> make_real_clock(RealClockOptions options) { return std::make_unique<RealClock>(options); }

}  // namespace gpemu
