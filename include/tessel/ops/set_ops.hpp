#pragma once
// The Array API set functions (unique_all and its parts, isin) and repeat with per-element
// counts: the ops whose work is a sort (radix sort on CUDA) followed by a scan, and whose output
// size may depend on the data. Where it does, the size is read back to the host once (one
// synchronization), after which the outputs are written on the device.
#include <cstdint>
#include <optional>

#include "tessel/array/array.hpp"

namespace tessel {

// The parts of unique_all to compute (values always).
struct UniqueParts {
  bool indices = false;  // first occurrence of each value in the flattened input
  bool inverse = false;  // index into values of every input element (shape of the input)
  bool counts = false;   // occurrences of each value
};

// Unique values of the flattened `x`, ascending, as the Array API specifies: NaNs are distinct
// (each NaN is its own value with a count of one), -0.0 and +0.0 are one value. Index arrays are
// int64. Complex dtypes: DTypeError. Undefined members for parts not asked for.
struct UniqueAllResult {
  Array values;
  Array indices;
  Array inverse_indices;
  Array counts;
};
UniqueAllResult unique_all(const Array& x, UniqueParts parts = {true, true, true},
                           const OptionalStream& stream = std::nullopt);

// Whether each element of `x1` equals some element of `x2` (bool, shape of x1), or does not when
// `invert`. Both are compared in their promoted dtype; NaN is in nothing. Sort-based: x2 is
// sorted, then every x1 element is binary-searched.
Array isin(const Array& x1, const Array& x2, bool invert = false, const OptionalStream& stream = std::nullopt);

// Each element of `x` repeated repeats[i] times along `axis` (the flattened x when nullopt).
// `repeats` is an integer array of shape (1,) or (x.shape[axis],) (x.size without an axis),
// non-negative (ValueError naming the first negative count otherwise).
Array repeat(const Array& x, const Array& repeats, std::optional<std::int64_t> axis = std::nullopt,
             const OptionalStream& stream = std::nullopt);
// The same with one count for every element: a broadcast copy, no synchronization.
Array repeat(const Array& x, std::int64_t repeats, std::optional<std::int64_t> axis = std::nullopt,
             const OptionalStream& stream = std::nullopt);

}  // namespace tessel
