// Emulated PyTorch CUDA caching allocator; see include/gpemu/caching_allocator.h
// and docs/allocator.md for the rules.
#include "gpemu/device.h"

#include <algorithm>
#include <new>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {

// A contiguous range of one segment, live or free. The blocks of a segment
// form a doubly linked list in address order; a block with neither
// neighbour is a whole segment.
struct CachingAllocator::Block {
  Ptr address = 0;
  std::uint64_t size = 0;
  std::uint64_t requested = 0;  // caller's size while live
  int stream = 0;               // the segment's stream, for its whole life
  bool small = false;           // which pool the segment belongs to
  bool live = false;
  Block* prev = nullptr;
  Block* next = nullptr;

  bool whole_segment() const { return prev == nullptr && next == nullptr; }
};

namespace {

// Where emulated segments start: a plausible device address, never 0.
constexpr CachingAllocator::Ptr kFirstAddress = 0x7f0000000000ull;
constexpr std::uint64_t kMax = CachingAllocator::kUnlimited;

// Rounds up to a multiple of `unit`, saturating instead of wrapping, so an
// absurd request fails as out of memory rather than becoming a small one.
std::uint64_t round_up(std::uint64_t n, std::uint64_t unit) {
  if (n > kMax - (unit - 1)) return kMax;
  return (n + unit - 1) / unit * unit;
}

}  // namespace

namespace detail {

NodeArena::~NodeArena() {
  while (chunks_ != nullptr) {
    Chunk* c = chunks_;
    chunks_ = c->next;
    ::operator delete(c);
  }
}

void* NodeArena::allocate(std::size_t bytes) {
  const std::size_t cls = (bytes + kGrain - 1) / kGrain;
  if (cls == 0 || cls > kClasses) return ::operator new(bytes);
  if (FreeNode* n = free_[cls - 1]; n != nullptr) {
    free_[cls - 1] = n->next;
    return n;
  }
  const std::size_t size = cls * kGrain;
  if (left_ < size) {
    // The chunk's header takes one grain, so its nodes stay 16-byte aligned.
    static_assert(sizeof(Chunk) <= kGrain);
    auto* c = static_cast<Chunk*>(::operator new(kChunkBytes));
    c->next = chunks_;
    chunks_ = c;
    cursor_ = reinterpret_cast<char*>(c) + kGrain;
    left_ = kChunkBytes - kGrain;  // a smaller tail of the old chunk is dropped
  }
  void* p = cursor_;
  cursor_ += size;
  left_ -= size;
  return p;
}

void NodeArena::deallocate(void* p, std::size_t bytes) noexcept {
  const std::size_t cls = (bytes + kGrain - 1) / kGrain;
  if (cls == 0 || cls > kClasses) {
    ::operator delete(p);
    return;
  }
  auto* n = static_cast<FreeNode*>(p);
  n->next = free_[cls - 1];
  free_[cls - 1] = n;
}

}  // namespace detail

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->address < b->address;
}

CachingAllocator::Block* CachingAllocator::new_block() { return new (arena_.allocate(sizeof(Block))) Block{}; }

void CachingAllocator::delete_block(Block* b) noexcept {
  static_assert(std::is_trivially_destructible_v<Block>);
  arena_.deallocate(b, sizeof(Block));
}

CachingAllocator::CachingAllocator(Options options)
    : options_(std::move(options)),
      small_pool_(BlockOrder{}, detail::ArenaAllocator<Block*>(&arena_)),
      large_pool_(BlockOrder{}, detail::ArenaAllocator<Block*>(&arena_)),
      live_(1024, std::hash<Ptr>{}, std::equal_to<Ptr>{}, LiveMap::allocator_type(&arena_)),
      next_address_(kFirstAddress) {
  if (options_.max_split_size_bytes <= kLargeBuffer) {
    throw InputError(
        fmt::format("caching allocator: max_split_size_bytes {} is too small; it must be above {} (20 MiB), "
                    "or unlimited (the default)",
                    options_.max_split_size_bytes, kLargeBuffer));
  }
}

// Blocks live in arena_, which frees them with the containers' nodes.
CachingAllocator::~CachingAllocator() {
  if (options_.shared) options_.shared->give(stats_.reserved_bytes);
}

std::uint64_t CachingAllocator::round_size(std::uint64_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : round_up(bytes, kMinBlockSize);
}

std::uint64_t CachingAllocator::segment_size(std::uint64_t rounded_bytes) {
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded_bytes, kRoundLarge);
}

std::string CachingAllocator::format_size(std::uint64_t bytes) {
  // PyTorch's thresholds are inclusive: 1024 bytes prints as "1024 bytes"
  // and 1 MiB as "1024.00 KiB".
  if (bytes <= 1024) return fmt::format("{} bytes", bytes);
  if (bytes <= (1ull << 20)) return fmt::format("{:.2f} KiB", bytes / 1024.0);
  if (bytes <= (1ull << 30)) return fmt::format("{:.2f} MiB", bytes / 1048576.0);
  return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

CachingAllocator::Ptr CachingAllocator::allocate(std::uint64_t bytes, int stream) {
  if (bytes == 0) return 0;
  std::lock_guard lock(mu_);

  const std::uint64_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  Pool& pool = small ? small_pool_ : large_pool_;

  Block* block = find_cached(pool, stream, size);
  if (block == nullptr) block = reserve_segment(small, stream, size);
  if (block == nullptr && release_oversize_cached(pool, stream, size)) {
    block = reserve_segment(small, stream, size);
  }
  if (block == nullptr) {
    release_cached();
    ++stats_.num_alloc_retries;
    block = reserve_segment(small, stream, size);
  }
  if (block == nullptr) {
    ++stats_.num_ooms;
    throw OutOfMemoryError(oom_message(segment_size(size)), bytes);
  }

  if (should_split(*block, size)) {
    // The request takes the low end; the rest stays cached.
    Block* rest = new_block();
    *rest = Block{block->address + size, block->size - size, 0, stream, small, false, block, block->next};
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    pool.insert(rest);
  }

  block->live = true;
  block->requested = bytes;
  live_.emplace(block->address, block);
  stats_.allocated_bytes += block->size;
  stats_.requested_bytes += bytes;
  ++stats_.active_blocks;
  update_peaks();
  return block->address;
}

void CachingAllocator::free(Ptr p) {
  if (p == 0) return;
  std::lock_guard lock(mu_);
  Block* block = live_block(p, "free");
  live_.erase(p);
  stats_.allocated_bytes -= block->size;
  stats_.requested_bytes -= block->requested;
  --stats_.active_blocks;
  block->live = false;
  block->requested = 0;

  Pool& pool = block->small ? small_pool_ : large_pool_;
  // Absorb free neighbours; they leave the pool before their keys change.
  if (Block* prev = block->prev; prev != nullptr && !prev->live) {
    pool.erase(prev);
    block->address = prev->address;
    block->size += prev->size;
    block->prev = prev->prev;
    if (block->prev != nullptr) block->prev->next = block;
    delete_block(prev);
  }
  if (Block* next = block->next; next != nullptr && !next->live) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete_block(next);
  }
  pool.insert(block);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  release_cached();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

AllocatorSnapshot CachingAllocator::snapshot() const {
  std::lock_guard lock(mu_);
  AllocatorSnapshot snap;
  snap.stats = stats_;
  snap.next_address = next_address_;
  snap.blocks.reserve(small_pool_.size() + large_pool_.size() + live_.size());
  auto add = [&](const Block* b) {
    snap.blocks.push_back({b->address, b->size, b->requested, b->stream, b->small, b->live, b->prev == nullptr});
  };
  // Address order without sorting every block: segments in address order,
  // each walked along its block list (blocks partition their segment).
  std::vector<const Block*> segments;
  segments.reserve(stats_.segments);
  for (const Block* b : small_pool_)
    if (b->prev == nullptr) segments.push_back(b);
  for (const Block* b : large_pool_)
    if (b->prev == nullptr) segments.push_back(b);
  for (const auto& entry : live_)
    if (entry.second->prev == nullptr) segments.push_back(entry.second);
  std::sort(segments.begin(), segments.end(), [](const Block* a, const Block* b) { return a->address < b->address; });
  for (const Block* s : segments)
    for (const Block* b = s; b != nullptr; b = b->next) add(b);
  return snap;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
  stats_.peak_requested_bytes = stats_.requested_bytes;
}

std::uint64_t CachingAllocator::block_size(Ptr p) const {
  std::lock_guard lock(mu_);
  return live_block(p, "block_size")->size;
}

CachingAllocator::Block* CachingAllocator::find_cached(Pool& pool, int stream, std::uint64_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  const std::uint64_t max_split = options_.max_split_size_bytes;
  if (max_split != kUnlimited) {
    // Oversize blocks are kept for oversize requests, and only for those
    // that would leave less than 20 MiB of them unused.
    if (size < max_split && block->size >= max_split) return nullptr;
    if (size >= max_split && block->size - size >= kLargeBuffer) return nullptr;
  }
  pool.erase(it);
  return block;
}

bool DeviceMemory::take(std::uint64_t bytes) {
  std::uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > capacity_ - used) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  std::uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (peak < used + bytes && !peak_.compare_exchange_weak(peak, used + bytes, std::memory_order_relaxed)) {
  }
  return true;
}

void DeviceMemory::give(std::uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

CachingAllocator::Block* CachingAllocator::reserve_segment(bool small, int stream, std::uint64_t size) {
  const std::uint64_t bytes = segment_size(size);
  if (bytes > kMax - next_address_) return nullptr;  // emulated address space exhausted
  if (options_.shared) {
    if (!options_.shared->take(bytes)) return nullptr;
  } else if (bytes > options_.capacity_bytes - stats_.reserved_bytes) {
    return nullptr;
  }
  Block* block = new_block();
  *block = Block{next_address_, bytes, 0, stream, small, false, nullptr, nullptr};
  next_address_ += bytes;
  stats_.reserved_bytes += bytes;
  ++stats_.segments;
  ++stats_.num_device_alloc;
  update_peaks();
  return block;
}

bool CachingAllocator::release_oversize_cached(Pool& pool, int stream, std::uint64_t size) {
  const std::uint64_t max_split = options_.max_split_size_bytes;
  if (max_split == kUnlimited) return false;
  Block key;
  key.stream = stream;
  key.size = std::max(size, max_split);
  auto it = pool.lower_bound(&key);
  // One cached oversize segment as large as the request: give it back.
  for (auto i = it; i != pool.end() && (*i)->stream == stream; ++i) {
    if ((*i)->whole_segment()) {
      release_segment(pool, i);
      return true;
    }
  }
  // Otherwise give back oversize segments, largest first, until as much
  // as the request has been released.
  std::uint64_t released = 0;
  while (released < key.size && it != pool.begin()) {
    auto i = std::prev(it);
    if ((*i)->stream != stream || (*i)->size < max_split) break;
    if ((*i)->whole_segment()) {
      released += (*i)->size;
      release_segment(pool, i);
    } else {
      it = i;
    }
  }
  return released >= key.size;
}

void CachingAllocator::release_cached() {
  for (Pool* pool : {&large_pool_, &small_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      auto here = it++;
      if ((*here)->whole_segment()) release_segment(*pool, here);
    }
  }
}

void CachingAllocator::release_segment(Pool& pool, Pool::iterator it) {
  Block* block = *it;
  pool.erase(it);
  stats_.reserved_bytes -= block->size;
  if (options_.shared) options_.shared->give(block->size);
  --stats_.segments;
  ++stats_.num_device_free;
  delete_block(block);
}

bool CachingAllocator::should_split(const Block& block, std::uint64_t size) const {
  const std::uint64_t rest = block.size - size;
  if (block.small) return rest >= kMinBlockSize;
  return size < options_.max_split_size_bytes && rest > kSmallSize;
}

std::string CachingAllocator::oom_message(std::uint64_t segment_bytes) const {
  // "Tried to allocate" names the segment, as PyTorch does (hence the
  // familiar "Tried to allocate 20.00 MiB" for requests of 1-10 MiB).
  return fmt::format(
      "CUDA out of memory. Tried to allocate {} ({}; {} total capacity; {} already allocated; "
      "{} free; {} reserved in total by PyTorch) If reserved memory is >> allocated memory try "
      "setting max_split_size_mb to avoid fragmentation.",
      format_size(segment_bytes), options_.device_name, format_size(options_.capacity_bytes),
      format_size(stats_.allocated_bytes),
      format_size(options_.shared ? options_.shared->free() : options_.capacity_bytes - stats_.reserved_bytes),
      format_size(stats_.reserved_bytes));
}

CachingAllocator::Block* CachingAllocator::live_block(Ptr p, const char* caller) const {
  auto it = live_.find(p);
  if (it == live_.end()) {
    throw std::invalid_argument(
        fmt::format("caching allocator ({}): {}(0x{:x}): not the address of a live allocation of this "
                    "allocator (freed twice, never allocated here, or not the start of a block); expected "
                    "an address returned by allocate() and not yet freed",
                    options_.device_name, caller, p));
  }
  return it->second;
}

void CachingAllocator::update_peaks() {
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  stats_.peak_requested_bytes = std::max(stats_.peak_requested_bytes, stats_.requested_bytes);
}

}  // namespace gpemu
