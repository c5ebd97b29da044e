#pragma once
// What the memory and array layers need to know about a CUDA graph capture in progress on the
// calling thread (internal; tessel/pipeline/graph.hpp is the public API).
//
// While a capture is active on this thread:
// - the caching allocators must not call the raw allocator (cudaMalloc/cudaHostAlloc are not
//   capturable): a request no cached block can serve raises OutOfMemory naming the capture, so a
//   capture reserves its memory beforehand (Graph reserves it with reserve_capture_memory);
// - every device Buffer allocated on this thread is kept by the capture (and then by its Graph),
//   because replays write to those addresses: they must not go back to the pool while the graph
//   lives;
// - the storages that captured work reads or writes are noted, so replay can check they are alive
//   and mark the pending writes of the replay.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessel/core/stream.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::detail {

struct CaptureState {
  std::uint64_t stream_id = 0;
  int device_index = 0;
  std::string name = "Graph.capture";
  // Allocated during capture: owned by the capture, then by the Graph.
  std::vector<std::shared_ptr<Buffer>> allocations;
  // Buffers used by captured work (inputs and outputs), with their address and size for messages.
  struct Use {
    std::weak_ptr<Buffer> buffer;
    const void* data = nullptr;
    std::int64_t bytes = 0;
  };
  std::vector<Use> uses;
  // Run after each replay on the replay stream (re-marks the pending writes of captured outputs).
  std::vector<std::function<void(const Stream&)>> after_replay;
  std::vector<std::weak_ptr<const void>> after_replay_keys;  // one mark per live storage

  void note_use(const std::shared_ptr<Buffer>& buffer);
};

// The capture active on this thread, or nullptr. Also the thread's "no raw allocation" switch.
CaptureState* active_capture();
// True when a capture is active on this thread and it captures `stream`.
bool capturing_on(const Stream& stream);
// Installs (or, with nullptr, removes) the capture of this thread; returns the previous one.
CaptureState* set_active_capture(CaptureState* state);

// Message for an allocation that would need the raw allocator during capture.
std::string capture_allocation_error(const std::string& allocator_name, std::int64_t bytes);

}  // namespace tessel::detail
