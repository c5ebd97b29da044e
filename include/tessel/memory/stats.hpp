#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessel {

struct MemoryStats {
  std::int64_t allocated_bytes = 0;      // in live allocations (rounded sizes)
  std::int64_t requested_bytes = 0;      // in live allocations, as asked for
  std::int64_t allocated_peak = 0;
  std::int64_t reserved_bytes = 0;       // held from the raw allocator (segments)
  std::int64_t reserved_peak = 0;
  std::int64_t active_allocations = 0;   // live allocations now
  std::int64_t allocation_count = 0;     // allocations served, in all
  std::int64_t free_count = 0;
  std::int64_t cache_hits = 0;           // served from cached blocks
  std::int64_t cache_misses = 0;         // needed a raw allocation
  std::int64_t raw_allocations = 0;      // raw malloc calls that succeeded
  std::int64_t raw_frees = 0;
  std::int64_t segments = 0;             // live raw allocations
  std::int64_t oom_count = 0;            // OutOfMemory raised
  std::int64_t cache_flushes = 0;        // times the OOM ladder released the cache
  std::int64_t inactive_split_bytes = 0; // free bytes inside segments that also hold live blocks
  std::int64_t largest_free_block = 0;   // largest cached free block
  // 1 - allocated / reserved: the share of reserved memory that holds no live data.
  double fragmentation() const {
    return reserved_bytes > 0 ? 1.0 - double(allocated_bytes) / double(reserved_bytes) : 0.0;
  }
  std::string str() const;  // one line per field, for logs and `tessel info`
};

// "1.50 MiB": bytes in binary units with two decimals, for messages.
std::string format_bytes(std::int64_t bytes);

}  // namespace tessel
