#pragma once
// The stream an op runs on: the given one, else the current stream of the array's device.
#include <fmt/format.h>

#include "array/backend.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/error.hpp"

namespace tessel::detail {

// DeviceError when the given stream belongs to another device than the array.
inline Stream op_stream(const Array& a, const OptionalStream& stream, const char* op) {
  Stream s = resolve_stream(a.device(), stream);
  if (s.device() != a.device()) {
    throw DeviceError(fmt::format("{}: the stream is on {} but the array is on {}", op, s.device().str(),
                                  a.device().str()));
  }
  return s;
}

}  // namespace tessel::detail
