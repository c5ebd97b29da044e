#pragma once
// The stream an op runs on: the given one, else the current stream of the array's device.
#include "array/backend.hpp"
#include "tessel/array/array.hpp"

namespace tessel::detail {

// DeviceError when the given stream belongs to another device than the array.
inline Stream op_stream(const Array& a, const OptionalStream& stream, const char* op) {
  Stream s = resolve_stream(a.device(), stream);
  check_stream_device(s, a.device(), op);
  return s;
}

}  // namespace tessel::detail
