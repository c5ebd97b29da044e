#pragma once
// The stream an op runs on: the given one, else the current stream of the array's device.
#include <fmt/format.h>

#include "array/backend.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/error.hpp"

namespace tessel::detail {

// Every op's stream check: DeviceError when the stream belongs to another device than the op's
// arrays.
inline void check_stream_device(const Stream& s, Device device, const char* op) {
  if (s.device() != device) {
    throw DeviceError(fmt::format("{}: the stream is on {} but the array is on {}", op, s.device().str(),
                                  device.str()));
  }
}

// The stream of an op on `device`: the given one, else the device's current stream.
inline Stream op_stream(Device device, const OptionalStream& stream, const char* op) {
  Stream s = resolve_stream(device, stream);
  check_stream_device(s, device, op);
  return s;
}
inline Stream op_stream(const Array& a, const OptionalStream& stream, const char* op) {
  return op_stream(a.device(), stream, op);
}

}  // namespace tessel::detail
