#pragma once
// The stream an op runs on: the given one, else the current stream of the array's device.
#include "array/backend.hpp"
#include "tessel/array/array.hpp"

namespace tessel::detail {

// The stream of an op on `device`: the given one, else the device's current stream. DeviceError
// when the given stream belongs to another device.
inline Stream op_stream(Device device, const OptionalStream& stream, const char* op) {
  Stream s = resolve_stream(device, stream);
  check_stream_device(s, device, op);
  return s;
}
inline Stream op_stream(const Array& a, const OptionalStream& stream, const char* op) {
  return op_stream(a.device(), stream, op);
}

}  // namespace tessel::detail
