#pragma once
// Arrays as the payload of op ranges (TESSEL_RANGE("op", a, b, out, stream)): "float32[2,3]".
// Formatted only while something listens to ranges.
#include <optional>
#include <vector>

#include "tessel/array/array.hpp"
#include "tessel/profile/range.hpp"

namespace tessel {

inline void describe(profile::ArgSink& sink, const Array& a) {
  if (!a.defined()) return;
  sink.add_array(a.shape().data(), static_cast<int>(a.ndim()), dtype_name(a.dtype()), a.device());
}
inline void describe(profile::ArgSink& sink, const std::optional<Array>& a) {
  if (a) describe(sink, *a);
}
inline void describe(profile::ArgSink& sink, const std::vector<Array>& arrays) {
  for (const Array& a : arrays) describe(sink, a);
}

}  // namespace tessel
