#pragma once
// Reductions and scans with NumPy semantics, on the CPU and CUDA backends. Each has a row in
// reduce_list.hpp (its Python name, parameters and docstring), from which it is defined and bound.
//
// Axes: std::nullopt reduces over all axes; otherwise a list of axes (negative counts from the
// end, no duplicates). keepdims keeps the reduced axes with size one.
// Result dtypes follow NumPy: sum/prod/cumsum/cumprod of bool and signed ints -> int64, of
// unsigned ints -> uint64, floats keep their dtype (float16/bfloat16 accumulate in float32);
// mean/var/std of integers and bool -> float64; min/max keep the dtype; argmin/argmax -> int64;
// any/all -> bool. Complex inputs: sum, prod, mean, any, all and cumsum; the others raise
// DTypeError naming the op and dtype.
// NaN: sum/prod/min/max/mean/var/argmin/argmax propagate it (arg* return the first NaN); the
// nan-variants skip it; an all-NaN slice gives NaN (nanmin, nanmax, nanmean, nanvar), 0 / 1
// (nansum, nanprod), and ValueError for nanargmin/nanargmax, as NumPy (one host read).
// Empty reductions: sum -> 0, prod -> 1, any -> false, all -> true, mean/var/std -> NaN;
// min/max/argmin/argmax raise ValueError.
#include <cstdint>
#include <optional>
#include <vector>

#include "tessel/array/array.hpp"
#include "tessel/ops/reduce_list.hpp"

namespace tessel {

using Axes = std::optional<std::vector<std::int64_t>>;

Array sum(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array prod(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array mean(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array min(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array max(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array any(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array all(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array nansum(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array nanprod(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array nanmean(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array nanmin(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
Array nanmax(const Array& a, const Axes& axes = std::nullopt, bool keepdims = false, const OptionalStream& stream = std::nullopt);
// Divides by (count - ddof), ddof a real number (the Array API's correction); NaN where that is
// <= 0, as NumPy.
Array var(const Array& a, const Axes& axes = std::nullopt, double ddof = 0, bool keepdims = false,
          const OptionalStream& stream = std::nullopt);
Array std(const Array& a, const Axes& axes = std::nullopt, double ddof = 0, bool keepdims = false,
          const OptionalStream& stream = std::nullopt);
Array nanvar(const Array& a, const Axes& axes = std::nullopt, double ddof = 0, bool keepdims = false,
             const OptionalStream& stream = std::nullopt);
Array nanstd(const Array& a, const Axes& axes = std::nullopt, double ddof = 0, bool keepdims = false,
             const OptionalStream& stream = std::nullopt);

// Index of the first minimum/maximum along one axis, or into the flattened array (axis nullopt).
Array argmin(const Array& a, std::optional<std::int64_t> axis = std::nullopt, bool keepdims = false,
             const OptionalStream& stream = std::nullopt);
Array argmax(const Array& a, std::optional<std::int64_t> axis = std::nullopt, bool keepdims = false,
             const OptionalStream& stream = std::nullopt);
Array nanargmin(const Array& a, std::optional<std::int64_t> axis = std::nullopt, bool keepdims = false,
                const OptionalStream& stream = std::nullopt);
Array nanargmax(const Array& a, std::optional<std::int64_t> axis = std::nullopt, bool keepdims = false,
                const OptionalStream& stream = std::nullopt);

// Inclusive scans along one axis, or over the flattened array (axis nullopt), as NumPy.
Array cumsum(const Array& a, std::optional<std::int64_t> axis = std::nullopt, const OptionalStream& stream = std::nullopt);
Array cumprod(const Array& a, std::optional<std::int64_t> axis = std::nullopt, const OptionalStream& stream = std::nullopt);

}  // namespace tessel
