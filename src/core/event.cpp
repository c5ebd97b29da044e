#include "tessel/core/event.hpp"

#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "core/cuda_check.hpp"
#include "tessel/core/error.hpp"

namespace tessel {

namespace {
double host_now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Event::Event(Device device, bool timing) : device_(device), timing_(timing) {
  if (device.is_cpu()) return;
  check_device_index(device.index, "Event");
#if defined(TESSEL_HAVE_CUDA)
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  TESSEL_CUDA_CHECK(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming), "Event");
  handle_ = event;
#endif
}

Event::~Event() {
#if defined(TESSEL_HAVE_CUDA)
  if (handle_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
#endif
}

Event::Event(Event&& other) noexcept
    : device_(other.device_), timing_(other.timing_), recorded_(other.recorded_),
      handle_(std::exchange(other.handle_, nullptr)), host_time_ms_(other.host_time_ms_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    this->~Event();
    device_ = other.device_;
    timing_ = other.timing_;
    recorded_ = other.recorded_;
    handle_ = std::exchange(other.handle_, nullptr);
    host_time_ms_ = other.host_time_ms_;
  }
  return *this;
}

void Event::record(const Stream& stream) {
  if (stream.device() != device_) {
    throw DeviceError(fmt::format("Event.record: the event is on {} but the stream is on {}", device_.str(),
                                  stream.device().str()));
  }
  if (device_.is_cpu()) {
    host_time_ms_ = host_now_ms();
  } else {
#if defined(TESSEL_HAVE_CUDA)
    DeviceGuard guard(device_);  // a null handle is the legacy default stream of the current device
    TESSEL_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), detail::cuda_stream(stream)),
                      "Event.record");
#endif
  }
  recorded_ = true;
}

void Event::synchronize() const {
  if (device_.is_cpu() || !recorded_) return;
#if defined(TESSEL_HAVE_CUDA)
  TESSEL_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "Event.synchronize");
#endif
}

bool Event::query() const {
  if (device_.is_cpu() || !recorded_) return true;
#if defined(TESSEL_HAVE_CUDA)
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (status == cudaErrorNotReady) return false;
  TESSEL_CUDA_CHECK(status, "Event.query");
#endif
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  if (!recorded_ || !end.recorded_) throw Error("Event.elapsed_ms: both events must be recorded first");
  if (!timing_ || !end.timing_) throw Error("Event.elapsed_ms: an event was created with timing=false");
  if (device_ != end.device_) {
    throw DeviceError(fmt::format("Event.elapsed_ms: events on different devices ({} and {})", device_.str(),
                                  end.device_.str()));
  }
  if (device_.is_cpu()) return static_cast<float>(end.host_time_ms_ - host_time_ms_);
  float ms = 0;
#if defined(TESSEL_HAVE_CUDA)
  end.synchronize();
  TESSEL_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_), static_cast<cudaEvent_t>(end.handle_)),
                    "Event.elapsed_ms");
#endif
  return ms;
}

}  // namespace tessel
