#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include "gpemu/clock.h"

namespace gpemu {
namespace {

class VirtualClock;
// Which cooperative thread of which clock the calling thread is.
thread_local const VirtualClock* tl_clock = nullptr;
thread_local int tl_index = -1;

class VirtualClock final : public Clock {
 public:
  Time now() const override { return now_.load(std::memory_order_acquire); }

  void sleep_until(Time deadline) override {
    if (tl_clock != this) {
      // Not one of this clock's cooperative threads: a lone host thread, so
      // time simply jumps forward.
      advance_to(deadline);
      return;
    }
    std::unique_lock<std::mutex> lock(m_);
    sleepers_.emplace(std::max(deadline, now()), tl_index);
    hand_off_locked();
    cv_.wait(lock, [&] { return running_ == tl_index; });
  }

  void run_concurrently(std::vector<std::function<void()>> bodies) override {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (cooperative_) throw std::logic_error("VirtualClock::run_concurrently cannot be nested");
      cooperative_ = true;
      for (int i = 0; i < static_cast<int>(bodies.size()); ++i) sleepers_.emplace(now(), i);
    }
    std::exception_ptr first;
    std::vector<std::thread> threads;
    threads.reserve(bodies.size());
    for (int i = 0; i < static_cast<int>(bodies.size()); ++i) {
      threads.emplace_back([this, i, &bodies, &first] {
        tl_clock = this;
        tl_index = i;
        {
          std::unique_lock<std::mutex> lock(m_);
          cv_.wait(lock, [&] { return running_ == i; });
        }
        try {
          bodies[i]();
        } catch (...) {
          std::lock_guard<std::mutex> lock(m_);
          if (!first) first = std::current_exception();
        }
        std::lock_guard<std::mutex> lock(m_);
        hand_off_locked();
        tl_clock = nullptr;
      });
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      hand_off_locked();
    }
    for (auto& t : threads) t.join();
    {
      std::lock_guard<std::mutex> lock(m_);
      cooperative_ = false;
      running_ = -1;
    }
    if (first) std::rethrow_exception(first);
  }

  bool is_virtual() const override { return true; }
  std::string_view name() const override { return "virtual"; }

 private:
  void advance_to(Time t) {
    Time cur = now_.load(std::memory_order_relaxed);
    while (t > cur && !now_.compare_exchange_weak(cur, t, std::memory_order_acq_rel)) {
    }
  }

  // Gives the run token to the earliest sleeper (ties: lowest index).
  void hand_off_locked() {
    if (sleepers_.empty()) {
      running_ = -1;
      return;
    }
    auto [t, index] = *sleepers_.begin();
    sleepers_.erase(sleepers_.begin());
    advance_to(t);
    running_ = index;
    cv_.notify_all();
  }

  std::atomic<Time> now_{0};
  std::mutex m_;
  std::condition_variable cv_;
  bool cooperative_ = false;
  int running_ = -1;
  std::set<std::pair<Time, int>> sleepers_;
};

}  // namespace

std::unique_ptr<Clock> make_virtual_clock() { return std::make_unique<VirtualClock>(); }

}  // namespace gpemu
