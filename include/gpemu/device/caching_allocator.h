// The emulated GPU memory allocator. It holds no memory: addresses are plain
// numbers. It follows the rules of PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp, PyTorch 1.13-2.x) so that allocated and
// *reserved* memory, and the point where a workload runs out of memory, match
// a real card whose free memory (after the CUDA context) is `capacity_bytes`.
//
// The rules, in short (docs/allocator.md has them in full, with what is left
// out and why):
//   - a request is rounded up to a multiple of 512 bytes (at least 512);
//   - rounded sizes <= 1 MiB come from the small pool, larger ones from the
//     large pool; each pool caches free blocks per stream;
//   - a request takes the smallest cached free block of its pool and stream
//     that fits (lowest address on a tie) and splits off the rest when the
//     rest is big enough (small pool: >= 512 bytes; large pool: > 1 MiB);
//   - when nothing cached fits, a new segment ("cudaMalloc") is reserved:
//     2 MiB for small requests, 20 MiB for large requests under 10 MiB, and
//     the request rounded up to 2 MiB otherwise;
//   - a freed block merges with free neighbours of its segment and stays
//     cached; only empty_cache() (or the out-of-memory retry) gives fully
//     free segments back;
//   - when a new segment does not fit in the capacity, every fully free
//     cached segment is released and the segment is tried once more; if it
//     still does not fit, OutOfMemoryError is thrown with PyTorch's message.
//
// Thread safety: every public member takes an internal mutex, so an
// allocator may be shared by the host threads of one emulated device.
// Allocator objects are cheap (a few hundred bytes, no tables allocated up
// front); allocate() and free() are O(log n) in the number of blocks. Blocks
// and the nodes of its ordered pools and address map come from free lists
// of the allocator's own (kept until it is destroyed), so a steady workload's
// allocate() and free() do not go to the heap.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpemu {

namespace detail {

// Fixed-size nodes carved from chunks and recycled through per-size free
// lists; what a std::set or std::unordered_map node, or an allocator block,
// needs. Larger requests (a hash table's bucket array) go to operator new.
// Memory returns to the heap only when the arena is destroyed.
class NodeArena {
 public:
  NodeArena() = default;
  ~NodeArena();
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  void* allocate(std::size_t bytes);
  void deallocate(void* p, std::size_t bytes) noexcept;

 private:
  static constexpr std::size_t kGrain = 16;   // node sizes are rounded up to this
  static constexpr std::size_t kClasses = 8;  // nodes of up to 128 bytes
  static constexpr std::size_t kChunkBytes = 8192;
  struct FreeNode {
    FreeNode* next;
  };
  struct Chunk {
    Chunk* next;
  };
  FreeNode* free_[kClasses] = {};
  Chunk* chunks_ = nullptr;
  char* cursor_ = nullptr;  // unused tail of the newest chunk
  std::size_t left_ = 0;
};

// A standard allocator drawing from a NodeArena.
template <class T>
struct ArenaAllocator {
  using value_type = T;
  NodeArena* arena;
  explicit ArenaAllocator(NodeArena* a) noexcept : arena(a) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& o) noexcept : arena(o.arena) {}  // NOLINT: rebinding
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= 16, "arena nodes are 16-byte aligned");
    return static_cast<T*>(arena->allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { arena->deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const ArenaAllocator<U>& o) const noexcept {
    return arena == o.arena;
  }
};

}  // namespace detail

// Counters of one allocator, named as in torch.cuda.memory_stats(). Byte
// counts are current values unless prefixed peak_.
struct AllocatorStats {
  // Sizes of live blocks. A block can be larger than the rounded request
  // when the rest of its block was too small to split off (PyTorch counts
  // block sizes too).
  std::uint64_t allocated_bytes = 0;
  // Sum of all segments held from the device ("reserved" in PyTorch).
  std::uint64_t reserved_bytes = 0;
  // Sum of the sizes callers asked for, before rounding.
  std::uint64_t requested_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t peak_requested_bytes = 0;
  std::uint64_t active_blocks = 0;  // live allocations
  std::uint64_t segments = 0;       // segments currently reserved
  // Times the allocator released its cache to retry a segment that did not
  // fit (whether or not the retry then succeeded).
  std::uint64_t num_alloc_retries = 0;
  std::uint64_t num_ooms = 0;          // OutOfMemoryError thrown
  std::uint64_t num_device_alloc = 0;  // segments reserved ("cudaMalloc" calls)
  std::uint64_t num_device_free = 0;   // segments released ("cudaFree" calls)

  bool operator==(const AllocatorStats&) const = default;
};

// Everything that decides what an allocator does next: its blocks in address
// order, its counters and where its next segment would start. Two allocators
// (or one allocator at two times) with equal snapshots answer the same calls
// with the same addresses and counters. A workload that finds its iteration
// left the snapshot unchanged knows the next identical iteration will too.
struct AllocatorSnapshot {
  struct BlockState {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t requested = 0;  // live blocks: the caller's size
    int stream = 0;
    bool small = false;
    bool live = false;
    bool segment_start = false;  // the first block of its segment

    bool operator==(const BlockState&) const = default;
  };
  std::vector<BlockState> blocks;
  AllocatorStats stats;
  std::uint64_t next_address = 0;

  bool operator==(const AllocatorSnapshot&) const = default;
};

// The memory of one GPU that several processes' caching allocators reserve
// their segments from, each process having an allocator of its own: on a
// shared GPU one job's growth leaves less for the others, and the one whose
// segment no longer fits runs out of memory. Thread-safe.
class DeviceMemory {
 public:
  explicit DeviceMemory(std::uint64_t capacity_bytes) : capacity_(capacity_bytes) {}
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  std::uint64_t free() const { return capacity_ - used(); }
  std::uint64_t peak_used() const { return peak_.load(std::memory_order_relaxed); }
  // Takes `bytes` when they fit in what is free; false otherwise.
  bool take(std::uint64_t bytes);
  void give(std::uint64_t bytes);

 private:
  const std::uint64_t capacity_;
  std::atomic<std::uint64_t> used_{0};
  std::atomic<std::uint64_t> peak_{0};
};

class CachingAllocator {
 public:
  using Ptr = std::uint64_t;

  static constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();
  static constexpr std::uint64_t kMinBlockSize = 512;           // rounding unit
  static constexpr std::uint64_t kSmallSize = 1ull << 20;       // largest small-pool request
  static constexpr std::uint64_t kSmallBuffer = 2ull << 20;     // small-pool segment
  static constexpr std::uint64_t kLargeBuffer = 20ull << 20;    // segment for 1-10 MiB requests
  static constexpr std::uint64_t kMinLargeAlloc = 10ull << 20;  // from here segments fit the request
  static constexpr std::uint64_t kRoundLarge = 2ull << 20;      // rounding of those segments

  struct Options {
    // Memory the allocator may reserve: the card's memory minus the CUDA
    // context (the device layer computes it). Default: no limit, which is
    // useful to measure how much a workload would need.
    std::uint64_t capacity_bytes = kUnlimited;
    // PyTorch's max_split_size_mb, in bytes. Cached blocks at least this
    // large are not split, serve only requests at least this large that
    // waste under 20 MiB of them, and are released first when a segment does
    // not fit. Default: unlimited (PyTorch's default). Must be > 20 MiB
    // (PyTorch rejects smaller values too); otherwise InputError.
    std::uint64_t max_split_size_bytes = kUnlimited;
    // Names the device in the out-of-memory message: "(GPU 0; ...".
    std::string device_name = "GPU 0";
    // A GPU shared with other allocators: segments are taken from it (and
    // given back when released or when this allocator is destroyed, as a
    // process's memory is at its exit); capacity_bytes then names its
    // capacity in messages only. Null: the allocator has the GPU to itself.
    DeviceMemory* shared = nullptr;
  };

  // Throws InputError for an impossible option value.
  explicit CachingAllocator(Options options);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Returns the address of a block of at least `bytes` bytes, usable on
  // `stream`. A request of 0 bytes returns 0 and allocates nothing (as
  // PyTorch returns a null pointer). Throws OutOfMemoryError (its
  // requested_bytes() is `bytes`) when the memory cannot be had even after
  // releasing the cache.
  Ptr allocate(std::uint64_t bytes, int stream = 0);

  // Returns the block to the cache of the stream it was allocated on. 0 is
  // ignored; any other address that is not a live allocation of this
  // allocator throws std::invalid_argument.
  void free(Ptr p);

  // Releases every cached segment that holds no live block (torch.cuda.empty_cache()).
  void empty_cache();

  AllocatorStats stats() const;
  // The whole state (O(blocks + segments log segments)); see AllocatorSnapshot.
  AllocatorSnapshot snapshot() const;
  // Sets every peak_ counter to its current value.
  void reset_peak_stats();

  std::uint64_t capacity() const { return options_.capacity_bytes; }
  // Size of the live block at `p` (>= the rounded request). Throws
  // std::invalid_argument when `p` is not a live allocation.
  std::uint64_t block_size(Ptr p) const;

  // The rules, exposed for callers that plan memory and for tests.
  static std::uint64_t round_size(std::uint64_t bytes);
  // Segment reserved for a rounded request when no cached block fits.
  static std::uint64_t segment_size(std::uint64_t rounded_bytes);
  // "512 bytes", "1.50 KiB", "20.00 MiB", "31.75 GiB", as PyTorch prints sizes.
  static std::string format_size(std::uint64_t bytes);

 private:
  struct Block;
  // Orders free blocks by (stream, size, address), so the first block not
  // below (stream, request, 0) is the best fit.
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder, detail::ArenaAllocator<Block*>>;
  using LiveMap = std::unordered_map<Ptr, Block*, std::hash<Ptr>, std::equal_to<Ptr>,
                                     detail::ArenaAllocator<std::pair<const Ptr, Block*>>>;

  Block* find_cached(Pool& pool, int stream, std::uint64_t size);
  Block* reserve_segment(bool small, int stream, std::uint64_t size);
  bool release_oversize_cached(Pool& pool, int stream, std::uint64_t size);
  void release_cached();
  void release_segment(Pool& pool, Pool::iterator it);
  bool should_split(const Block& block, std::uint64_t size) const;
  std::string oom_message(std::uint64_t segment_bytes) const;
  Block* live_block(Ptr p, const char* caller) const;
  void update_peaks();
  Block* new_block();
  void delete_block(Block* b) noexcept;

  Options options_;
  mutable std::mutex mu_;
  detail::NodeArena arena_;  // before the containers that draw from it
  Pool small_pool_;
  Pool large_pool_;
  LiveMap live_;
  Ptr next_address_;
  AllocatorStats stats_;
};

}  // namespace gpemu
