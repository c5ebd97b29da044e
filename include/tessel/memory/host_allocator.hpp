#pragma once
// 64-byte-aligned host memory for the CPU backend, with the same statistics as the device pool.
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

}  // namespace tessel
