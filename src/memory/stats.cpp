#include "tessel/memory/stats.hpp"

#include <cstdint>

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

std::string format_bytes(std::int64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 0) return "-" + format_bytes(bytes == INT64_MIN ? INT64_MAX : -bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, units[unit]);
}

}  // namespace tessel
