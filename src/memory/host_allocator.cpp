#include "tessel/memory/host_allocator.hpp"

#include <sys/mman.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/profile/hooks.hpp"

namespace tessel {
namespace {

constexpr std::size_t kHugePageMinBytes = std::size_t{4} << 20;

// Freed blocks of kCacheMinBytes and more are kept for the next allocation of about their size
// (TESSEL_ALLOCATOR=caching, the default), up to cache_limit() bytes, the oldest released first: an
// op's fresh output then reuses memory whose pages are already mapped. A fresh 40 MB block costs
// its first writer the kernel's faults and zeroing of every page, about as much time as a + b
// itself (cpu_numpy's add row).
constexpr std::size_t kCacheMinBytes = kHugePageMinBytes;
// A cached block serves a request of at least 4/5 of its size.
constexpr std::size_t kCacheFitNumerator = 4, kCacheFitDenominator = 5;

std::size_t cache_limit() {
  // 512 MiB, or a sixteenth of the machine's memory where that is less.
  static const std::size_t limit = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    std::size_t l = std::size_t{512} << 20;
    if (pages > 0 && page > 0) l = std::min(l, static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) / 16);
    return l;
  }();
  return limit;
}

struct Cached {
  void* ptr;
  std::size_t size;
};

struct HostState {
  std::mutex mutex;
  std::unordered_map<void*, std::pair<std::size_t, std::size_t>> live;  // ptr -> (size, requested)
  std::vector<Cached> cached;  // oldest first
  std::size_t cached_bytes = 0;
  MemoryStats st;
};

void note_cache(HostState& s) {  // mutex held
  s.st.reserved_bytes = s.st.allocated_bytes + static_cast<std::int64_t>(s.cached_bytes);
  s.st.reserved_peak = std::max(s.st.reserved_peak, s.st.reserved_bytes);
  std::int64_t largest = 0;
  for (const Cached& c : s.cached) largest = std::max(largest, static_cast<std::int64_t>(c.size));
  s.st.largest_free_block = largest;
}

// Takes the smallest cached block that fits `size` closely enough, or nullptr (mutex held).
void* take_cached(HostState& s, std::size_t& size) {
  std::size_t best = s.cached.size();
  for (std::size_t i = 0; i < s.cached.size(); ++i) {
    const std::size_t c = s.cached[i].size;
    if (c >= size && c / kCacheFitDenominator * kCacheFitNumerator <= size && (best == s.cached.size() || c < s.cached[best].size)) {
      best = i;
    }
  }
  if (best == s.cached.size()) return nullptr;
  void* p = s.cached[best].ptr;
  size = s.cached[best].size;
  s.cached.erase(s.cached.begin() + static_cast<std::ptrdiff_t>(best));
  s.cached_bytes -= size;
  return p;
}

// Moves every cached block (or the oldest until at most `keep` bytes stay) into `out`, to be freed
// after the mutex is released.
void evict(HostState& s, std::size_t keep, std::vector<void*>& out) {
  std::size_t n = 0;
  while (n < s.cached.size() && s.cached_bytes > keep) {
    s.cached_bytes -= s.cached[n].size;
    out.push_back(s.cached[n].ptr);
    ++n;
  }
  s.cached.erase(s.cached.begin(), s.cached.begin() + static_cast<std::ptrdiff_t>(n));
  s.st.raw_frees += static_cast<std::int64_t>(n);
  s.st.segments -= static_cast<std::int64_t>(n);
}

HostState& host_state() {
  static auto* s = new HostState();  // leaked: frees during static destruction stay valid
  return *s;
}

}  // namespace

void* host_allocate(std::int64_t bytes) {
  if (bytes < 0) throw ValueError(fmt::format("host_allocate: negative size {} bytes", bytes));
  const auto requested = static_cast<std::size_t>(bytes);
  HostState& s = host_state();
  void* p = nullptr;
  std::size_t size = 0;
  if (requested <= std::numeric_limits<std::size_t>::max() - host_alignment) {
    // Zero bytes still get a unique block; aligned_alloc needs a multiple of the alignment.
    size = (std::max<std::size_t>(requested, 1) + host_alignment - 1) / host_alignment * host_alignment;
    if (size >= kCacheMinBytes && config().caching_allocator) {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (void* cached = take_cached(s, size)) {
        s.live.emplace(cached, std::make_pair(size, requested));
        auto& st = s.st;
        st.allocated_bytes += static_cast<std::int64_t>(size);
        st.requested_bytes += static_cast<std::int64_t>(requested);
        st.allocated_peak = std::max(st.allocated_peak, st.allocated_bytes);
        st.active_allocations++;
        st.allocation_count++;
        st.cache_hits++;
        note_cache(s);
        profile::memory_event(profile::MemoryEventKind::alloc, "cpu", static_cast<std::int64_t>(size),
                              st.allocated_bytes, st.reserved_bytes);
        return cached;
      }
    }
    p = std::aligned_alloc(host_alignment, size);
    if (p == nullptr) {
      // Out of memory: the cached blocks first go back to the system, then one more try.
      std::vector<void*> released;
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (!s.cached.empty()) s.st.cache_flushes++;
        evict(s, 0, released);
        note_cache(s);
      }
      for (void* r : released) std::free(r);
      if (!released.empty()) p = std::aligned_alloc(host_alignment, size);
    }
    // Large blocks on transparent huge pages where the kernel leaves that to madvise (the default
    // of Debian and Ubuntu): their first touch then faults 2 MiB at a time instead of 4 KiB, which
    // is most of the time of an op writing a fresh 40 MB array. NumPy does the same from 4 MiB.
    if (p != nullptr && size >= kHugePageMinBytes) {
      const auto first = (reinterpret_cast<std::uintptr_t>(p) + 4095) & ~std::uintptr_t{4095};
      const auto last = (reinterpret_cast<std::uintptr_t>(p) + size) & ~std::uintptr_t{4095};
      if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // advice: failure is harmless
    }
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!p) {
    s.st.oom_count++;
    profile::memory_event(profile::MemoryEventKind::oom, "cpu", bytes, s.st.allocated_bytes, s.st.reserved_bytes,
                          "host_allocate failed");
    throw OutOfMemory(fmt::format("host: out of memory in host_allocate: tried to allocate {} ({} bytes); "
                                  "allocated {} ({} bytes) by tessel's host allocator",
                                  format_bytes(bytes), bytes, format_bytes(s.st.allocated_bytes),
                                  s.st.allocated_bytes));
  }
  s.live.emplace(p, std::make_pair(size, requested));
  auto& st = s.st;
  st.allocated_bytes += static_cast<std::int64_t>(size);
  st.requested_bytes += static_cast<std::int64_t>(requested);
  st.allocated_peak = std::max(st.allocated_peak, st.allocated_bytes);
  st.active_allocations++;
  st.allocation_count++;
  st.cache_misses++;
  st.raw_allocations++;
  st.segments++;  // every block is its own segment, live or cached
  note_cache(s);
  profile::memory_event(profile::MemoryEventKind::alloc, "cpu", static_cast<std::int64_t>(size), st.allocated_bytes,
                        st.reserved_bytes);
  return p;
}

void host_free(void* ptr) {
  if (ptr == nullptr) return;
  HostState& s = host_state();
  std::pair<std::size_t, std::size_t> entry;
  std::vector<void*> released;
  bool keep = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(ptr);
    if (it == s.live.end()) {
      throw Error(fmt::format("host_free: pointer {} is not a live host allocation (double free or foreign "
                              "pointer)",
                              static_cast<const void*>(ptr)));
    }
    entry = it->second;
    s.live.erase(it);
    auto& st = s.st;
    st.allocated_bytes -= static_cast<std::int64_t>(entry.first);
    st.requested_bytes -= static_cast<std::int64_t>(entry.second);
    st.active_allocations--;
    st.free_count++;
    keep = entry.first >= kCacheMinBytes && entry.first <= cache_limit() && config().caching_allocator;
    if (keep) {
      s.cached.push_back({ptr, entry.first});
      s.cached_bytes += entry.first;
      evict(s, cache_limit(), released);
    } else {
      st.raw_frees++;
      st.segments--;
    }
    note_cache(s);
    profile::memory_event(profile::MemoryEventKind::free, "cpu", static_cast<std::int64_t>(entry.first),
                          st.allocated_bytes, st.reserved_bytes);
  }
  if (!keep) std::free(ptr);
  for (void* r : released) std::free(r);
}

void empty_host_cache() {
  HostState& s = host_state();
  std::vector<void*> released;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    evict(s, 0, released);
    note_cache(s);
  }
  for (void* r : released) std::free(r);
}

MemoryStats host_memory_stats() {
  HostState& s = host_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.st;
}

void reset_host_peak_stats() {
  HostState& s = host_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.st.allocated_peak = s.st.allocated_bytes;
  s.st.reserved_peak = s.st.reserved_bytes;
}

}  // namespace tessel
