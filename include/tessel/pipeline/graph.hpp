#pragma once
// CUDA graphs: capture a sequence of tessel ops on a stream once, replay it with one launch.
//
//   Stream s = Stream::create(Device::cuda(0));
//   Array x = ..., y;                        // inputs exist before the capture
//   Graph g = Graph::capture(s, [&] { y = add(multiply(x, 2.0f, std::nullopt, s), 1.0f, std::nullopt, s); });
//   copyto(x, new_data, s);                  // new data in the captured input...
//   g.replay(s);                             // ...y is recomputed from it
//
// - The ops run on the capture stream (it is made the thread's current stream for the capture).
// - Memory: cudaMalloc cannot be captured, so the capture first reserves GraphOptions.reserve_bytes
//   in the stream's pool; allocations during the capture come from it (OutOfMemory naming the
//   capture when it is exhausted). Every buffer allocated during the capture belongs to the Graph
//   until it is destroyed, because replays write to those addresses.
// - Ops that wait on the host (to_host, Array::wait, Stream::synchronize, host<->device transfers)
//   raise Error naming the op; CUDA's capture errors are reported naming the op too.
// - Inputs are not kept alive by the Graph: replay checks that every buffer the captured work uses
//   still exists and raises Error naming it otherwise (replaying into freed memory would corrupt
//   whatever now lives there).
// - On the CPU (a CPU stream) capture runs the function once and replay runs it again, so code
//   that uses graphs runs anywhere; the function must then stay valid as long as the Graph.
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessel/array/array.hpp"
#include "tessel/core/stream.hpp"

namespace tessel {

enum class CaptureMode { thread_local_, global, relaxed };  // cudaStreamCaptureMode*

struct GraphOptions {
  std::int64_t reserve_bytes = 64ll << 20;  // device memory reserved for allocations during capture
  CaptureMode mode = CaptureMode::thread_local_;
};

namespace detail {
struct GraphState;
struct CaptureState;
}  // namespace detail

class Graph {
 public:
  Graph() = default;  // empty: replay raises ValueError
  // Captures fn's work on `stream`. If fn throws, the capture is ended, discarded and the error rethrown.
  static Graph capture(const Stream& stream, const std::function<void()>& fn, const GraphOptions& options = {});

  // Launches the captured work on `stream` (default: the capture stream). Asynchronous.
  void replay(const Stream& stream) const;
  void replay() const;
  bool defined() const { return state_ != nullptr; }
  // False when a buffer the captured work uses has been freed since the capture (replay would
  // raise): a cached graph keyed by pointers is then stale, even if a new array got the address.
  bool buffers_alive() const;
  const Stream& stream() const;
  std::int64_t num_nodes() const;       // kernels, copies, ... in the graph (0 on the CPU)
  std::int64_t held_bytes() const;      // device memory allocated during capture and kept
  std::int64_t num_replays() const;

 private:
  friend class GraphCapture;
  std::shared_ptr<detail::GraphState> state_;
};

// RAII capture: begins capturing on construction, finish() ends it and returns the Graph. A
// capture still open when the scope ends (an exception) is ended and discarded.
class GraphCapture {
 public:
  explicit GraphCapture(const Stream& stream, const GraphOptions& options = {});
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;
  Graph finish();

 private:
  void abort() noexcept;
  Stream stream_;
  GraphOptions options_;
  std::unique_ptr<detail::CaptureState> state_;
  detail::CaptureState* previous_ = nullptr;
  std::unique_ptr<StreamGuard> guard_;
  bool open_ = false;
  std::function<void()> cpu_fn_;  // CPU: what replay re-runs
  friend class Graph;
};

// A bounded cache of graphs: capture_or_replay(key, fn) captures fn the first time a key is
// seen and replays the graph afterwards. Keys should name the shapes, dtypes and data pointers
// the captured work depends on (graph_key helps). Least recently used graphs go first.
class GraphCache {
 public:
  explicit GraphCache(std::size_t capacity = 32, GraphOptions options = {});
  // Returns true when it replayed a cached graph, false when it captured (and replayed) a new one.
  bool capture_or_replay(const std::string& key, const Stream& stream, const std::function<void()>& fn);
  std::size_t size() const;
  std::size_t capacity() const { return capacity_; }
  void clear();

 private:
  std::size_t capacity_;
  GraphOptions options_;
  mutable std::mutex mutex_;
  std::list<std::pair<std::string, Graph>> entries_;  // most recent first
};

// "f32[4,8]@0x...;..." for the arrays: their dtypes, shapes, strides and data pointers.
std::string graph_key(const std::vector<Array>& arrays);

}  // namespace tessel
