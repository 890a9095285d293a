// The clock of a `gpemu torch` process under the real clock.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "common/checked.h"
#include "gpemu/clock.h"

namespace gpemu::torch_backend::detail {

// The real clock less the time this process's issuing threads spent ready
// to run but not running (the kernel's run_delay: another process had the
// CPU). A GPU host would not have lost that time, so the emulated world
// (timeline, syncs, events) does not see it: the loss is made up. The
// script's own clocks are real under the real clock and do see it; the
// summary reports it (host_load_delay_s). A thread samples its own delay
// each time it reads the clock (one getrusage(); /proc only when the thread
// was switched out since), so nothing is stamped with a delay not yet made
// up, and a delay is made up only down to the time the clock has shown
// (another thread ran meanwhile): the clock then never has to hold, which a
// waiting thread would sleep out in real time, losing the time again.
class LoadAdjustedClock final : public Clock {
 public:
  LoadAdjustedClock() : real_(make_real_clock()) {}

  // Never backwards (the floor: the latest time shown).
  Time now() const override {
    sample();
    const Time t = real_->now() - lost_.load(std::memory_order_relaxed);
    Time seen = floor_.load(std::memory_order_relaxed);
    while (t > seen && !floor_.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
    }
    return std::max(t, seen);
  }
  void sleep_until(Time deadline) override {
    for (;;) {
      real_->sleep_until(saturating_add(deadline, lost_.load(std::memory_order_relaxed)));
      if (now() >= deadline) return;
    }
  }
  void run_concurrently(std::vector<std::function<void()>> bodies) override {
    real_->run_concurrently(std::move(bodies));
  }
  // Moves with the time made up, so that CLOCK_MONOTONIC times other
  // processes share (rank processes' collectives) map onto this clock.
  std::optional<std::int64_t> monotonic_epoch_ns() const override {
    return *real_->monotonic_epoch_ns() + lost_.load(std::memory_order_relaxed);
  }
  bool is_virtual() const override { return false; }
  std::string_view name() const override { return "real"; }

  // Adds the calling thread's run_delay since its last sample: none without
  // a context switch since (run_delay grows only while the thread is off the CPU).
  void sample() const {
    thread_local std::int64_t last_delay = -1;
    thread_local long last_switches = -1;
    rusage u{};
    if (::getrusage(RUSAGE_THREAD, &u) == 0) {
      const long switches = u.ru_nvcsw + u.ru_nivcsw;
      if (switches == last_switches) return;
      last_switches = switches;
    }
    const std::int64_t delay = run_delay_ns();
    if (delay < 0) return;
    if (last_delay >= 0 && delay > last_delay) {
      // Not below what the clock has shown: where another thread read the
      // clock during this one's delay, the process was not stalled, and
      // that part of the delay was not lost.
      const std::int64_t cap = real_->now() - floor_.load(std::memory_order_relaxed);
      std::int64_t l = lost_.load(std::memory_order_relaxed);
      while (l < cap &&
             !lost_.compare_exchange_weak(l, std::min(l + (delay - last_delay), cap), std::memory_order_relaxed)) {
      }
    }
    last_delay = delay;
  }
  Duration lost() const { return lost_.load(std::memory_order_relaxed); }

 private:
  // The calling thread's run_delay (ns), -1 when the kernel does not say.
  static std::int64_t run_delay_ns() {
    struct File {  // this thread's, open while the thread lives
      int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
      ~File() {
        if (fd >= 0) ::close(fd);
      }
    };
    thread_local File file;
    char text[96];
    const ssize_t n = file.fd < 0 ? -1 : ::pread(file.fd, text, sizeof text - 1, 0);
    if (n <= 0) return -1;
    text[n] = '\0';
    long long run = 0, delay = -1;
    if (std::sscanf(text, "%lld %lld", &run, &delay) != 2) delay = -1;
    return delay;
  }
  std::unique_ptr<Clock> real_;
  mutable std::atomic<std::int64_t> lost_{0};
  mutable std::atomic<Time> floor_{0};
};

}  // namespace gpemu::torch_backend::detail
