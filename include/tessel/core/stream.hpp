#pragma once
// Streams: ordered queues of device work. A Stream is a cheap, copyable handle; an owned
// stream is destroyed when its last handle goes (after its work has finished).
#include <cstdint>
#include <memory>
#include <utility>

#include "tessel/core/device.hpp"

namespace tessel {

class Event;
class Stream;
Stream current_stream(Device device);
void set_current_stream(const Stream& stream);
namespace detail {
struct StreamState;
}

class Stream {
 public:
  // The legacy default stream of the current device, or the CPU stream without CUDA.
  Stream();

  // A new owned stream. Lower numbers are higher priority, as in CUDA; out-of-range
  // priorities are clamped to the device's range. non_blocking: no implicit sync with stream 0.
  static Stream create(Device device, int priority = 0, bool non_blocking = true);
  static Stream create() { return create(default_device()); }
  // The legacy default stream (handle 0) of a device.
  static Stream default_stream(Device device);
  // Adopts a cudaStream_t created elsewhere (PyTorch, CuPy) without owning it. The owner must
  // keep it alive while tessel work that uses it is pending.
  static Stream from_handle(void* cuda_stream, Device device);
  // The CPU stream: work submitted to it runs synchronously.
  static Stream cpu();

  Device device() const;
  void* handle() const;           // cudaStream_t; nullptr for default and CPU streams
  std::uint64_t id() const;       // unique for the life of the process, never reused
  int priority() const;
  bool owned() const;

  void synchronize() const;       // host waits for all work queued so far
  bool query() const;             // true when all queued work has finished
  bool capturing() const;         // true while a CUDA graph capture (tessel's or another library's) records it
  void wait(const Event& event) const;  // later work on this stream waits for the event

  // [greatest, least] priority numbers the device accepts, e.g. {-5, 0}.
  static std::pair<int, int> priority_range(Device device);

  friend bool operator==(const Stream& a, const Stream& b) { return a.id() == b.id(); }
  friend bool operator!=(const Stream& a, const Stream& b) { return !(a == b); }

 private:
  friend Stream current_stream(Device device);
  friend void set_current_stream(const Stream& stream);
  explicit Stream(std::shared_ptr<detail::StreamState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::StreamState> state_;
};

// The current stream of the calling thread for a device (default: that device's default stream).
Stream current_stream(Device device);
Stream current_stream();  // of default_device()
void set_current_stream(const Stream& stream);

// Makes a stream current for a scope and restores the previous one.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

namespace detail {
// Called, with the stream's id, after an owned stream has been synchronized and just before it
// is destroyed. The memory layer uses this to forget the stream.
using StreamDestroyedListener = void (*)(std::uint64_t stream_id, Device device);
void add_stream_destroyed_listener(StreamDestroyedListener listener);
// True while a stream with this id exists (default, adopted and CPU streams always exist).
bool stream_alive(std::uint64_t stream_id);
// CUDA graph capture on the calling thread (set by the pipeline layer's GraphCapture): the id of
// the captured stream, 0 when none. Host synchronization cannot be captured: check_not_capturing
// raises Error naming `op` while a capture is active on this thread.
void set_thread_capture_stream(std::uint64_t stream_id);
std::uint64_t thread_capture_stream();
void check_not_capturing(const char* op);
}  // namespace detail

}  // namespace tessel
