// The CUDA graph calls of graph.cpp (see graph_state.hpp).
#include "pipeline/graph_state.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"

namespace tessel::detail::cuda_graph {
namespace {

cudaStreamCaptureMode cuda_mode(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::global: return cudaStreamCaptureModeGlobal;
    case CaptureMode::relaxed: return cudaStreamCaptureModeRelaxed;
    default: return cudaStreamCaptureModeThreadLocal;
  }
}

}  // namespace

void release(GraphState& state) noexcept {
  DeviceGuard guard(state.stream.device(), std::nothrow);  // the graph is destroyed in its device's context
  // Replays may still run: the held buffers must outlive them.
  if (state.stream.device().is_cuda()) (void)cudaStreamSynchronize(detail::cuda_stream(state.stream));
  for (const Stream& s : state.replay_streams) (void)cudaStreamSynchronize(detail::cuda_stream(s));
  if (state.exec) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(state.exec));
  if (state.graph) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(state.graph));
}

void begin_capture(const Stream& stream, CaptureMode mode) {
  DeviceGuard device_guard(stream.device());
  TESSEL_CUDA_CHECK(cudaDeviceSynchronize(), "Graph.capture");
  TESSEL_CUDA_CHECK(cudaStreamBeginCapture(detail::cuda_stream(stream), cuda_mode(mode)), "Graph.capture");
}

void abort_capture(const Stream& stream) noexcept {
  DeviceGuard device_guard(stream.device(), std::nothrow);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(detail::cuda_stream(stream), &graph);
  if (graph) (void)cudaGraphDestroy(graph);
  // An invalidated capture leaves a non-sticky error behind; any other pending error is the user's.
  if (ended == cudaErrorStreamCaptureInvalidated) (void)cudaGetLastError();
}

void end_capture(const Stream& stream, GraphState& state) {
  DeviceGuard device_guard(stream.device());  // instantiated for the captured stream's device
  cudaGraph_t graph = nullptr;
  const cudaError_t status = cudaStreamEndCapture(detail::cuda_stream(stream), &graph);
  if (status != cudaSuccess || graph == nullptr) {
    if (graph) (void)cudaGraphDestroy(graph);
    detail::check_cuda(status == cudaSuccess ? cudaErrorStreamCaptureInvalidated : status, "Graph.capture (end)",
                       "cudaStreamEndCapture", __FILE__, __LINE__);
  }
  state.graph = graph;
  std::size_t nodes = 0;
  TESSEL_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes), "Graph.capture");
  state.nodes = static_cast<std::int64_t>(nodes);
}

void instantiate(GraphState& state) {
  DeviceGuard device_guard(state.stream.device());
  cudaGraphExec_t exec = nullptr;
  TESSEL_CUDA_CHECK(cudaGraphInstantiate(&exec, static_cast<cudaGraph_t>(state.graph), 0),
                    "Graph.capture (instantiate)");
  state.exec = exec;
}

void launch(const GraphState& state, const Stream& stream) {
  DeviceGuard device_guard(stream.device());
  TESSEL_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(state.exec), detail::cuda_stream(stream)),
                    "Graph.replay");
}

}  // namespace tessel::detail::cuda_graph

#else  // a build without CUDA: no CUDA stream exists to capture

#include "core/not_built.hpp"

namespace tessel::detail::cuda_graph {

void release(GraphState&) noexcept {}
void begin_capture(const Stream&, CaptureMode) { throw_cuda_not_built("GraphCapture"); }
void abort_capture(const Stream&) noexcept {}
void end_capture(const Stream&, GraphState&) { throw_cuda_not_built("GraphCapture"); }
void instantiate(GraphState&) { throw_cuda_not_built("GraphCapture"); }
void launch(const GraphState&, const Stream&) { throw_cuda_not_built("Graph.replay"); }

}  // namespace tessel::detail::cuda_graph
#endif
