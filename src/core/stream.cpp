#include "tessel/core/stream.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "core/cuda_check.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/log.hpp"

namespace tessel {
namespace detail {

// Ids: 1 is the CPU stream, 2 + N the default stream of cuda:N; created and adopted streams
// count up from first_dynamic_id and are never reused.
constexpr std::uint64_t cpu_stream_id = 1;
constexpr std::uint64_t first_dynamic_id = 1u << 20;

struct StreamRegistry {
  std::mutex mutex;
  std::atomic<std::uint64_t> next_id{first_dynamic_id};
  std::unordered_set<std::uint64_t> alive;
  std::map<std::pair<void*, int>, std::uint64_t> adopted;  // (handle, device) -> id
  std::vector<StreamDestroyedListener> listeners;
};

StreamRegistry& registry() {
  static StreamRegistry* r = new StreamRegistry();  // outlives static destructors of streams
  return *r;
}

struct StreamState {
  std::uint64_t id = cpu_stream_id;
  Device device;
  void* handle = nullptr;
  int priority = 0;
  bool owned = false;

  ~StreamState() {
    if (!owned) return;
#if defined(TESSEL_HAVE_CUDA)
    auto stream = static_cast<cudaStream_t>(handle);
    const cudaError_t status = cudaStreamSynchronize(stream);
    std::vector<StreamDestroyedListener> listeners;
    {
      auto& r = registry();
      std::lock_guard<std::mutex> lock(r.mutex);
      r.alive.erase(id);
      listeners = r.listeners;
    }
    if (status == cudaSuccess) {
      for (auto listener : listeners) listener(id, device);
    } else {
      TESSEL_LOG_WARN(fmt::format("Stream #{} on {}: synchronize before destroy failed: {}", id,
                                  device.str(), cudaGetErrorString(status)));
    }
    (void)cudaStreamDestroy(stream);
#endif
  }
};

void add_stream_destroyed_listener(StreamDestroyedListener listener) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.listeners.push_back(listener);
}

bool stream_alive(std::uint64_t stream_id) {
  if (stream_id < first_dynamic_id) return true;
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.alive.count(stream_id) != 0;
}

namespace {
thread_local std::uint64_t capture_stream_id = 0;
}

void set_thread_capture_stream(std::uint64_t stream_id) { capture_stream_id = stream_id; }
std::uint64_t thread_capture_stream() { return capture_stream_id; }

void check_not_capturing(const char* op) {
  if (capture_stream_id == 0) return;
  throw Error(fmt::format("{}: cannot be captured in a CUDA graph (a capture of stream #{} is active on this "
                          "thread): it waits for the device on the host; move it out of the captured code",
                          op, capture_stream_id));
}

}  // namespace detail

namespace {

std::shared_ptr<detail::StreamState> cpu_state() {
  static const auto state = std::make_shared<detail::StreamState>();
  return state;
}

// Every op without an explicit stream comes here: built once for all devices (a thread-safe
// static), then read without a lock. The states own no CUDA resource (the legacy default stream).
const std::shared_ptr<detail::StreamState>& default_state(int index) {
  static const std::vector<std::shared_ptr<detail::StreamState>> states = [] {
    std::vector<std::shared_ptr<detail::StreamState>> v(static_cast<std::size_t>(device_count()));
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = std::make_shared<detail::StreamState>();
      v[i]->id = 2 + static_cast<std::uint64_t>(i);
      v[i]->device = Device::cuda(static_cast<int>(i));
    }
    return v;
  }();
  return states[static_cast<std::size_t>(index)];
}

// Per thread, per device: the current stream (null until set: the default stream).
thread_local std::vector<std::shared_ptr<detail::StreamState>> current_states;

}  // namespace

Stream::Stream() : Stream(default_stream(default_device())) {}

Stream Stream::cpu() { return Stream(cpu_state()); }

Stream Stream::default_stream(Device device) {
  if (device.is_cpu()) return cpu();
  check_device_index(device.index, "Stream.default_stream");
  return Stream(default_state(device.index));
}

std::pair<int, int> Stream::priority_range(Device device) {
  if (device.is_cpu()) return {0, 0};
  check_device_index(device.index, "Stream.priority_range");
  int least = 0, greatest = 0;
#if defined(TESSEL_HAVE_CUDA)
  DeviceGuard guard(device);
  TESSEL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest), "Stream.priority_range");
#endif
  return {greatest, least};
}

Stream Stream::create(Device device, int priority, bool non_blocking) {
  if (device.is_cpu()) return cpu();
  check_device_index(device.index, "Stream.create");
  auto state = std::make_shared<detail::StreamState>();
  state->device = device;
#if defined(TESSEL_HAVE_CUDA)
  const auto [greatest, least] = priority_range(device);
  state->priority = std::clamp(priority, greatest, least);
  DeviceGuard guard(device);
  cudaStream_t handle = nullptr;
  TESSEL_CUDA_CHECK(cudaStreamCreateWithPriority(
                        &handle, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault, state->priority),
                    "Stream.create");
  state->handle = handle;
  state->owned = true;
#else
  (void)priority;
  (void)non_blocking;
#endif
  auto& r = detail::registry();
  state->id = r.next_id++;
  std::lock_guard<std::mutex> lock(r.mutex);
  r.alive.insert(state->id);
  return Stream(std::move(state));
}

Stream Stream::from_handle(void* cuda_stream, Device device) {
  if (device.is_cpu()) throw DeviceError("Stream.from_handle: a CUDA stream handle needs a CUDA device, got cpu");
  check_device_index(device.index, "Stream.from_handle");
  if (cuda_stream == nullptr) return default_stream(device);
  auto state = std::make_shared<detail::StreamState>();
  state->device = device;
  state->handle = cuda_stream;
#if defined(TESSEL_HAVE_CUDA)
  TESSEL_CUDA_CHECK(cudaStreamGetPriority(static_cast<cudaStream_t>(cuda_stream), &state->priority),
                    "Stream.from_handle");
#endif
  auto& r = detail::registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto [it, inserted] = r.adopted.emplace(std::make_pair(cuda_stream, device.index), 0);
  if (inserted) it->second = r.next_id++;
  state->id = it->second;
  return Stream(std::move(state));
}

Device Stream::device() const { return state_->device; }
void* Stream::handle() const { return state_->handle; }
std::uint64_t Stream::id() const { return state_->id; }
int Stream::priority() const { return state_->priority; }
bool Stream::owned() const { return state_->owned; }

void Stream::synchronize() const {
  if (state_->device.is_cpu()) return;
  detail::check_not_capturing("Stream.synchronize");
#if defined(TESSEL_HAVE_CUDA)
  DeviceGuard guard(state_->device);  // a null handle is the legacy default stream of the current device
  TESSEL_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(state_->handle)), "Stream.synchronize");
#endif
}

bool Stream::query() const {
  if (state_->device.is_cpu()) return true;
#if defined(TESSEL_HAVE_CUDA)
  DeviceGuard guard(state_->device);
  const cudaError_t status = cudaStreamQuery(static_cast<cudaStream_t>(state_->handle));
  if (status == cudaErrorNotReady) return false;
  TESSEL_CUDA_CHECK(status, "Stream.query");
#endif
  return true;
}

bool Stream::capturing() const {
  if (state_->device.is_cpu()) return false;
#if defined(TESSEL_HAVE_CUDA)
  DeviceGuard guard(state_->device);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t error = cudaStreamIsCapturing(static_cast<cudaStream_t>(state_->handle), &status);
  // The legacy default stream while another stream captures in global mode: using it would join
  // (and break) that capture, so it counts as capturing.
  if (error == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    return true;
  }
  TESSEL_CUDA_CHECK(error, "Stream.capturing");
  return status != cudaStreamCaptureStatusNone;
#else
  return false;
#endif
}

void Stream::wait(const Event& event) const {
  if (state_->device.is_cpu() || event.device().is_cpu() || !event.recorded()) return;
#if defined(TESSEL_HAVE_CUDA)
  // The event may belong to another device; the stream's device must be current.
  DeviceGuard guard(state_->device);
  TESSEL_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(state_->handle),
                                        static_cast<cudaEvent_t>(event.handle()), 0),
                    "Stream.wait");
#endif
}

Stream current_stream(Device device) {
  if (device.is_cpu()) return Stream::cpu();
  check_device_index(device.index, "current_stream");
  const auto index = static_cast<std::size_t>(device.index);
  if (index < current_states.size() && current_states[index]) return Stream(current_states[index]);
  return Stream(default_state(device.index));  // the index is checked above
}

Stream current_stream() { return current_stream(default_device()); }

void set_current_stream(const Stream& stream) {
  if (stream.device().is_cpu()) return;
  const auto index = static_cast<std::size_t>(stream.device().index);
  if (current_states.size() <= index) current_states.resize(index + 1);
  current_states[index] = stream.state_;
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() { set_current_stream(previous_); }

}  // namespace tessel
