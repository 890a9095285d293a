#include <stdexcept>

#include "gpemu/clock.h"

namespace gpemu {

void ClockEvent::set() {
  std::vector<int> wake;
  {
    std::lock_guard lock(mu_);
    if (set_) return;
    set_ = true;
    at_ = clock_.now();
    wake.swap(parked_);
  }
  cv_.notify_all();
  for (const int thread : wake) clock_.unpark(thread);
}

bool ClockEvent::is_set() const {
  std::lock_guard lock(mu_);
  return set_;
}

std::optional<Time> ClockEvent::set_at() const {
  std::lock_guard lock(mu_);
  return set_ ? std::optional<Time>(at_) : std::nullopt;
}

void ClockEvent::wait() {
  std::unique_lock lock(mu_);
  if (set_) return;
  const int me = clock_.cooperative_thread();
  if (me < 0) {
    // A virtual clock's lone thread: nobody else runs, nobody could set it.
    if (clock_.is_virtual())
      throw std::logic_error("ClockEvent::wait: a thread outside run_concurrently waits on a virtual clock");
    cv_.wait(lock, [&] { return set_; });
    return;
  }
  parked_.push_back(me);
  try {
    clock_.park(lock);  // back when set() unparks this thread
  } catch (...) {
    std::lock_guard relock(mu_);
    std::erase(parked_, me);
    throw;
  }
}

}  // namespace gpemu
