#pragma once
// Events mark a point in a stream: record, wait on it from the host or another stream,
// and measure elapsed time between two of them. On the CPU an event is a host timestamp.
#include <memory>

#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"

namespace tessel {

namespace detail {
struct EventState;
}

class Event {
 public:
  // timing=false makes a lighter event for pure synchronization.
  explicit Event(Device device = default_device(), bool timing = true);
  ~Event();
  Event(Event&&) noexcept;
  Event& operator=(Event&&) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  void record() { record(current_stream(device_)); }
  bool recorded() const { return recorded_; }
  void synchronize() const;      // host waits until the recorded work has finished
  bool query() const;            // true when it has finished (or was never recorded)
  // Milliseconds from this event to `end`; both recorded with timing on and finished.
  float elapsed_ms(const Event& end) const;

  Device device() const { return device_; }
  void* handle() const { return handle_; }  // cudaEvent_t

 private:
  Device device_;
  bool timing_ = true;
  bool recorded_ = false;
  void* handle_ = nullptr;
  double host_time_ms_ = 0;  // CPU events
};

}  // namespace tessel
