#include "tessel/memory/host_allocator.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "tessel/core/error.hpp"
#include "tessel/profile/hooks.hpp"

namespace tessel {
namespace {

constexpr std::size_t kHugePageMinBytes = std::size_t{4} << 20;

struct HostState {
  std::mutex mutex;
  std::unordered_map<void*, std::pair<std::size_t, std::size_t>> live;  // ptr -> (size, requested)
  MemoryStats st;
};

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
    p = std::aligned_alloc(host_alignment, size);
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
  st.reserved_bytes = st.allocated_bytes;  // no caching: every live block is its own segment
  st.reserved_peak = std::max(st.reserved_peak, st.reserved_bytes);
  st.active_allocations++;
  st.allocation_count++;
  st.cache_misses++;
  st.raw_allocations++;
  st.segments++;
  profile::memory_event(profile::MemoryEventKind::alloc, "cpu", static_cast<std::int64_t>(size), st.allocated_bytes,
                        st.reserved_bytes);
  return p;
}

void host_free(void* ptr) {
  if (ptr == nullptr) return;
  HostState& s = host_state();
  std::pair<std::size_t, std::size_t> entry;
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
    st.reserved_bytes = st.allocated_bytes;
    st.active_allocations--;
    st.free_count++;
    st.raw_frees++;
    st.segments--;
    profile::memory_event(profile::MemoryEventKind::free, "cpu", static_cast<std::int64_t>(entry.first),
                          st.allocated_bytes, st.reserved_bytes);
  }
  std::free(ptr);
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
