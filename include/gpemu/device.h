// An emulated GPU: its streams and engines, its memory as the caching allocator sees it,
// its PCIe host link and the host memory it copies from.
//
// Sections: host memory, pcie, caching allocator, device.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/time.h"
#include "gpemu/timeline.h"

// ==== host memory ====
//
// Host memory for copies to and from emulated GPUs. Pageable memory is plain
// heap memory; pinned (page-locked) memory is really locked with mlock(2) so
// that a data pipeline using it pays the same host-side costs as with
// cudaHostAlloc, or, in accounted-only mode, merely counted.
//
// Thread safety: HostBuffer objects are not shared; the global pinned-bytes
// counter is atomic.

namespace gpemu {

enum class HostMemoryKind { Pageable, Pinned };
std::string_view to_string(HostMemoryKind k);

enum class PinMode {
  Lock,         // mmap + mlock; ResourceError when RLIMIT_MEMLOCK is too low
  AccountOnly,  // allocate normally, count as pinned, do not lock
};

class HostBuffer {
 public:
  HostBuffer() = default;
  // Throws ResourceError (naming the size, the limit and how to raise it)
  // when kind is Pinned, mode is Lock and the memory cannot be locked.
  HostBuffer(std::size_t bytes, HostMemoryKind kind, PinMode mode = PinMode::Lock);
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  HostMemoryKind kind() const { return kind_; }
  bool locked() const { return locked_; }

 private:
  void release() noexcept;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  HostMemoryKind kind_ = HostMemoryKind::Pageable;
  bool locked_ = false;
  bool mapped_ = false;
};

// Bytes currently held in pinned HostBuffers in this process (locked or accounted).
std::uint64_t pinned_host_bytes();

// Whether `bytes` more of pinned buffers can really be locked: within
// RLIMIT_MEMLOCK (beyond what is locked already), or the process may lock
// beyond it (CAP_IPC_LOCK, e.g. root), which a probe lock of one page more
// than the limit shows.
bool can_lock_pinned(std::uint64_t bytes);

// A byte size as people write it: 0, 123456, 512K, 256M, 4G (powers of 1024;
// an optional trailing B or iB), 0 or from 1 byte to kMaxByteSize. InputError
// naming `what` otherwise.
inline constexpr std::uint64_t kMaxByteSize = std::uint64_t{1} << 50;
std::uint64_t parse_byte_size(std::string_view text, std::string_view what);

}  // namespace gpemu

// ==== pcie ====
//
// PCIe host-link model: the bandwidth and latency an emulated GPU's copies to
// and from host memory get, by PCIe generation and lane count, for pinned and
// for pageable host memory. Figures and their sources: docs/pcie.md.

namespace gpemu {

struct PcieModel {
  int generation = 3;
  int lanes = 16;
  double raw_gbs = 0;       // per direction, after line encoding, GB/s
  double pinned_gbs = 0;    // achievable cudaMemcpyAsync from pinned memory
  double pageable_gbs = 0;  // achievable from pageable memory (staged through a driver bounce buffer)
  Duration pinned_latency = 0;
  Duration pageable_latency = 0;

  double gbs(HostMemoryKind k) const { return k == HostMemoryKind::Pinned ? pinned_gbs : pageable_gbs; }
  Duration latency(HostMemoryKind k) const { return k == HostMemoryKind::Pinned ? pinned_latency : pageable_latency; }

  // InputError for a generation outside 1..6 or lanes not in {1,2,4,8,16}.
  static PcieModel for_link(int generation, int lanes);
};

}  // namespace gpemu

// ==== caching allocator ====
//
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

// ==== device ====
//
// An emulated GPU: a compute engine and separate host-to-device and
// device-to-host copy engines, streams, events and a caching allocator, all
// on a Timeline. Work is issued asynchronously, as with CUDA: issuing returns
// at once with the operation's place on the emulated timeline already fixed
// (or, for transfers over a shared link, to be fixed by the flow simulation);
// only synchronize/wait calls block the host, until an absolute deadline.
//
// CUDA semantics reproduced:
//  - A stream is FIFO: an operation starts after the previous one on its stream.
//  - Each engine runs one operation at a time (kernels on the compute engine
//    are serialised, which is what kernels that fill the GPU do; copies in one
//    direction share that direction's copy engine), so copies on one stream
//    overlap kernels on another.
//  - The default stream is CUDA's legacy default stream: work on it waits for
//    all earlier work on the device's blocking streams, and work on a
//    blocking stream waits for earlier default-stream work. Streams created
//    non-blocking are exempt, as with cudaStreamNonBlocking.
//  - Events record the point a stream has reached; they can be waited on by
//    other streams, queried, synchronized, and give elapsed time.
//  - Copies from pageable host memory return to the host only when done
//    (the driver stages them synchronously); copies from pinned memory are
//    asynchronous.
//
// Thread safety: a Device may be used from several host threads; streams and
// events are used by one host thread at a time, like CUDA's.

namespace gpemu {

enum class Engine : int { Compute = 0, CopyH2D = 1, CopyD2H = 2 };
inline constexpr int kEngineCount = 3;
std::string_view to_string(Engine e);

class Device;
class Event;
class SharedGpu;
struct MigProfile;

// What a kernel keeps busy when it runs alone: its share of the SMs and of
// the memory bandwidth (the bottleneck at 1). Only a shared GPU reads it
// (SharePolicy::Mps and Mig, docs/sharing.md); 1, 1 when not known.
struct KernelDemand {
  float sm = 1, bw = 1;
};

// A process's place on a GPU several processes share (SharedGpu).
struct ShareContext {
  SharedGpu* gpu = nullptr;  // null: the device is the process's alone
  int priority = 0;          // SharePolicy::Priority: larger goes first
  std::string mig;           // SharePolicy::Mig: its slice's profile, e.g. "3g.20gb"
};

// Share of the memory left after the context that cuDNN workspaces and the
// fragmentation they cause take in a real run (the traced tensors do not
// have them): fitted on the OOM points of GPEmu's four measured cards,
// stable to 0.2 points when one card is left out (docs/zoo-memory.md).
inline constexpr double kDefaultWorkspaceMargin = 0.04;

struct DeviceOptions {
  int index = 0;  // device ordinal: trace row, "GPU n" in messages
  // Memory the CUDA context and cuDNN/cuBLAS handles hold, not available to
  // tensors. Default by architecture (docs/device.md).
  std::optional<std::uint64_t> context_reserve_bytes;
  // Tensors get (reported memory - context) / (1 + workspace_margin).
  double workspace_margin = kDefaultWorkspaceMargin;
  // Host link; default from the GPU's PCIe generation and lanes.
  std::optional<PcieModel> pcie;
  // Shared host links (e.g. several GPUs behind one PCIe switch or root
  // port). Null: the device gets dedicated links.
  const Link* host_link_h2d = nullptr;
  const Link* host_link_d2h = nullptr;
  // Passed to the caching allocator.
  std::uint64_t max_split_size_bytes = UINT64_MAX;
  // A GPU shared with other processes: its host links, memory and compute
  // engine are the shared GPU's (host_link_* and the memory options above
  // are then taken from it).
  ShareContext share;
};

class Stream {
 public:
  Device& device() const { return *device_; }
  int id() const { return id_; }
  bool is_default() const { return id_ == 0; }
  bool non_blocking() const { return non_blocking_; }

  // A kernel of the given duration (on the GPU alone) on the compute engine.
  Completion launch_kernel(Duration duration, std::string_view name = "kernel", KernelDemand demand = {});
  // Copies over the device's host link; pageable copies block the host until done.
  Completion copy_h2d(std::uint64_t bytes, HostMemoryKind from, std::string_view name = "H2D");
  Completion copy_d2h(std::uint64_t bytes, HostMemoryKind to, std::string_view name = "D2H");
  // General form for the layers above (collectives): the operation is ordered
  // after this stream's tail, the engine's tail when engine is given, and extra.
  Completion enqueue(const OpSpec& spec, std::optional<Engine> engine, std::span<const Completion> extra = {});

  void record(Event& event);
  // Later work on this stream waits for event (cudaStreamWaitEvent).
  void wait(const Event& event);
  // Blocks the host until all work issued to this stream has completed.
  void synchronize();
  // True when all work issued to this stream has completed.
  bool query();
  const Completion& tail() const { return tail_; }

 private:
  friend class Device;
  Stream(Device* device, int id, bool non_blocking) : device_(device), id_(id), non_blocking_(non_blocking) {}
  Device* device_;
  int id_;
  bool non_blocking_;
  Completion tail_;
};

class Event {
 public:
  bool recorded() const { return recorded_; }
  // True when the work captured by the last record() has completed
  // (cudaEventQuery); true for an event never recorded, as in CUDA.
  bool query();
  // Blocks the host until the captured work has completed.
  void synchronize();
  // When the stream reached this event; blocks until it has.
  Time time();
  // end.time() - start.time() (cudaEventElapsedTime, exact here). Throws
  // std::logic_error if either event was never recorded.
  static Duration elapsed(Event& start, Event& end);

 private:
  friend class Stream;
  Timeline* timeline_ = nullptr;
  Completion completion_;
  bool recorded_ = false;
};

struct DeviceStats {
  Duration busy[kEngineCount] = {0, 0, 0};  // summed durations of fixed-cost work per engine
  std::uint64_t kernels = 0;
  std::uint64_t h2d_bytes = 0;
  std::uint64_t d2h_bytes = 0;
};

class Device {
 public:
  // On a shared GPU (options.share.gpu) the process's CUDA context is taken
  // from the GPU's memory: OutOfMemoryError when it does not fit; a MIG slice
  // is taken from the GPU: InputError when none of its profile is left.
  Device(Timeline& timeline, const GpuSpec& spec, DeviceOptions options = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const GpuSpec& spec() const { return *spec_; }
  int index() const { return index_; }
  Timeline& timeline() const { return *timeline_; }
  const PcieModel& pcie() const { return pcie_; }
  CachingAllocator& allocator() { return allocator_; }
  const CachingAllocator& allocator() const { return allocator_; }
  std::uint64_t context_reserve_bytes() const { return context_reserve_; }
  // The shared GPU this device is a process's view of, or null.
  SharedGpu* shared() const { return share_.gpu; }

  Stream& default_stream() { return streams_.front(); }
  // Streams live as long as the device; references stay valid.
  Stream& create_stream(bool non_blocking = false);

  // Blocks the host until all work on the device has completed (cudaDeviceSynchronize).
  void synchronize();
  const DeviceStats& stats() const { return stats_; }

  // Default CUDA-context reserve for a GPU (docs/device.md).
  static std::uint64_t default_context_reserve(const GpuSpec& spec);
  // The memory tensors can use: the card's reported memory
  // (GpuSpec::reported_memory) less the context, divided by 1 + margin.
  // Throws InputError for a negative or non-finite margin.
  static std::uint64_t tensor_capacity(const GpuSpec& spec, std::uint64_t context_reserve,
                                       double workspace_margin = kDefaultWorkspaceMargin);

 private:
  friend class Stream;
  Completion enqueue(Stream& s, const OpSpec& spec, std::optional<Engine> engine, std::span<const Completion> extra);
  Completion copy(Stream& s, Engine engine, std::uint64_t bytes, HostMemoryKind host, std::string_view name);

  Timeline* timeline_;
  const GpuSpec* spec_;
  int index_;
  std::uint64_t context_reserve_;
  PcieModel pcie_;
  const Link* link_h2d_;
  const Link* link_d2h_;
  ShareContext share_;
  const MigProfile* mig_ = nullptr;  // the MIG slice the device is, or null
  CachingAllocator allocator_;
  std::deque<Stream> streams_;
  std::array<Completion, kEngineCount> engine_tail_;
  DeviceStats stats_;
};

}  // namespace gpemu

// ==== sharing ====
//
// One emulated GPU that several processes (training jobs) share, each with
// its own Device (streams, caching allocator, CUDA context) on one timeline.
// What they share and how (docs/sharing.md has the policies' bases):
//   - memory: one card; every process's context and segments come out of
//     it, so one job's growth makes another run out where it would on the
//     card (Mig: each slice its own memory);
//   - the host links: one PCIe link each way;
//   - the compute engine, under a policy:
//       Fifo       a process's iteration has the GPU to itself; iterations
//                  in the order their first kernels were issued (GPEmu's
//                  manager), via begin_turn/end_turn;
//       TimeSlice  round-robin quanta: the active processes share the GPU
//                  equally, losing quantum / (quantum + switch) of it while
//                  two or more are active;
//       Priority   kernel by kernel, highest priority first; a running
//                  kernel is not preempted;
//       Mps        kernels run concurrently, each slowed by the busiest of
//                  the SMs and memory bandwidth (KernelDemand sums);
//       Mig        fixed slices of the card's MIG profiles, each with its
//                  share of SMs, memory and bandwidth; no interference.
//
// Thread safety: all members may be called from the processes' host threads.

namespace gpemu {

// A sharing policy, by name: the five built-in ones as constants, any
// registered one from parse_share_policy. The policy itself, what it does, is
// an object behind one interface (sharing_policy.h), one file each.
class SharePolicy {
 public:
  static const SharePolicy Fifo, TimeSlice, Priority, Mps, Mig;
  // `name` must outlive every use (a literal, or a registered policy's name).
  constexpr explicit SharePolicy(std::string_view name) : name_(name) {}
  constexpr std::string_view name() const { return name_; }
  friend bool operator==(const SharePolicy& a, const SharePolicy& b) { return a.name_ == b.name_; }

 private:
  std::string_view name_;
};
inline constexpr SharePolicy SharePolicy::Fifo{"fifo"};
inline constexpr SharePolicy SharePolicy::TimeSlice{"timeslice"};
inline constexpr SharePolicy SharePolicy::Priority{"priority"};
inline constexpr SharePolicy SharePolicy::Mps{"mps"};
inline constexpr SharePolicy SharePolicy::Mig{"mig"};
std::string_view to_string(SharePolicy p);
// A registered policy's name ("fifo", "timeslice", "priority", "mps", "mig",
// and any registered since); InputError naming them otherwise.
SharePolicy parse_share_policy(std::string_view text);
class SharingPolicy;

// A MIG GPU-instance profile: its sevenths of the SMs and eighths of the
// memory (and memory bandwidth), from NVIDIA's MIG user guide ("Supported
// MIG Profiles"; docs/sharing.md).
struct MigProfile {
  std::string name;  // e.g. "3g.20gb"
  int compute_sevenths = 0;
  int memory_eighths = 0;
  int max_instances = 0;  // of this profile on one card
};
// The card's profiles; empty for a card without MIG.
std::vector<MigProfile> mig_profiles(const GpuSpec& gpu);
// InputError naming the card and its profiles when it has no such profile.
const MigProfile& find_mig_profile(const GpuSpec& gpu, std::string_view name);

struct ShareOptions {
  SharePolicy policy = SharePolicy::Fifo;
  Duration timeslice = 2 * kMillisecond;     // TimeSlice: the quantum
  Duration switch_cost = 25 * kMicrosecond;  // TimeSlice: a context switch
  // As DeviceOptions (the card's memory left to tensors).
  double workspace_margin = kDefaultWorkspaceMargin;
};

class SharedGpu {
 public:
  // InputError for a policy the card cannot run (Mig on a card without MIG)
  // or an impossible option.
  SharedGpu(Timeline& timeline, const GpuSpec& spec, ShareOptions options = {});
  SharedGpu(const SharedGpu&) = delete;
  SharedGpu& operator=(const SharedGpu&) = delete;

  Timeline& timeline() const { return *timeline_; }
  const GpuSpec& spec() const { return *spec_; }
  const ShareOptions& options() const { return options_; }
  SharePolicy policy() const { return options_.policy; }
  // What the policy does (sharing_policy.h).
  const SharingPolicy& sharing() const { return *sharing_; }
  // The policy gives a process's step the GPU alone (begin_turn/end_turn).
  bool exclusive_steps() const;
  // The policy gives each process a MIG slice of its own (take_slice).
  bool slices() const;
  DeviceMemory& memory() { return memory_; }
  const Link& host_link_h2d() const { return *h2d_; }
  const Link& host_link_d2h() const { return *d2h_; }
  // The compute engine as a link whose bytes are nanoseconds of kernel time
  // (the policy's compute_share: TimeSlice, Priority, Mps); null for Fifo and Mig.
  const Link* compute_link() const { return compute_; }

  // slices (mig): takes a slice of `profile` (the placement rule kept: at most 7
  // sevenths, 8 eighths and the profile's instances); InputError when it
  // does not fit beside the slices taken. give_slice returns it.
  const MigProfile& take_slice(std::string_view profile);
  void give_slice(const MigProfile& profile);

  // exclusive_steps (fifo): the issuing host holds the GPU from begin_turn to end_turn (it
  // must not sleep in between: the turn is a mutex); its kernels go after
  // the returned completion, the end of the previous turn's last kernel.
  Completion begin_turn();
  void end_turn(const Completion& last);

 private:
  Timeline* timeline_;
  const GpuSpec* spec_;
  ShareOptions options_;
  const SharingPolicy* sharing_;
  DeviceMemory memory_;
  const Link* h2d_ = nullptr;
  const Link* d2h_ = nullptr;
  const Link* compute_ = nullptr;
  std::mutex slices_mu_;
  int sevenths_ = 0, eighths_ = 0;
  std::vector<int> instances_;  // per profile
  std::mutex turn_mu_;
  Completion last_turn_;
};

}  // namespace gpemu
