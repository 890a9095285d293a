#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "common/sanitizers.h"
#include "gpemu/clock.h"

// Cooperative threads as fibers: under the virtual clock exactly one host
// thread runs at a time and the next is chosen by the clock, so the threads
// need not be OS threads. On x86-64 they are fibers on the caller's thread,
// switched by a dozen instructions instead of a futex wake-up and two kernel
// context switches (1,024 ranks hand off tens of thousands of times per
// step). The order in which they run is the same sleepers_ order either way.
// Sanitizer builds keep OS threads (ASan and TSan do not follow unannotated
// stack switches).
#if defined(__has_feature)
#if __has_feature(memory_sanitizer)
#define GPEMU_NO_FIBERS 1
#endif
#endif
#if defined(GPEMU_ASAN) || defined(GPEMU_TSAN)
#define GPEMU_NO_FIBERS 1
#endif
#if defined(__x86_64__) && defined(__linux__) && !defined(GPEMU_NO_FIBERS)
#define GPEMU_FIBERS 1
#endif

#if GPEMU_FIBERS
#include <sys/mman.h>
#include <unistd.h>

#include <cxxabi.h>

// Saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores the stack pointer in *from, and resumes the context
// whose stack pointer is `to` (System V AMD64 ABI).
extern "C" void gpemu_fiber_switch(void** from, void* to);
asm(R"(
  .text
  .globl gpemu_fiber_switch
  .type gpemu_fiber_switch,@function
  .p2align 4
gpemu_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gpemu_fiber_switch,.-gpemu_fiber_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif

namespace gpemu {
namespace {

#if GPEMU_FIBERS
// The C++ runtime's per-thread exception state (__cxa_eh_globals, the same
// layout in libstdc++ and libc++abi): each fiber keeps its own, so a fiber
// that switches inside a catch block or while unwinding does not see, or
// corrupt, another fiber's caught exceptions.
struct EhGlobals {
  void* caught = nullptr;
  unsigned int uncaught = 0;
};
EhGlobals& eh_globals() { return *reinterpret_cast<EhGlobals*>(abi::__cxa_get_globals()); }

constexpr std::size_t kFiberStack = std::size_t{1} << 22;  // 4 MiB reserved, touched pages only
#endif

class VirtualClock;
// Which cooperative thread of which clock the calling thread is.
thread_local const VirtualClock* tl_clock = nullptr;
thread_local int tl_index = -1;

class VirtualClock final : public Clock {
 public:
  Time now() const override { return now_.load(std::memory_order_acquire); }

  void sleep_until(Time deadline) override {
#if GPEMU_FIBERS
    if (tl_clock != this) {
      advance_to(deadline);
      return;
    }
    suspend(deadline, 0);
    return;
#endif
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
#if GPEMU_FIBERS
    suspend(now(), 1);
    return;
#endif
    std::unique_lock<std::mutex> lock(m_);
    sleepers_.emplace(now(), 1, tl_index);
    hand_off_locked();
    wait_turn_locked(lock, tl_index);
  }

  void run_concurrently(std::vector<std::function<void()>> bodies) override {
#if GPEMU_FIBERS
    run_fibers(bodies);
    return;
#endif
    {
      std::lock_guard<std::mutex> lock(m_);
      if (cooperative_) throw std::logic_error("VirtualClock::run_concurrently cannot be nested");
      cooperative_ = true;
      first_ = nullptr;
      turn_.clear();
      for (auto& body : bodies) add_thread_locked(std::move(body));
      hand_off_locked();
    }
    // Every thread, those spawned while it joins included: only a thread not
    // yet joined spawns one.
    for (std::size_t i = 0;; ++i) {
      std::thread* t = nullptr;
      {
        std::lock_guard<std::mutex> lock(m_);
        if (i >= threads_.size()) break;
        t = &threads_[i];
      }
      t->join();
    }
    std::exception_ptr first;
    {
      std::lock_guard<std::mutex> lock(m_);
      cooperative_ = false;
      running_ = -1;
      threads_.clear();
      bodies_.clear();
      first = std::exchange(first_, nullptr);
    }
    if (first) std::rethrow_exception(first);
  }

  // One more cooperative thread, due now, with the next index.
  void spawn(std::function<void()> body) override {
    if (tl_clock != this)
      throw std::logic_error(
          "Clock::spawn: the calling thread is not a host thread of the virtual clock's run_concurrently");
    std::lock_guard<std::mutex> lock(m_);
#if GPEMU_FIBERS
    add_fiber_locked(std::move(body));
    return;
#endif
    add_thread_locked(std::move(body));
  }
  bool on_host_thread() const override { return tl_clock == this; }

  bool is_virtual() const override { return true; }
  std::string_view name() const override { return "virtual"; }

 protected:
  int cooperative_thread() const override { return tl_clock == this ? tl_index_of_running() : -1; }

  // The running thread stops taking turns until unpark(); when nobody else
  // could run (every thread parked or finished), a parked one is woken
  // with stranded_ set and throws.
  void park(std::unique_lock<std::mutex>& guard) override {
    guard.unlock();
#if GPEMU_FIBERS
    const int me = running_;
    int next;
    {
      std::lock_guard<std::mutex> lock(m_);
      parked_.insert(me);
      next = pop_next_locked();
    }
    switch_fiber(me, next);
#else
    const int me = tl_index;
    {
      std::unique_lock<std::mutex> lock(m_);
      parked_.insert(me);
      hand_off_locked();
      wait_turn_locked(lock, me);
    }
#endif
    std::lock_guard<std::mutex> lock(m_);
    if (stranded_.erase(me) > 0)
      throw std::logic_error("virtual clock: every host thread waits for an event that no thread is left to set");
  }

  void unpark(int thread) override {
    std::lock_guard<std::mutex> lock(m_);
    if (parked_.erase(thread) > 0) sleepers_.emplace(now(), 0, thread);
  }

 private:
  int tl_index_of_running() const {
#if GPEMU_FIBERS
    return running_;
#else
    return tl_index;
#endif
  }

  // No thread can run: a parked one is woken to fail (park throws), so
  // run_concurrently ends instead of waiting forever.
  bool strand_one_locked() {
    if (!sleepers_.empty() || parked_.empty()) return false;
    const int p = *parked_.begin();
    parked_.erase(parked_.begin());
    stranded_.insert(p);
    sleepers_.emplace(now(), 0, p);
    return true;
  }

  // A cooperative OS thread for `body`, due now (m_ held; without fibers).
  void add_thread_locked(std::function<void()> body) {
    const int i = static_cast<int>(bodies_.size());
    bodies_.push_back(std::move(body));
    turn_.push_back(std::make_unique<std::condition_variable>());
    sleepers_.emplace(now(), 0, i);
    threads_.emplace_back([this, i] { thread_main(i); });
  }

  void thread_main(int i) {
    tl_clock = this;
    tl_index = i;
    std::function<void()>* body = nullptr;
    {
      std::unique_lock<std::mutex> lock(m_);
      wait_turn_locked(lock, i);
      body = &bodies_[static_cast<std::size_t>(i)];
    }
    try {
      (*body)();
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_);
      if (!first_) first_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(m_);
    hand_off_locked();
    tl_clock = nullptr;
  }

  std::deque<std::thread> threads_;  // stable: threads are spawned while others are joined

#if GPEMU_FIBERS
  struct Fiber {
    void* sp = nullptr;
    EhGlobals eh;
  };

  void run_fibers(std::vector<std::function<void()>>& bodies) {
    const std::size_t n = bodies.size();
    {
      std::lock_guard<std::mutex> lock(m_);
      if (cooperative_) throw std::logic_error("VirtualClock::run_concurrently cannot be nested");
      cooperative_ = true;
      try {
        if (n > 0) stacks_.push_back(map_stacks(n));
      } catch (...) {
        cooperative_ = false;
        throw;
      }
      first_ = nullptr;
      for (std::size_t i = 0; i < n; ++i) {
        bodies_.push_back(std::move(bodies[i]));
        fibers_.push_back(new_fiber(static_cast<char*>(stacks_.front().first) + i * stack_slot()));
        sleepers_.emplace(now(), 0, static_cast<int>(i));
      }
    }
    const VirtualClock* outer = tl_clock;
    tl_clock = this;
    int next;
    {
      std::lock_guard<std::mutex> lock(m_);
      next = pop_next_locked();
    }
    switch_fiber(-1, next);  // back here when every fiber has finished
    tl_clock = outer;
    std::exception_ptr first;
    {
      std::lock_guard<std::mutex> lock(m_);
      for (const auto& [region, size] : stacks_) munmap(region, size);
      stacks_.clear();
      fibers_.clear();
      bodies_.clear();
      cooperative_ = false;
      running_ = -1;
      first = std::exchange(first_, nullptr);
    }
    if (first) std::rethrow_exception(first);
  }

  static std::size_t stack_slot() {
    return kFiberStack + static_cast<std::size_t>(sysconf(_SC_PAGESIZE));  // its stack, a guard page below
  }

  // One mapping for `n` stacks, a guard page below each; runtime_error saying why not.
  static std::pair<void*, std::size_t> map_stacks(std::size_t n) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t slot = stack_slot();
    void* region =
        mmap(nullptr, slot * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (region == MAP_FAILED)
      throw std::runtime_error("virtual clock: cannot map stacks for " + std::to_string(n) + " host threads");
    // A guard page below each stack; without it a fiber that overflows its
    // stack would write into its neighbour's without a word. Each guard splits
    // the mapping, so the kernel's vm.max_map_count bounds how many there can be.
    for (std::size_t i = 0; i < n; ++i) {
      if (mprotect(static_cast<char*>(region) + i * slot, page, PROT_NONE) != 0) {
        const int err = errno;
        munmap(region, slot * n);
        throw std::runtime_error("virtual clock: cannot guard the stacks of " + std::to_string(n) + " host threads (" +
                                 std::strerror(err) +
                                 "; each takes two of the kernel's vm.max_map_count mappings): run fewer GPUs "
                                 "per process or raise vm.max_map_count");
      }
    }
    return {region, slot * n};
  }

  // A fiber whose stack slot starts at `low` (its guard page), set to enter
  // fiber_entry on its first switch.
  static Fiber new_fiber(char* low) {
    // The initial frame gpemu_fiber_switch pops: MXCSR/x87 word, six
    // registers, then "returns" into fiber_entry with the stack aligned as
    // after a call.
    auto* top = reinterpret_cast<std::uint64_t*>(low + stack_slot());
    std::uint64_t* sp = top;
    *--sp = 0;                                              // fiber_entry's return address (never used)
    *--sp = reinterpret_cast<std::uint64_t>(&fiber_entry);  // popped by ret
    for (int r = 0; r < 6; ++r) *--sp = 0;                  // rbp rbx r12 r13 r14 r15
    std::uint32_t csr[2] = {0, 0};
    asm volatile("stmxcsr %0" : "=m"(csr[0]));
    asm volatile("fnstcw %0" : "=m"(csr[1]));
    --sp;
    std::memcpy(sp, csr, sizeof(csr));
    Fiber f;
    f.sp = sp;
    return f;
  }

  // A fiber for `body`, due now, on a stack of its own (m_ held).
  void add_fiber_locked(std::function<void()> body) {
    stacks_.push_back(map_stacks(1));
    bodies_.push_back(std::move(body));
    fibers_.push_back(new_fiber(static_cast<char*>(stacks_.back().first)));
    sleepers_.emplace(now(), 0, static_cast<int>(fibers_.size()) - 1);
  }

  static void fiber_entry() {
    const_cast<VirtualClock*>(tl_clock)->fiber_main();
    std::abort();  // fiber_main never returns
  }

  void fiber_main() {
    const int i = running_;
    try {
      bodies_[static_cast<std::size_t>(i)]();
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_);
      if (!first_) first_ = std::current_exception();
    }
    int next;
    {
      std::lock_guard<std::mutex> lock(m_);
      next = pop_next_locked();
    }
    switch_fiber(i, next);  // never resumed
  }

  // The running fiber sleeps until `deadline` and the earliest sleeper runs.
  void suspend(Time deadline, int yielded) {
    const int me = running_;
    int next;
    {
      std::lock_guard<std::mutex> lock(m_);
      sleepers_.emplace(std::max(deadline, now()), yielded, me);
      next = pop_next_locked();
    }
    switch_fiber(me, next);
  }

  // hand_off_locked's choice, returned: -1 when nobody is left (the caller of
  // run_concurrently resumes).
  int pop_next_locked() {
    strand_one_locked();
    if (sleepers_.empty()) {
      running_ = -1;
      return -1;
    }
    auto [t, yielded, index] = *sleepers_.begin();
    sleepers_.erase(sleepers_.begin());
    advance_to(t);
    running_ = index;
    return index;
  }

  void switch_fiber(int from, int to) {
    if (from == to) return;
    void** from_sp = from < 0 ? &main_sp_ : &fibers_[static_cast<std::size_t>(from)].sp;
    EhGlobals& from_eh = from < 0 ? main_eh_ : fibers_[static_cast<std::size_t>(from)].eh;
    void* to_sp = to < 0 ? main_sp_ : fibers_[static_cast<std::size_t>(to)].sp;
    const EhGlobals to_eh = to < 0 ? main_eh_ : fibers_[static_cast<std::size_t>(to)].eh;
    EhGlobals& g = eh_globals();
    from_eh = g;
    g = to_eh;
    gpemu_fiber_switch(from_sp, to_sp);
  }

  // Indexed by thread; a spawn may reallocate it, which no switch minds (a
  // fiber's sp is read and written only while it is switched).
  std::vector<Fiber> fibers_;
  std::vector<std::pair<void*, std::size_t>> stacks_;  // mappings: run_concurrently's, then one a spawn
  void* main_sp_ = nullptr;
  EhGlobals main_eh_;
#endif

  void advance_to(Time t) {
    Time cur = now_.load(std::memory_order_relaxed);
    while (t > cur && !now_.compare_exchange_weak(cur, t, std::memory_order_acq_rel)) {
    }
  }

  // Gives the run token to the earliest sleeper (ties: those that did not
  // yield, then lowest index). Only the chosen thread is woken: waking all of
  // them on every hand-off made each one O(threads).
  void hand_off_locked() {
    strand_one_locked();
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
  // Each thread's body, by index (stable: a body runs while others are spawned).
  std::deque<std::function<void()>> bodies_;
  std::exception_ptr first_;                                    // the first body's exception
  std::vector<std::unique_ptr<std::condition_variable>> turn_;  // one per cooperative thread
  bool cooperative_ = false;
  int running_ = -1;
  std::set<std::tuple<Time, int, int>> sleepers_;  // deadline, yielded, thread index
  std::set<int> parked_;                           // waiting on a ClockEvent
  std::set<int> stranded_;                         // woken because nothing else could run
};

}  // namespace

std::unique_ptr<Clock> make_virtual_clock() { return std::make_unique<VirtualClock>(); }

}  // namespace gpemu
