#pragma once
// Sorting and searching with NumPy semantics: ascending, stable, NaN last. -0.0 and +0.0 are
// equal keys (ties keep input order). Complex inputs are not supported yet (DTypeError).
#include <cstdint>

#include "tessel/array/array.hpp"

namespace tessel {

// Sorted copy along `axis` (negative counts from the end).
Array sort(const Array& a, std::int64_t axis = -1, const OptionalStream& stream = std::nullopt);
// int64 indices that sort `a` along `axis`; stable (equal keys keep their order).
Array argsort(const Array& a, std::int64_t axis = -1, const OptionalStream& stream = std::nullopt);
// Insertion points (int64, shape of `values`) of `values` into the 1-D ascending `sorted`:
// side left (first suitable index) or right (last). Both are compared in their common dtype.
Array searchsorted(const Array& sorted, const Array& values, bool right = false,
                   const OptionalStream& stream = std::nullopt);

// The sorted unique values of the flattened array, NaNs collapsed into one (NumPy's default
// equal_nan=True), and optionally how often each occurs (int64). The result size depends on the
// data, so this waits for the device.
struct UniqueResult {
  Array values;
  Array counts;  // undefined unless return_counts
};
UniqueResult unique(const Array& a, bool return_counts = false, const OptionalStream& stream = std::nullopt);

}  // namespace tessel
