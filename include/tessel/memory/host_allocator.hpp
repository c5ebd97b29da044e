#pragma once
// 64-byte-aligned host memory for the CPU backend, with the same statistics as the device pool.
// Blocks of 4 MiB and more sit on transparent huge pages, and when freed are kept (up to 512 MiB,
// or a sixteenth of the machine's memory) for the next allocation of about their size: the
// statistics' reserved_bytes counts them, cache_hits the allocations they served.
// TESSEL_ALLOCATOR=direct frees every block at once.
#include <cstddef>
#include <cstdint>

#include "tessel/memory/stats.hpp"

namespace tessel {

constexpr std::size_t host_alignment = 64;

// Raises ValueError for a negative size and OutOfMemory when the system has no memory left.
void* host_allocate(std::int64_t bytes);
void host_free(void* ptr);  // Error for a pointer it does not own (double free)
MemoryStats host_memory_stats();
void reset_host_peak_stats();
// Frees the cached blocks (an allocation that fails does so itself before it raises).
void empty_host_cache();

}  // namespace tessel
