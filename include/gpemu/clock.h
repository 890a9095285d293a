// Clocks. Everything above this layer reads time through a Clock and blocks a
// host thread only through Clock::sleep_until, so the same emulator code runs
// against wall time (RealClock) or discrete simulated time (VirtualClock).
//
// RealClock waits to *absolute* deadlines: it sleeps with clock_nanosleep
// (TIMER_ABSTIME, timer slack set to 1 ns) until shortly before the deadline,
// then spins. Errors therefore do not accumulate over chains of waits.
//
// VirtualClock jumps: sleep_until(t) sets now() to t at once. Several host
// threads run under it cooperatively (run_concurrently, and those its
// threads start with spawn): exactly one runs at a time, and when it sleeps
// the thread with the earliest deadline (ties broken by thread index) runs
// next, so runs are deterministic. Threads under
// a virtual clock must coordinate only through the clock and emulator objects
// (no blocking on ordinary mutexes held across sleeps or condition variables).
//
// Thread safety: all member functions may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/time.h"

namespace gpemu {

class Clock {
 public:
  virtual ~Clock() = default;
  // Time since the clock's epoch.
  virtual Time now() const = 0;
  // Blocks the calling host thread until now() >= deadline.
  virtual void sleep_until(Time deadline) = 0;
  // Runs each body on its own host thread (a lone body may run on the calling
  // thread) and returns when all have finished.
  // Exceptions thrown by a body are rethrown here (the first one).
  virtual void run_concurrently(std::vector<std::function<void()>> bodies) = 0;
  // Starts `body` as one more host thread of the run_concurrently call that
  // the calling thread is one of (a body, or a thread spawned by one): that
  // call returns only once it has finished too, and reports its exception as
  // a body's. Under a virtual clock it is due at the caller's now() and takes
  // the next thread index, so it runs after the caller (which goes on until
  // it sleeps or waits) and after every thread due then with a lower index
  // (ties at one time go by index: threads spawned earlier first); under the
  // real clock it is a plain thread. std::logic_error from any other thread
  // (none is running the clock's run_concurrently for it to join), and for
  // a clock that cannot start threads.
  virtual void spawn(std::function<void()> /*body*/) {
    throw std::logic_error(std::string("Clock::spawn: the ") + std::string(name()) +
                           " clock cannot start host threads");
  }
  // Whether the calling thread is a host thread of a run_concurrently call
  // on this clock (one of its bodies, or spawned by one): where spawn may be
  // called.
  virtual bool on_host_thread() const { return false; }
  // Lets every other host thread that can run at now() run first; the
  // caller continues at the same now(). Under a virtual clock the caller goes
  // behind all threads due at now() that did not yield (ties among yielders:
  // thread index), so work they issue at this instant is seen by what the
  // caller does next. A no-op for a lone thread and for the real clock, whose
  // threads run in parallel anyway.
  virtual void yield_to_peers() {}
  // For a clock that follows wall time: its epoch (now() == 0) in
  // CLOCK_MONOTONIC nanoseconds, which std::chrono::steady_clock reads on
  // Linux, so that times taken outside the clock (a loader's worker threads)
  // map onto it exactly. nullopt for a clock whose time is simulated.
  virtual std::optional<std::int64_t> monotonic_epoch_ns() const { return std::nullopt; }
  virtual bool is_virtual() const = 0;
  virtual std::string_view name() const = 0;

  void sleep_for(Duration d) { sleep_until(now() + d); }

 protected:
  friend class ClockEvent;
  // What ClockEvent builds on, for a clock whose host threads take turns
  // (virtual): the calling thread's index among them (-1 when it is not one
  // of them), parking it until another calls unpark with that index, and
  // waking it. park releases `guard` before the thread stops; it throws
  // std::logic_error when no thread is left that could wake it.
  virtual int cooperative_thread() const { return -1; }
  virtual void park(std::unique_lock<std::mutex>& guard) { guard.unlock(); }
  virtual void unpark(int /*thread*/) {}
};

// A one-shot event on a clock that host threads wait for without polling
// (as SimGrid's s4u::ConditionVariable, for one condition: "it happened"),
// under either clock: under a virtual clock a waiting thread takes no turns
// until the event is set, then runs at the time it was set (ties: thread
// index). A job's end is one (session.h).
//
// Thread safety: all members may be called from any host thread of the clock.
class ClockEvent {
 public:
  explicit ClockEvent(Clock& clock) : clock_(clock) {}
  ClockEvent(const ClockEvent&) = delete;
  ClockEvent& operator=(const ClockEvent&) = delete;

  // Sets the event at now() and wakes every waiter; a second set does nothing.
  void set();
  bool is_set() const;
  // When it was set; nullopt before.
  std::optional<Time> set_at() const;
  // Blocks the calling host thread until the event is set (returns at once
  // when it is). Under a virtual clock, a thread that is not one of
  // run_concurrently's, or the last thread that could set it, gets
  // std::logic_error instead of waiting forever.
  void wait();

 private:
  Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // threads that do not take turns (the real clock's)
  std::vector<int> parked_;     // cooperative threads waiting
  bool set_ = false;
  Time at_ = 0;
};

struct RealClockOptions {
  // Sleep until this long before the deadline, then spin. Wider windows cost
  // CPU; narrower ones risk oversleeping on a loaded machine.
  Duration spin_window = 100 * kMicrosecond;
};

enum class ClockKind { Real, Virtual };
std::string_view to_string(ClockKind k);
// "real" or "virtual"; InputError for anything else (front ends only).
ClockKind parse_clock_kind(std::string_view text);
std::unique_ptr<Clock> make_clock(ClockKind kind, RealClockOptions options = {});

std::unique_ptr<Clock> make_real_clock(RealClockOptions options = {});
std::unique_ptr<Clock> make_virtual_clock();
// "real" or "virtual"; InputError for anything else.
std::unique_ptr<Clock> make_clock(std::string_view kind);

}  // namespace gpemu
