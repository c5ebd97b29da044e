#pragma once
// A captured graph's state (graph.cpp) and the CUDA graph calls it makes (graph_cuda.cpp; a build
// without CUDA has the not-built error there).
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tessel/core/stream.hpp"
#include "tessel/memory/capture.hpp"
#include "tessel/pipeline/graph.hpp"

namespace tessel::detail {

struct GraphState {
  Stream stream;  // kept alive: held buffers were allocated on it
  std::function<void()> cpu_fn;
  std::unique_ptr<CaptureState> capture;
  void* graph = nullptr;  // cudaGraph_t
  void* exec = nullptr;   // cudaGraphExec_t
  std::int64_t nodes = 0;
  mutable std::int64_t replays = 0;
  mutable std::vector<Stream> replay_streams;  // every stream a replay ran on
  mutable std::mutex mutex;

  ~GraphState();
};

namespace cuda_graph {

// Waits for the capture stream and every replay stream, then destroys the graph and its
// instantiation (in the graph's device's context).
void release(GraphState& state) noexcept;
// Starts capturing `stream`, after the device's queued work (a capture can neither wait on nor
// query events recorded outside it).
void begin_capture(const Stream& stream, CaptureMode mode);
// Ends a failed capture, discarding its graph.
void abort_capture(const Stream& stream) noexcept;
// Ends the capture into state.graph and counts its nodes; an invalidated capture raises.
void end_capture(const Stream& stream, GraphState& state);
// Instantiates state.graph into state.exec.
void instantiate(GraphState& state);
// Launches state.exec on `stream`.
void launch(const GraphState& state, const Stream& stream);

}  // namespace cuda_graph
}  // namespace tessel::detail
