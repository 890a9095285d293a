#include <sys/prctl.h>
#include <time.h>

#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

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
    // One body runs on the calling thread: no thread to start, and its
    // allocations come from the main malloc arena, which grows in large
    // steps (a thread's arena grows by mprotect in page steps, a system call
    // between two emulated steps every few kilobytes of records).
    if (bodies.size() == 1) {
      bodies.front()();
      return;
    }
    std::vector<std::thread> threads;
    std::exception_ptr first;
    std::mutex m;
    threads.reserve(bodies.size());
    for (auto& body : bodies) {
      threads.emplace_back([&body, &first, &m] {
        try {
          body();
        } catch (...) {
          std::lock_guard<std::mutex> lock(m);
          if (!first) first = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    if (first) std::rethrow_exception(first);
  }

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
