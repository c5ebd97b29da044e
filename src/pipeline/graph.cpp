// CUDA graph capture and replay (see tessel/pipeline/graph.hpp).
#include "tessel/pipeline/graph.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/memory/capture.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/memory/stats.hpp"
#include "tessel/profile/range.hpp"

#include "pipeline/graph_state.hpp"

namespace tessel {
namespace detail {

GraphState::~GraphState() {
  cuda_graph::release(*this);
  // capture (and its buffers) go back to the pool on the capture stream now.
}

}  // namespace detail

GraphCapture::GraphCapture(const Stream& stream, const GraphOptions& options) : stream_(stream), options_(options) {
  if (options.reserve_bytes < 0) {
    throw ValueError(fmt::format("GraphCapture: reserve_bytes must be >= 0, got {}", options.reserve_bytes));
  }
  if (detail::active_capture() != nullptr) {
    throw Error("GraphCapture: a capture is already active on this thread (nested captures are not supported)");
  }
  if (stream.device().is_cpu()) {
    open_ = true;  // CPU: nothing to capture; Graph::capture records the function
    return;
  }
  if (stream.handle() == nullptr) {
    throw ValueError(fmt::format("GraphCapture: the legacy default stream of {} cannot be captured; use "
                                 "Stream::create",
                                 stream.device().str()));
  }
  // Reserve memory in the stream's pool: one large and one small block, freed at once so they
  // stay cached for this stream, where capture-time allocations find them.
  CachingAllocator& allocator = device_allocator(stream.device().index);
  if (options.reserve_bytes > 0) {
    void* large = allocator.allocate(options.reserve_bytes, stream_ref(stream));
    allocator.free(large);
    void* small = allocator.allocate(512 << 10, stream_ref(stream));
    allocator.free(small);
  }
  state_ = std::make_unique<detail::CaptureState>();
  state_->stream_id = stream.id();
  state_->device_index = stream.device().index;
  state_->name = "Graph.capture";
  guard_ = std::make_unique<StreamGuard>(stream);
  detail::cuda_graph::begin_capture(stream, options.mode);
  previous_ = detail::set_active_capture(state_.get());
  open_ = true;
}

void GraphCapture::abort() noexcept {
  if (!open_) return;
  open_ = false;
  if (stream_.device().is_cpu()) return;
  detail::set_active_capture(previous_);
  detail::cuda_graph::abort_capture(stream_);
  guard_.reset();
  // The buffers allocated during the failed capture were never used by a launched graph.
  state_.reset();
}

GraphCapture::~GraphCapture() { abort(); }

Graph GraphCapture::finish() {
  TESSEL_RANGE("GraphCapture.finish", stream_);
  if (!open_) throw Error("GraphCapture.finish: the capture is not open (already finished or failed)");
  auto graph_state = std::make_shared<detail::GraphState>();
  graph_state->stream = stream_;
  if (stream_.device().is_cpu()) {
    open_ = false;
    graph_state->cpu_fn = cpu_fn_;
    Graph g;
    g.state_ = std::move(graph_state);
    return g;
  }
  detail::set_active_capture(previous_);
  open_ = false;
  guard_.reset();
  try {
    detail::cuda_graph::end_capture(stream_, *graph_state);
  } catch (...) {
    state_.reset();
    throw;
  }
  graph_state->capture = std::move(state_);
  detail::cuda_graph::instantiate(*graph_state);
  Graph g;
  g.state_ = std::move(graph_state);
  return g;
}

Graph Graph::capture(const Stream& stream, const std::function<void()>& fn, const GraphOptions& options) {
  TESSEL_RANGE("Graph.capture", stream);
  if (!fn) throw ValueError("Graph.capture: the function is empty");
  GraphCapture capture(stream, options);
  if (stream.device().is_cpu()) {
    fn();  // runs once, as the GPU capture's replays would
    capture.cpu_fn_ = fn;
    return capture.finish();
  }
  fn();  // an exception ends and discards the capture (GraphCapture's destructor)
  return capture.finish();
}

bool Graph::buffers_alive() const {
  if (!state_ || !state_->capture) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const detail::CaptureState::Use& use : state_->capture->uses) {
    if (use.buffer.expired()) return false;
  }
  return true;
}

void Graph::replay() const {
  if (!state_) throw ValueError("Graph.replay: the graph is empty (default-constructed)");
  replay(state_->stream);
}

void Graph::replay(const Stream& stream) const {
  TESSEL_RANGE("Graph.replay", stream);
  if (!state_) throw ValueError("Graph.replay: the graph is empty (default-constructed)");
  if (stream.device() != state_->stream.device()) {
    throw DeviceError(fmt::format("Graph.replay: the graph was captured on {}, the stream is on {}",
                                  state_->stream.device().str(), stream.device().str()));
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->cpu_fn) {
    state_->cpu_fn();
    state_->replays++;
    return;
  }
  if (!state_->capture) {
    // A GraphCapture scope on the CPU ran its work once and recorded nothing to run again.
    throw ValueError("Graph.replay: this graph was recorded with GraphCapture on the CPU, which keeps no work to "
                     "replay; use Graph::capture(stream, fn), whose CPU fallback reruns fn");
  }
  const detail::CaptureState& capture = *state_->capture;
  for (const detail::CaptureState::Use& use : capture.uses) {
    if (use.buffer.expired()) {
      throw Error(fmt::format("Graph.replay: a buffer used by the captured work ({} at {}) has been freed since "
                              "the capture; keep the graph's input and output arrays alive while you replay it",
                              format_bytes(use.bytes), fmt::ptr(use.data)));
    }
  }
  if (detail::thread_capture_stream() != 0) {
    throw Error("Graph.replay: cannot replay a graph while a capture is active on this thread");
  }
  detail::cuda_graph::launch(*state_, stream);
  for (const auto& mark : capture.after_replay) mark(stream);
  if (stream != state_->stream &&
      std::find(state_->replay_streams.begin(), state_->replay_streams.end(), stream) == state_->replay_streams.end()) {
    state_->replay_streams.push_back(stream);
  }
  state_->replays++;
}

const Stream& Graph::stream() const {
  if (!state_) throw ValueError("Graph.stream: the graph is empty");
  return state_->stream;
}

std::int64_t Graph::num_nodes() const { return state_ ? state_->nodes : 0; }

std::int64_t Graph::held_bytes() const {
  if (!state_ || !state_->capture) return 0;
  std::int64_t bytes = 0;
  for (const auto& b : state_->capture->allocations) bytes += b->size();
  return bytes;
}

std::int64_t Graph::num_replays() const {
  if (!state_) return 0;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->replays;
}

GraphCache::GraphCache(std::size_t capacity, GraphOptions options) : capacity_(capacity), options_(options) {
  if (capacity == 0) throw ValueError("GraphCache: capacity must be positive, got 0");
}

bool GraphCache::capture_or_replay(const std::string& key, const Stream& stream, const std::function<void()>& fn) {
  Graph graph;
  bool hit = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key && it->second.stream() == stream) {
        if (!it->second.buffers_alive()) {  // the allocator reused a freed address: capture anew
          entries_.erase(it);
          break;
        }
        entries_.splice(entries_.begin(), entries_, it);  // most recently used first
        graph = entries_.front().second;
        hit = true;
        break;
      }
    }
  }
  if (!hit) {
    graph = Graph::capture(stream, fn, options_);
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.emplace_front(key, graph);
    while (entries_.size() > capacity_) entries_.pop_back();
  }
  // On the CPU the capture already ran the function once.
  if (hit || stream.device().is_cuda()) graph.replay(stream);
  return hit;
}

std::size_t GraphCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

void GraphCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

std::string graph_key(const std::vector<Array>& arrays) {
  std::string key;
  for (const Array& a : arrays) {
    if (!a.defined()) {
      key += "undefined;";
      continue;
    }
    key += fmt::format("{}{}[", dtype_name(a.dtype()), a.device().str());
    for (std::size_t i = 0; i < a.shape().size(); ++i) {
      key += fmt::format("{}{}:{}", i ? "," : "", a.shape()[i], a.strides()[i]);
    }
    key += fmt::format("]@{};", fmt::ptr(a.data()));
  }
  return key;
}

}  // namespace tessel
