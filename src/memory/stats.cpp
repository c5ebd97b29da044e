#include "tessel/memory/stats.hpp"

#include <fmt/format.h>

namespace tessel {

std::string MemoryStats::str() const {
  return fmt::format(
      "allocated_bytes: {}\nrequested_bytes: {}\nallocated_peak: {}\nreserved_bytes: {}\nreserved_peak: {}\n"
      "active_allocations: {}\nallocation_count: {}\nfree_count: {}\ncache_hits: {}\ncache_misses: {}\n"
      "raw_allocations: {}\nraw_frees: {}\nsegments: {}\noom_count: {}\ncache_flushes: {}\n"
      "inactive_split_bytes: {}\nlargest_free_block: {}\nfragmentation: {:.4f}\n",
      allocated_bytes, requested_bytes, allocated_peak, reserved_bytes, reserved_peak, active_allocations,
      allocation_count, free_count, cache_hits, cache_misses, raw_allocations, raw_frees, segments, oom_count,
      cache_flushes, inactive_split_bytes, largest_free_block, fragmentation());
}

}  // namespace tessel
