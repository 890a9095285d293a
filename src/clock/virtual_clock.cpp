#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>
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
    sleepers_.emplace(std::max(deadline, now()), 0, tl_index);
    hand_off_locked();
    wait_turn_locked(lock, tl_index);
  }

  void yield_to_peers() override {
    if (tl_clock != this) return;
    std::unique_lock<std::mutex> lock(m_);
    sleepers_.emplace(now(), 1, tl_index);
    hand_off_locked();
    wait_turn_locked(lock, tl_index);
  }

  void run_concurrently(std::vector<std::function<void()>> bodies) override {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (cooperative_) throw std::logic_error("VirtualClock::run_concurrently cannot be nested");
      cooperative_ = true;
      for (int i = 0; i < static_cast<int>(bodies.size()); ++i) sleepers_.emplace(now(), 0, i);
      turn_.clear();
      for (std::size_t i = 0; i < bodies.size(); ++i) turn_.push_back(std::make_unique<std::condition_variable>());
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
          wait_turn_locked(lock, i);
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

  // Gives the run token to the earliest sleeper (ties: those that did not
  // yield, then lowest index). Only the chosen thread is woken: waking all of
  // them on every hand-off made each one O(threads).
  void hand_off_locked() {
    if (sleepers_.empty()) {
      running_ = -1;
      return;
    }
    auto [t, yielded, index] = *sleepers_.begin();
    sleepers_.erase(sleepers_.begin());
    advance_to(t);
    running_ = index;
    turn_[index]->notify_one();
  }

  void wait_turn_locked(std::unique_lock<std::mutex>& lock, int index) {
    turn_[index]->wait(lock, [&] { return running_ == index; });
  }

  std::atomic<Time> now_{0};
  std::mutex m_;
  std::vector<std::unique_ptr<std::condition_variable>> turn_;  // one per cooperative thread
  bool cooperative_ = false;
  int running_ = -1;
  std::set<std::tuple<Time, int, int>> sleepers_;  // deadline, yielded, thread index
};

}  // namespace

std::unique_ptr<Clock> make_virtual_clock() { return std::make_unique<VirtualClock>(); }

}  // namespace gpemu
