// A pending operation of the timeline (PendingOp: its dependencies, its flow
// on a link, the simulation's scratch state and its trace tags) and the pool
// its memory comes from (OpPool, OpAllocator), which timeline.cpp's
// simulation allocates and retires in bursts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "gpemu/timeline.h"

namespace gpemu::detail {

struct PendingOp {
  // What a resolution touches for every operation comes first, so that an
  // operation costs the resolution as few cache lines as it can: a large
  // job's step holds more operations in flight than the caches hold.
  std::atomic<bool> final{false};
  bool s_start_known = false, s_end_known = false, s_joined = false;  // simulation scratch
  // Flow state committed at the timeline's horizon.
  bool c_joined = false;
  bool c_running = false;  // ShareRule::Priority: the transfer its link was running
  bool trace = true;
  int s_unknown = 0;  // deps whose end the simulation does not know yet
  int link = -1;      // index into the timeline's links; -1 for fixed-cost ops
  int link2 = -1;     // a second link crossed at the same time, or -1
  Time end = -1;
  Time s_end = 0;
  Time lower_bound = 0;
  Duration duration = 0;
  std::vector<std::shared_ptr<PendingOp>> deps;  // those still pending at issue
  // Pending operations that list this one in deps: told when its end becomes
  // known, so the simulation never scans for what became determinable.
  std::vector<PendingOp*> dependents;
  std::uint64_t seq = 0;  // issue order
  Time start = -1;

  // Transfers.
  double bytes = 0;
  double cap = 0;  // bytes per ns
  Time c_start = 0;
  double c_remaining = 0;
  Time s_start = 0, s_join_at = 0, s_finish_at = 0;
  double s_remaining = 0, s_rate = 0;
  Time s_rem_t = 0;                    // the time s_remaining refers to
  double s_share[2] = {0, 0};          // rate granted by the last water-fill of link, link2
  int priority = 0;                    // ShareRule::Priority
  float sm_demand = 1, bw_demand = 1;  // ShareRule::Demand

  // The trace.
  const std::string* name = nullptr;
  const std::string* category = nullptr;
  int device = -1, stream = -1, engine = -1;
};

// Memory for pending operations. A training step of a large job puts every
// rank's operations in flight at once and retires them together, so from
// the heap each step is a burst of mallocs of one size, then of frees, and
// the heap's top is returned and faulted in again. The pool recycles the
// blocks instead and returns memory only when the last operation (a
// Completion may outlive its Timeline) and the timeline are gone. Frees can
// come from any host thread, hence the mutex.
class OpPool {
 public:
  static constexpr std::size_t kBlockBytes = (sizeof(PendingOp) + 64 + 15) / 16 * 16;
  OpPool() = default;
  OpPool(const OpPool&) = delete;
  OpPool& operator=(const OpPool&) = delete;
  ~OpPool() {
    for (void* c : chunks_) ::operator delete(c);
  }
  void* allocate() {
    std::lock_guard lock(mu_);
    if (free_) {
      Free* f = free_;
      free_ = f->next;
      return f;
    }
    if (left_ == 0) {
      constexpr std::size_t bytes = kChunkBlocks * kBlockBytes;
      cursor_ = static_cast<char*>(::operator new(bytes));
      chunks_.push_back(cursor_);
      left_ = kChunkBlocks;
    }
    void* p = cursor_;
    cursor_ += kBlockBytes;
    --left_;
    return p;
  }
  void deallocate(void* p) noexcept {
    std::lock_guard lock(mu_);
    auto* f = static_cast<Free*>(p);
    f->next = free_;
    free_ = f;
  }

 private:
  static constexpr std::size_t kChunkBlocks = 256;
  struct Free {
    Free* next;
  };
  std::mutex mu_;
  Free* free_ = nullptr;
  std::vector<void*> chunks_;
  char* cursor_ = nullptr;
  std::size_t left_ = 0;
};

// What std::allocate_shared<PendingOp> allocates its control block with.
template <class T>
struct OpAllocator {
  using value_type = T;
  std::shared_ptr<OpPool> pool;
  explicit OpAllocator(std::shared_ptr<OpPool> p) noexcept : pool(std::move(p)) {}
  template <class U>
  OpAllocator(const OpAllocator<U>& o) noexcept : pool(o.pool) {}  // NOLINT: rebinding
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    if (n * sizeof(T) <= OpPool::kBlockBytes) return static_cast<T*>(pool->allocate());
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) <= OpPool::kBlockBytes) {
      pool->deallocate(p);
    } else {
      ::operator delete(p);
    }
  }
  template <class U>
  bool operator==(const OpAllocator<U>& o) const noexcept {
    return pool == o.pool;
  }
};

}  // namespace gpemu::detail
