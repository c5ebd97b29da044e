#pragma once
// A stream-ordered caching allocator for device memory (and, with a pinned runtime, for pinned
// host memory).
//
// - Sizes round up to 512 B. Requests up to 1 MiB come from a small pool carved out of 2 MiB
//   segments; larger ones from a large pool (segments rounded up to 2 MiB, 20 MiB for requests
//   between 1 and 10 MiB). Cached blocks split; a block larger than max_split_size is never split
//   and is reused only for requests close to its size.
// - max_split_size (large pool only; the small pool always splits): a request above it gets a
//   segment of its own (rounded to 2 MiB) holding one unsplittable "oversized" block. Segments for
//   smaller requests never exceed max_split_size. A cached oversized block of b bytes serves a
//   request of r bytes only if b - r <= min(r, 20 MiB): at most half of it and at most one large
//   segment is wasted.
// - Cached blocks belong to a stream (their segment's stream). A block freed on the stream it was
//   allocated on is reusable on that stream at once. A block also used on other streams
//   (record_stream) is reused only after events recorded on those streams at free time have
//   completed (pending events are checked on each allocate). Adjacent free blocks of a segment
//   coalesce.
// - Out of memory: cached block -> raw allocation -> wait for pending events, release every cached
//   unsplit segment, retry -> raise OutOfMemory reporting the requested, allocated, reserved and
//   free bytes and the largest free block. Exceeding memory_fraction * total counts as failure.
// - Destroyed streams (on_stream_destroyed): their pending uses count as done and their cached
//   segments move to a stream-less pool that any stream may adopt. A live block whose allocation
//   stream was destroyed is "orphaned": free() still reclaims it (the stream was synchronized, so
//   its memory is idle) and then raises DeviceError, because freeing after the stream is gone is a
//   bug in the caller (Buffer avoids it by keeping its stream alive).
// - caching=false: every allocate/free goes to the runtime (exact sizes, for compute-sanitizer);
//   a free waits for the events of recorded streams first. Statistics are kept in both modes.
// - Thread-safe: one mutex per allocator.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "tessel/core/stream.hpp"
#include "tessel/memory/device_runtime.hpp"
#include "tessel/memory/stats.hpp"

namespace tessel {

struct CachingAllocatorOptions {
  bool caching = true;                 // false: every allocate/free goes to the runtime (sanitizers)
  double memory_fraction = 1.0;        // cap on reserved bytes, as a fraction of total memory
  std::size_t max_split_size = 0;      // 0: no limit
  std::string name = "device";         // for messages: "cuda:0", "pinned"
};

class CachingAllocator {
 public:
  CachingAllocator(std::unique_ptr<DeviceRuntime> runtime, CachingAllocatorOptions options);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Raises ValueError for a negative size, OutOfMemory for a size above the device's total memory
  // or when the ladder fails. A zero-byte request returns a unique non-null pointer of a minimal
  // block.
  void* allocate(std::int64_t bytes, StreamRef stream);
  // Raises Error for a pointer this allocator does not own (a double free, a foreign pointer) and
  // changes nothing; DeviceError, after reclaiming it, for a block whose allocation stream was
  // destroyed. free(nullptr) does nothing.
  void free(void* ptr);
  // Marks a live block as used on another stream, so its reuse waits for that stream. The stream
  // must stay alive until the block is freed or the stream is destroyed through tessel (which
  // notifies the allocator).
  void record_stream(void* ptr, StreamRef stream);
  // Size of the live block holding ptr (0 if not owned).
  std::size_t block_size(void* ptr) const;

  // Releases every cached, unsplit segment to the runtime (after pending events complete).
  void empty_cache();
  MemoryStats stats() const;
  void reset_peak_stats();
  void set_memory_fraction(double fraction);  // ValueError outside (0, 1]
  const CachingAllocatorOptions& options() const;

  // Free-memory callbacks let caches above the allocator (cuFFT plans and their workspaces)
  // give memory back when an allocation fails. After the ladder fails, every callback runs
  // (outside the allocator's lock, so it may free blocks) and, if any returns true (it released
  // something), the allocation is retried once before OutOfMemory is raised. Returns an id for
  // remove_free_memory_callback.
  std::uint64_t add_free_memory_callback(std::function<bool()> callback);
  void remove_free_memory_callback(std::uint64_t id);

  // The stream was synchronized and is going away: its pending uses are done, and cached
  // blocks owned by it are re-homed so they can be reused.
  void on_stream_destroyed(std::uint64_t stream_id);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process-wide allocator of a CUDA device, configured from the environment
// (TESSEL_ALLOCATOR, TESSEL_MEMORY_FRACTION, TESSEL_MAX_SPLIT_SIZE_MB). DeviceError for a bad index.
CachingAllocator& device_allocator(int device_index);
// The process-wide pinned host allocator. DeviceError without CUDA.
CachingAllocator& pinned_allocator();

StreamRef stream_ref(const Stream& stream);

}  // namespace tessel
