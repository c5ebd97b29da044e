#include "tessel/memory/capture.hpp"

#include <fmt/format.h>

#include "tessel/memory/stats.hpp"

namespace tessel::detail {

namespace {
thread_local CaptureState* thread_capture = nullptr;
}

CaptureState* active_capture() { return thread_capture; }

bool capturing_on(const Stream& stream) {
  return thread_capture != nullptr && thread_capture->stream_id == stream.id();
}

CaptureState* set_active_capture(CaptureState* state) {
  CaptureState* previous = thread_capture;
  thread_capture = state;
  set_thread_capture_stream(state ? state->stream_id : 0);
  return previous;
}

void CaptureState::note_use(const std::shared_ptr<Buffer>& buffer) {
  if (!buffer) return;
  for (const Use& use : uses) {
    if (use.data == buffer->data() && !use.buffer.expired()) return;
  }
  uses.push_back(Use{buffer, buffer->data(), buffer->size()});
}

std::string capture_allocation_error(const std::string& allocator_name, std::int64_t bytes) {
  const CaptureState* state = thread_capture;
  return fmt::format(
      "{}: allocate {} during CUDA graph capture ({} on stream #{}): no reserved memory is left and the raw "
      "allocator cannot be called while capturing; reserve more before the capture (GraphOptions.reserve_bytes)",
      allocator_name, format_bytes(bytes), state ? state->name : std::string("capture"), state ? state->stream_id : 0);
}

}  // namespace tessel::detail
