#include "tessel/memory/caching_allocator.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tessel/core/config.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/memory/capture.hpp"
#include "tessel/profile/hooks.hpp"

namespace tessel {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::size_t kMinBlock = 512;            // rounding of every request
constexpr std::size_t kSmallMax = 1 * MiB;        // largest small-pool request
constexpr std::size_t kSmallSegment = 2 * MiB;
constexpr std::size_t kLargeRound = 2 * MiB;
constexpr std::size_t kMidMax = 10 * MiB;         // requests up to this share 20 MiB segments
constexpr std::size_t kMidSegment = 20 * MiB;
constexpr std::uint64_t kAnyStream = 0;           // home of segments whose stream was destroyed

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

struct Segment;
enum class BlockState : std::uint8_t { free, allocated, pending };

struct Block {
  char* ptr = nullptr;
  std::size_t size = 0;
  std::size_t requested = 0;
  Segment* segment = nullptr;
  Block* prev = nullptr;  // neighbours inside the segment, by address
  Block* next = nullptr;
  BlockState state = BlockState::free;
  std::uint64_t pool_stream = 0;   // key while in a pool (== segment->home)
  std::uint64_t alloc_stream = 0;  // stream it was allocated on, while allocated
  bool orphan = false;             // allocation stream destroyed while the block was live
  int pending_events = 0;
  std::vector<StreamRef> uses;     // other streams that used it (record_stream)
};

struct Segment {
  char* base = nullptr;
  std::size_t size = 0;
  std::uint64_t home = 0;  // the stream whose pool holds its free blocks
  bool small = false;
  Block* first = nullptr;  // never deleted by coalescing (it has no prev)
};

// Pools are ordered by (stream, size, address): lower_bound gives the best fit on a stream.
struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    return std::tie(a->pool_stream, a->size, a->ptr) < std::tie(b->pool_stream, b->size, b->ptr);
  }
};
using Pool = std::set<Block*, BlockLess>;

struct PendingEvent {
  void* event;
  Block* block;
  std::uint64_t stream;
};

std::string ptr_str(const void* p) { return fmt::format("{}", p); }

std::string human(std::size_t bytes) {
  return fmt::format("{} ({} bytes)", format_bytes(static_cast<std::int64_t>(bytes)), bytes);
}

}  // namespace

struct CachingAllocator::Impl {
  std::unique_ptr<DeviceRuntime> rt;
  CachingAllocatorOptions opt;
  std::size_t total = 0;
  mutable std::mutex mutex;
  std::vector<std::pair<std::uint64_t, std::function<bool()>>> free_memory_callbacks;  // see add_free_memory_callback
  std::uint64_t next_callback_id = 0;
  Pool small_pool;
  Pool large_pool;
  std::unordered_map<void*, Block*> live;
  std::vector<Segment*> segments;
  std::vector<PendingEvent> pending;
  std::vector<void*> spare_events;
  std::vector<Block*> spare_blocks;  // recycled Block objects: keeps new/delete off the hot path
  // Recycled tree and hash nodes of the pools and of `live`: an allocate/free pair of a tiny op
  // then makes no heap allocation at all (each node was a malloc and a free). Capped, so that a
  // burst of frees does not keep its nodes for the life of the process.
  static constexpr std::size_t kMaxSpareNodes = 1024;
  std::vector<Pool::node_type> spare_pool_nodes;
  std::vector<std::unordered_map<void*, Block*>::node_type> spare_live_nodes;
  MemoryStats st;

  Pool& pool_of(const Block* b) { return b->segment->small ? small_pool : large_pool; }

  void pool_insert(Pool& pool, Block* b) {
    if (spare_pool_nodes.empty()) {
      pool.insert(b);
      return;
    }
    Pool::node_type node = std::move(spare_pool_nodes.back());
    spare_pool_nodes.pop_back();
    node.value() = b;
    pool.insert(std::move(node));
  }
  void pool_erase(Pool& pool, Pool::iterator it) {
    Pool::node_type node = pool.extract(it);
    if (spare_pool_nodes.size() < kMaxSpareNodes) spare_pool_nodes.push_back(std::move(node));
  }
  void pool_erase(Pool& pool, Block* b) {
    if (auto it = pool.find(b); it != pool.end()) pool_erase(pool, it);
  }

  void live_insert(Block* b) {
    if (spare_live_nodes.empty()) {
      live.emplace(b->ptr, b);
      return;
    }
    auto node = std::move(spare_live_nodes.back());
    spare_live_nodes.pop_back();
    node.key() = b->ptr;
    node.mapped() = b;
    live.insert(std::move(node));
  }
  void live_erase(std::unordered_map<void*, Block*>::iterator it) {
    auto node = live.extract(it);
    if (spare_live_nodes.size() < kMaxSpareNodes) spare_live_nodes.push_back(std::move(node));
  }

  bool oversized(std::size_t size) const { return opt.max_split_size != 0 && size > opt.max_split_size; }

  Block* new_block() {
    if (spare_blocks.empty()) return new Block();
    Block* b = spare_blocks.back();
    spare_blocks.pop_back();
    *b = Block();
    return b;
  }
  void drop_block(Block* b) {
    b->uses.clear();
    spare_blocks.push_back(b);
  }

  void* get_event() {
    if (spare_events.empty()) return rt->event_create();
    void* e = spare_events.back();
    spare_events.pop_back();
    return e;
  }

  std::size_t segment_size(std::size_t size, bool small) const {
    if (small) return kSmallSegment;
    if (oversized(size)) return round_up(size, kLargeRound);  // one unsplittable block
    std::size_t seg = (size <= kMidMax) ? kMidSegment : round_up(size, kLargeRound);
    // Keep normal segments within max_split_size, so only oversized requests make oversized blocks.
    if (opt.max_split_size != 0) seg = std::min(seg, std::max(size, opt.max_split_size / kMinBlock * kMinBlock));
    return seg;
  }

  void insert_free(Block* b) {
    b->state = BlockState::free;
    b->pool_stream = b->segment->home;
    pool_insert(pool_of(b), b);
  }

  // The best cached block for `size` on `stream`, removed from its pool; nullptr if none fits.
  Block* take_from(Pool& pool, std::uint64_t stream, std::size_t size, bool large) {
    Block key;
    key.pool_stream = stream;
    key.size = size;
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->pool_stream != stream) return nullptr;
    Block* b = *it;
    // Blocks are sorted by size and normal blocks never exceed max_split_size, so if the best fit
    // is oversized, no normal block fits and larger oversized blocks waste even more.
    if (large && oversized(b->size) && b->size - size > std::min(size, kMidSegment)) return nullptr;
    pool_erase(pool, it);
    return b;
  }

  void rehome(Segment* seg, std::uint64_t home) {
    if (seg->home == home) return;
    std::vector<Block*> frees;
    for (Block* b = seg->first; b; b = b->next) {
      if (b->state == BlockState::free) {
        pool_erase(pool_of(b), b);
        frees.push_back(b);
      }
    }
    seg->home = home;
    for (Block* b : frees) insert_free(b);
  }

  Block* find_cached(std::size_t size, bool small, std::uint64_t stream) {
    Pool& pool = small ? small_pool : large_pool;
    if (Block* b = take_from(pool, stream, size, !small)) return b;
    // Segments of destroyed streams are idle: the first stream that needs one adopts it whole.
    if (Block* b = take_from(pool, kAnyStream, size, !small)) {
      pool_insert(pool, b);  // rehome moves every free block of the segment, this one included
      rehome(b->segment, stream);
      pool_erase(pool, b);
      return b;
    }
    return nullptr;
  }

  bool within_fraction(std::size_t extra) const {
    if (opt.memory_fraction >= 1.0) return true;
    return static_cast<double>(st.reserved_bytes) + static_cast<double>(extra) <=
           opt.memory_fraction * static_cast<double>(total);
  }

  // A fresh segment holding one free block (not in a pool); nullptr when the runtime is out of
  // memory or the memory fraction would be exceeded.
  Block* new_segment(std::size_t seg_size, bool small, std::uint64_t stream) {
    if (!within_fraction(seg_size)) return nullptr;
    void* p = rt->malloc(seg_size);
    if (!p) return nullptr;
    auto* seg = new Segment();
    seg->base = static_cast<char*>(p);
    seg->size = seg_size;
    seg->home = stream;
    seg->small = small;
    Block* b = new_block();
    b->ptr = seg->base;
    b->size = seg_size;
    b->segment = seg;
    seg->first = b;
    segments.push_back(seg);
    st.reserved_bytes += static_cast<std::int64_t>(seg_size);
    st.reserved_peak = std::max(st.reserved_peak, st.reserved_bytes);
    st.raw_allocations++;
    st.segments++;
    return b;
  }

  void release_segment(Segment* seg) {
    rt->free(seg->base);
    st.reserved_bytes -= static_cast<std::int64_t>(seg->size);
    st.raw_frees++;
    st.segments--;
    segments.erase(std::find(segments.begin(), segments.end(), seg));
    drop_block(seg->first);
    delete seg;
  }

  // A block whose last use finished goes back to its segment's pool, merged with free neighbours.
  void return_to_pool(Block* b) {
    b->uses.clear();
    b->orphan = false;
    b->requested = 0;
    b->pending_events = 0;
    if (Block* prev = b->prev; prev && prev->state == BlockState::free) {
      pool_erase(pool_of(prev), prev);
      prev->size += b->size;
      prev->next = b->next;
      if (b->next) b->next->prev = prev;
      drop_block(b);
      b = prev;
    }
    if (Block* next = b->next; next && next->state == BlockState::free) {
      pool_erase(pool_of(next), next);
      b->size += next->size;
      b->next = next->next;
      if (next->next) next->next->prev = b;
      drop_block(next);
    }
    insert_free(b);
  }

  void complete_pending(std::size_t i) {
    PendingEvent pe = pending[i];
    pending[i] = pending.back();
    pending.pop_back();
    spare_events.push_back(pe.event);
    if (--pe.block->pending_events == 0) return_to_pool(pe.block);
  }

  void process_events() {
    for (std::size_t i = 0; i < pending.size();) {
      if (rt->event_query(pending[i].event)) {
        complete_pending(i);
      } else {
        ++i;
      }
    }
  }

  void synchronize_pending() {
    for (const auto& pe : pending) rt->event_synchronize(pe.event);
    while (!pending.empty()) complete_pending(pending.size() - 1);
  }

  // Releases every cached segment that is entirely free.
  void release_cached() {
    for (Pool* pool : {&small_pool, &large_pool}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it;
        if (b->prev == nullptr && b->next == nullptr) {
          it = pool->erase(it);
          release_segment(b->segment);
        } else {
          ++it;
        }
      }
    }
  }

  std::size_t largest_free() const {
    std::size_t largest = 0;
    for (const Pool* pool : {&small_pool, &large_pool}) {
      for (const Block* b : *pool) largest = std::max(largest, b->size);
    }
    return largest;
  }

  std::string oom_message(std::size_t requested, std::size_t rounded, const char* why) const {
    std::string device_free = "unknown";
    try {
      std::size_t free_bytes = 0, total_bytes = 0;
      rt->mem_info(&free_bytes, &total_bytes);
      device_free = fmt::format("{} of {}", human(free_bytes), human(total_bytes));
    } catch (const std::exception&) {
    }
    std::string msg = fmt::format(
        "{}: out of memory in allocate: tried to allocate {} (rounded to {} bytes){}; allocated {}, "
        "reserved {} by this allocator; device free {}; largest free block {}",
        opt.name, human(requested), rounded, why, human(static_cast<std::size_t>(st.allocated_bytes)),
        human(static_cast<std::size_t>(st.reserved_bytes)), device_free, human(largest_free()));
    if (opt.memory_fraction < 1.0) {
      msg += fmt::format("; memory fraction {} caps reserved memory at {}", opt.memory_fraction,
                         human(static_cast<std::size_t>(opt.memory_fraction * static_cast<double>(total))));
    }
    return msg + ". Free unused memory, call empty_cache() or lower the problem size.";
  }

  void note_allocation(Block* b, std::size_t requested, StreamRef stream, bool hit) {
    b->state = BlockState::allocated;
    b->requested = requested;
    b->alloc_stream = stream.id;
    b->orphan = false;
    b->uses.clear();
    live_insert(b);
    st.allocated_bytes += static_cast<std::int64_t>(b->size);
    st.requested_bytes += static_cast<std::int64_t>(requested);
    st.allocated_peak = std::max(st.allocated_peak, st.allocated_bytes);
    st.active_allocations++;
    st.allocation_count++;
    if (hit) {
      st.cache_hits++;
    } else {
      st.cache_misses++;
    }
    profile::memory_event(hit ? profile::MemoryEventKind::cache_hit : profile::MemoryEventKind::cache_miss, opt.name,
                          static_cast<std::int64_t>(b->size), st.allocated_bytes, st.reserved_bytes);
  }

  void* allocate_direct(std::size_t requested, StreamRef stream) {
    const std::size_t size = std::max<std::size_t>(requested, 1);
    if (detail::active_capture() != nullptr) {
      st.oom_count++;
      throw OutOfMemory(detail::capture_allocation_error(opt.name + " [caching disabled]", static_cast<std::int64_t>(requested)));
    }
    Block* b = new_segment(size, false, stream.id);
    if (!b) {
      st.oom_count++;
      throw OutOfMemory(oom_message(requested, size, " [caching disabled]"));
    }
    note_allocation(b, requested, stream, false);
    return b->ptr;
  }

  void* allocate_cached(std::size_t requested, StreamRef stream) {
    const std::size_t size = requested < kMinBlock ? kMinBlock : round_up(requested, kMinBlock);
    const bool small = size <= kSmallMax;
    // cudaEventQuery is not allowed during a graph capture: pending blocks wait until it ends.
    if (!pending.empty() && detail::active_capture() == nullptr) process_events();
    Block* b = find_cached(size, small, stream.id);
    bool hit = b != nullptr;
    if (!b && detail::active_capture() != nullptr) {
      // cudaMalloc is not capturable (and the OOM ladder would synchronize): fail clearly.
      st.oom_count++;
      throw OutOfMemory(detail::capture_allocation_error(opt.name, static_cast<std::int64_t>(requested)));
    }
    if (!b) {
      const std::size_t seg = segment_size(size, small);
      b = new_segment(seg, small, stream.id);
      if (!b && (!segments.empty() || !pending.empty())) {
        // The ladder: let pending cross-stream uses finish, give back every unsplit cached
        // segment, then look again (a pending block may now fit) and retry the raw allocation.
        TESSEL_RANGE("allocator.oom_retry");
        profile::memory_event(profile::MemoryEventKind::oom_retry, opt.name, static_cast<std::int64_t>(size),
                              st.allocated_bytes, st.reserved_bytes, "release cached segments");
        synchronize_pending();
        release_cached();
        st.cache_flushes++;
        b = find_cached(size, small, stream.id);
        hit = b != nullptr;
        if (!b) b = new_segment(seg, small, stream.id);
      }
      // Near the limit a shared 20 MiB segment may not fit where one of the request's own size does.
      if (!b && !small && seg > round_up(size, kLargeRound)) b = new_segment(round_up(size, kLargeRound), small, stream.id);
      if (!b) {
        st.oom_count++;
        profile::memory_event(profile::MemoryEventKind::oom, opt.name, static_cast<std::int64_t>(size),
                              st.allocated_bytes, st.reserved_bytes, "out of memory");
        throw OutOfMemory(oom_message(requested, size, ""));
      }
    }
    // Split off the tail when it is worth keeping: any 512 B in the small pool, more than 1 MiB
    // in the large pool (smaller tails could never serve a large request), never oversized blocks.
    const std::size_t rest = b->size - size;
    const bool split = small ? rest >= kMinBlock : (!oversized(b->size) && rest > kSmallMax);
    if (split) {
      Block* tail = new_block();
      tail->ptr = b->ptr + size;
      tail->size = rest;
      tail->segment = b->segment;
      tail->prev = b;
      tail->next = b->next;
      if (b->next) b->next->prev = tail;
      b->next = tail;
      b->size = size;
      insert_free(tail);
    }
    note_allocation(b, requested, stream, hit);
    return b->ptr;
  }
};

CachingAllocator::CachingAllocator(std::unique_ptr<DeviceRuntime> runtime, CachingAllocatorOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!runtime) throw ValueError(fmt::format("CachingAllocator({}): runtime is null", options.name));
  if (!(options.memory_fraction > 0.0 && options.memory_fraction <= 1.0)) {
    throw ValueError(fmt::format("CachingAllocator({}): memory_fraction {} is outside (0, 1]", options.name,
                                 options.memory_fraction));
  }
  impl_->rt = std::move(runtime);
  impl_->opt = std::move(options);
  std::size_t free_bytes = 0;
  impl_->rt->mem_info(&free_bytes, &impl_->total);
}

CachingAllocator::~CachingAllocator() {
  Impl& m = *impl_;
  try {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.synchronize_pending();
    m.release_cached();
    if (!m.live.empty()) {
      // Freeing memory that is still handed out would turn a leak into a use-after-free.
      TESSEL_LOG_WARN(fmt::format("CachingAllocator({}) destroyed with {} live allocations ({}); their "
                                  "segments are leaked",
                                  m.opt.name, m.live.size(), format_bytes(m.st.allocated_bytes)));
    }
    for (void* e : m.spare_events) m.rt->event_destroy(e);
    m.spare_events.clear();
  } catch (const std::exception& e) {
    TESSEL_LOG_WARN(fmt::format("CachingAllocator({}): cleanup failed: {}", m.opt.name, e.what()));
  }
  for (Block* b : m.spare_blocks) delete b;
}

void* CachingAllocator::allocate(std::int64_t bytes, StreamRef stream) {
  Impl& m = *impl_;
  if (bytes < 0) {
    throw ValueError(fmt::format("{}: allocate: negative size {} bytes", m.opt.name, bytes));
  }
  const auto requested = static_cast<std::size_t>(bytes);
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (requested > m.total) {
      m.st.oom_count++;
      throw OutOfMemory(fmt::format("{}: allocate: requested {} is larger than the total memory of {}, {}",
                                    m.opt.name, human(requested), m.opt.name, human(m.total)));
    }
    try {
      return m.opt.caching ? m.allocate_cached(requested, stream) : m.allocate_direct(requested, stream);
    } catch (const OutOfMemory&) {
      // During a graph capture the callbacks' releases (cudaFree, plan destruction) would break
      // the capture: the capture's own error stands.
      if (m.free_memory_callbacks.empty() || detail::active_capture() != nullptr) throw;
    }
  }
  // Out of memory: let the registered caches release what they hold (outside the lock: their
  // releases free blocks through this allocator), then try once more.
  std::vector<std::function<bool()>> callbacks;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    for (const auto& entry : m.free_memory_callbacks) callbacks.push_back(entry.second);
  }
  bool released = false;
  {
    TESSEL_RANGE("allocator.oom_retry");
    profile::memory_event(profile::MemoryEventKind::oom_retry, m.opt.name, bytes, m.st.allocated_bytes,
                          m.st.reserved_bytes, "free-memory callbacks");
    for (const auto& callback : callbacks) released = callback() || released;
  }
  std::lock_guard<std::mutex> lock(m.mutex);
  if (released) m.st.oom_count--;  // the first failure is retried; count only the final outcome
  if (!released) {
    throw OutOfMemory(m.oom_message(requested, requested, " [free-memory callbacks released nothing]"));
  }
  return m.opt.caching ? m.allocate_cached(requested, stream) : m.allocate_direct(requested, stream);
}

std::uint64_t CachingAllocator::add_free_memory_callback(std::function<bool()> callback) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  const std::uint64_t id = ++m.next_callback_id;
  m.free_memory_callbacks.emplace_back(id, std::move(callback));
  return id;
}

void CachingAllocator::remove_free_memory_callback(std::uint64_t id) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  auto& list = m.free_memory_callbacks;
  list.erase(std::remove_if(list.begin(), list.end(), [id](const auto& entry) { return entry.first == id; }), list.end());
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  Impl& m = *impl_;
  std::uint64_t orphan_stream = 0;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.live.find(ptr);
    if (it == m.live.end()) {
      throw Error(fmt::format("{}: free: pointer {} is not a live allocation of this allocator (double free "
                              "or foreign pointer)",
                              m.opt.name, ptr_str(ptr)));
    }
    Block* b = it->second;
    // Record every event before changing anything: if the runtime fails, the block stays live.
    std::vector<PendingEvent> recorded;
    try {
      for (const StreamRef& use : b->uses) {
        void* e = m.get_event();
        recorded.push_back({e, b, use.id});
        m.rt->event_record(e, use);
      }
      if (!m.opt.caching) {
        for (const auto& pe : recorded) m.rt->event_synchronize(pe.event);
      }
    } catch (...) {
      for (const auto& pe : recorded) m.spare_events.push_back(pe.event);
      throw;
    }
    m.live_erase(it);
    m.st.allocated_bytes -= static_cast<std::int64_t>(b->size);
    m.st.requested_bytes -= static_cast<std::int64_t>(b->requested);
    m.st.active_allocations--;
    m.st.free_count++;
    profile::memory_event(profile::MemoryEventKind::free, m.opt.name, static_cast<std::int64_t>(b->size),
                          m.st.allocated_bytes, m.st.reserved_bytes);
    if (b->orphan) orphan_stream = b->alloc_stream;
    if (!m.opt.caching) {
      for (const auto& pe : recorded) m.spare_events.push_back(pe.event);
      m.release_segment(b->segment);
    } else if (recorded.empty()) {
      m.return_to_pool(b);
    } else {
      b->state = BlockState::pending;
      b->pending_events = static_cast<int>(recorded.size());
      m.pending.insert(m.pending.end(), recorded.begin(), recorded.end());
    }
  }
  if (orphan_stream != 0) {
    throw DeviceError(fmt::format(
        "{}: free: pointer {} was allocated on stream #{}, which was destroyed before the free; the memory "
        "was reclaimed, but free memory before destroying its stream (keep the Stream alive, as Buffer does)",
        m.opt.name, ptr_str(ptr), orphan_stream));
  }
}

void CachingAllocator::record_stream(void* ptr, StreamRef stream) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.live.find(ptr);
  if (it == m.live.end()) {
    throw Error(fmt::format("{}: record_stream: pointer {} is not a live allocation of this allocator",
                            m.opt.name, ptr_str(ptr)));
  }
  Block* b = it->second;
  if (stream.id == b->alloc_stream) return;
  for (const StreamRef& u : b->uses) {
    if (u.id == stream.id) return;
  }
  b->uses.push_back(stream);
}

std::size_t CachingAllocator::block_size(void* ptr) const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.live.find(ptr);
  return it == m.live.end() ? 0 : it->second->size;
}

void CachingAllocator::empty_cache() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  m.synchronize_pending();
  m.release_cached();
}

MemoryStats CachingAllocator::stats() const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  MemoryStats s = m.st;
  s.inactive_split_bytes = 0;
  s.largest_free_block = 0;
  for (const Segment* seg : m.segments) {
    bool has_live = false;
    std::int64_t idle = 0;
    for (const Block* b = seg->first; b; b = b->next) {
      if (b->state == BlockState::allocated) {
        has_live = true;
      } else {
        idle += static_cast<std::int64_t>(b->size);
        if (b->state == BlockState::free) {
          s.largest_free_block = std::max(s.largest_free_block, static_cast<std::int64_t>(b->size));
        }
      }
    }
    if (has_live) s.inactive_split_bytes += idle;
  }
  return s;
}

void CachingAllocator::reset_peak_stats() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  m.st.allocated_peak = m.st.allocated_bytes;
  m.st.reserved_peak = m.st.reserved_bytes;
}

void CachingAllocator::set_memory_fraction(double fraction) {
  Impl& m = *impl_;
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw ValueError(fmt::format("{}: set_memory_fraction: {} is outside (0, 1]", m.opt.name, fraction));
  }
  std::lock_guard<std::mutex> lock(m.mutex);
  m.opt.memory_fraction = fraction;
}

const CachingAllocatorOptions& CachingAllocator::options() const { return impl_->opt; }

void CachingAllocator::on_stream_destroyed(std::uint64_t stream_id) {
  if (stream_id == kAnyStream) return;
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  for (Segment* seg : m.segments) {
    if (seg->home == stream_id) m.rehome(seg, kAnyStream);
  }
  for (auto& [ptr, b] : m.live) {
    auto& uses = b->uses;
    uses.erase(std::remove_if(uses.begin(), uses.end(), [&](const StreamRef& u) { return u.id == stream_id; }),
               uses.end());
    if (b->alloc_stream == stream_id) b->orphan = true;
  }
  // The stream was synchronized before destruction: its events have completed.
  for (std::size_t i = 0; i < m.pending.size();) {
    if (m.pending[i].stream == stream_id) {
      m.complete_pending(i);
    } else {
      ++i;
    }
  }
}

// ---- process-wide allocators ----

namespace {

struct Registry {
  int count = 0;
  std::unique_ptr<std::atomic<CachingAllocator*>[]> devices;
  std::atomic<CachingAllocator*> pinned{nullptr};
  std::mutex mutex;
};

void notify_stream_destroyed(std::uint64_t stream_id, Device device);

Registry& registry() {
  // Leaked on purpose: streams destroyed during static destruction still notify it safely.
  static Registry* r = [] {
    auto* reg = new Registry();
    reg->count = device_count();
    reg->devices.reset(new std::atomic<CachingAllocator*>[static_cast<std::size_t>(std::max(reg->count, 1))]);
    for (int i = 0; i < std::max(reg->count, 1); ++i) reg->devices[static_cast<std::size_t>(i)].store(nullptr);
    detail::add_stream_destroyed_listener(&notify_stream_destroyed);
    return reg;
  }();
  return *r;
}

void notify_stream_destroyed(std::uint64_t stream_id, Device device) {
  Registry& r = registry();
  try {
    if (device.is_cuda() && device.index >= 0 && device.index < r.count) {
      if (auto* a = r.devices[static_cast<std::size_t>(device.index)].load(std::memory_order_acquire)) {
        a->on_stream_destroyed(stream_id);
      }
    }
    // Pinned blocks may be used on any device's streams.
    if (auto* p = r.pinned.load(std::memory_order_acquire)) p->on_stream_destroyed(stream_id);
  } catch (const std::exception& e) {
    TESSEL_LOG_WARN(fmt::format("stream #{} destroyed: allocator bookkeeping failed: {}", stream_id, e.what()));
  }
}

}  // namespace

CachingAllocator& device_allocator(int device_index) {
  check_device_index(device_index, "device_allocator");
  Registry& r = registry();
  auto& slot = r.devices[static_cast<std::size_t>(device_index)];
  if (auto* a = slot.load(std::memory_order_acquire)) return *a;
  std::lock_guard<std::mutex> lock(r.mutex);
  if (auto* a = slot.load(std::memory_order_acquire)) return *a;
  const Config& c = config();
  CachingAllocatorOptions o;
  o.caching = c.caching_allocator;
  o.memory_fraction = c.memory_fraction;
  o.max_split_size = c.max_split_size;
  o.name = Device::cuda(device_index).str();
  auto* a = new CachingAllocator(make_cuda_device_runtime(device_index), o);  // leaked, see registry()
  slot.store(a, std::memory_order_release);
  TESSEL_LOG_INFO(fmt::format("{}: {} allocator, memory fraction {}, max split size {}", o.name,
                              o.caching ? "caching" : "direct (no caching)", o.memory_fraction,
                              o.max_split_size ? format_bytes(static_cast<std::int64_t>(o.max_split_size))
                                               : std::string("unlimited")));
  return *a;
}

CachingAllocator& pinned_allocator() {
  Registry& r = registry();
  if (auto* a = r.pinned.load(std::memory_order_acquire)) return *a;
  std::lock_guard<std::mutex> lock(r.mutex);
  if (auto* a = r.pinned.load(std::memory_order_acquire)) return *a;
  CachingAllocatorOptions o;
  o.caching = config().caching_allocator;
  o.name = "pinned";
  auto* a = new CachingAllocator(make_cuda_pinned_runtime(), o);
  r.pinned.store(a, std::memory_order_release);
  return *a;
}

StreamRef stream_ref(const Stream& stream) {
  return StreamRef{stream.id(), stream.handle(), stream.device().is_cuda() ? stream.device().index : -1};
}

}  // namespace tessel
