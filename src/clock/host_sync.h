// Clock-aware synchronisation between host threads started with
// Clock::run_concurrently (one per emulated GPU in a data-parallel job): a
// condition variable that works on either clock.
//
// A host thread sometimes has to wait for another one: in DDP the gradient
// all-reduce of a bucket can only be issued once every rank has issued the
// backward work producing it, so a rank that is ahead waits at the end of
// backward until the last rank has caught up. Under the real clock that is a
// condition variable. Under the virtual clock host threads may coordinate only
// through the clock (one runs at a time; a thread blocked on a mutex or a
// condition variable would stop virtual time), so a waiting thread sleeps, on
// the clock, until the earliest moment at which a peer that is not itself
// waiting (or was notified since it last looked) will next run, and checks
// again. For that every sleep of a rank's host thread goes through this
// class, which records its deadline.
// A waiting thread therefore wakes at most once per peer wake-up, and the
// result is exact and deterministic: it wakes no later than the peer that
// unblocks it (or 1 ns after, when both wake at the same instant), and what
// it waits for always ends later than that (an all-reduce takes at least its
// launch latency).
//
// Thread safety: all members may be called from the ranks' host threads.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "gpemu/clock.h"
#include "gpemu/time.h"

namespace gpemu {

// Thrown in a rank's host thread when another rank's host thread failed.
class PeerFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class HostSync {
 public:
  HostSync(Clock& clock, int ranks);
  HostSync(const HostSync&) = delete;
  HostSync& operator=(const HostSync&) = delete;

  Clock& clock() const { return clock_; }
  int ranks() const { return static_cast<int>(state_.size()); }

  // Sleeps rank's host thread until `deadline` (on the clock).
  void sleep_until(int rank, Time deadline);
  // A sleep function for rank's host thread (for Timeline::wait and loaders).
  std::function<void(Time)> sleeper(int rank) {
    return [this, rank](Time t) { sleep_until(rank, t); };
  }
  // Before rank's host thread waits for the timeline at this instant: under
  // the virtual clock, lets the other ranks due now issue their work first, so
  // one flow simulation answers all of their waits instead of each rank's new
  // transfers invalidating the simulation the previous rank's wait ran.
  void yield_before_wait(int rank);
  // Blocks rank's host thread until ready() holds. ready is evaluated with
  // mutex() held. Throws PeerFailed after abort(), and std::logic_error when
  // every other rank is waiting or finished (nobody could make ready() true).
  void wait_until(int rank, const std::function<bool()>& ready);
  // Wakes waiters after a change ready() may see (made with mutex() held).
  void notify_all();
  std::mutex& mutex() { return mutex_; }

  // rank's host thread is done: it will not make anything ready any more.
  void finish(int rank);
  // A rank failed: every waiter throws PeerFailed.
  void abort();
  bool aborted() const;

 private:
  enum class State { Running, Sleeping, Waiting, Finished };
  struct Rank {
    State state = State::Sleeping;  // all start at the time run_concurrently starts them
    Time deadline = 0;
    bool notified = false;  // Waiting, and notify_all() was called since it last looked
  };
  Clock& clock_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Rank> state_;
  bool aborted_ = false;
};

}  // namespace gpemu
