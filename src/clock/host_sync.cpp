#include "clock/host_sync.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {

HostSync::HostSync(Clock& clock, int ranks) : clock_(clock) {
  if (ranks < 1) throw InputError(fmt::format("host sync over {} ranks: at least 1 needed", ranks));
  state_.resize(static_cast<std::size_t>(ranks));
  const Time now = clock.now();
  for (Rank& r : state_) r.deadline = now;
}

void HostSync::sleep_until(int rank, Time deadline) {
  if (clock_.is_virtual()) {
    std::lock_guard lock(mutex_);
    state_.at(rank).state = State::Sleeping;
    state_.at(rank).deadline = std::max(deadline, clock_.now());
  }
  clock_.sleep_until(deadline);
  if (clock_.is_virtual()) {
    std::lock_guard lock(mutex_);
    state_.at(rank).state = State::Running;
  }
}

void HostSync::yield_before_wait(int rank) {
  if (!clock_.is_virtual()) return;
  {
    std::lock_guard lock(mutex_);
    state_.at(rank).state = State::Sleeping;
    state_.at(rank).deadline = clock_.now();
  }
  clock_.yield_to_peers();
  std::lock_guard lock(mutex_);
  state_.at(rank).state = State::Running;
}

void HostSync::wait_until(int rank, const std::function<bool()>& ready) {
  if (!clock_.is_virtual()) {
    std::unique_lock lock(mutex_);
    state_.at(rank).state = State::Waiting;
    cv_.wait(lock, [&] { return aborted_ || ready(); });
    state_.at(rank).state = State::Running;
    if (aborted_) throw PeerFailed("another GPU's host thread failed");
    return;
  }
  for (;;) {
    Time wake = kTimeInfinity;
    {
      std::lock_guard lock(mutex_);
      if (aborted_) {
        state_.at(rank).state = State::Running;
        throw PeerFailed("another GPU's host thread failed");
      }
      if (ready()) {
        state_.at(rank).state = State::Running;
        return;
      }
      const Time now = clock_.now();
      for (int s = 0; s < ranks(); ++s) {
        if (s == rank) continue;
        const Rank& p = state_[s];
        // A waiting peer that was notified since it last looked may find its
        // condition true when it wakes: it may still act.
        if (p.state == State::Sleeping || (p.state == State::Waiting && p.notified)) wake = std::min(wake, p.deadline);
        // Under the virtual clock only this thread runs; a peer marked
        // Running is inside a call that sleeps without announcing it: look
        // again as soon as time moves.
        if (p.state == State::Running) wake = std::min(wake, now);
      }
      if (wake == kTimeInfinity)
        throw std::logic_error(fmt::format(
            "GPU {}'s host thread waits for its peers, but every other host thread is waiting or has finished", rank));
      // A peer waking at this very instant with a higher index runs after us:
      // let it run first.
      if (wake <= now) wake = now + 1;
      state_.at(rank).state = State::Waiting;
      state_.at(rank).deadline = wake;
      state_.at(rank).notified = false;
    }
    clock_.sleep_until(wake);
  }
}

void HostSync::notify_all() {
  {
    std::lock_guard lock(mutex_);
    for (Rank& r : state_)
      if (r.state == State::Waiting) r.notified = true;
  }
  cv_.notify_all();
}

void HostSync::finish(int rank) {
  {
    std::lock_guard lock(mutex_);
    state_.at(rank).state = State::Finished;
  }
  cv_.notify_all();
}

void HostSync::abort() {
  {
    std::lock_guard lock(mutex_);
    aborted_ = true;
  }
  cv_.notify_all();
}

bool HostSync::aborted() const {
  std::lock_guard lock(mutex_);
  return aborted_;
}

}  // namespace gpemu
