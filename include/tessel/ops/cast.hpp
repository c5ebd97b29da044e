#pragma once
// Dtype conversion, and the array functions that convert: astype, copyto, concatenate and stack
// (which promote), arange and linspace (computed in int64, float64 or complex128, then cast).
// They sit in the ops layer because a cast on the GPU is a generated elementwise kernel, which
// the array layer below jit cannot launch. Casting follows NumPy's "unsafe" rule.
#include <cstdint>
#include <optional>
#include <vector>

#include "tessel/array/array.hpp"

namespace tessel {

// A new array holding x converted to `dtype` (always a copy).
Array astype(const Array& x, DType dtype, const OptionalStream& stream = std::nullopt);

// dst[...] = src: broadcasts src to dst's shape and casts. Works across devices. Asynchronous on
// stream.
void copyto(const Array& dst, const Array& src, const OptionalStream& stream = std::nullopt);

// Joins arrays along an existing axis (concatenate) or a new one (stack). The dtype is the
// promotion of all inputs. ShapeError / DTypeError / DeviceError name the op and the offender.
// With `dtype`, inputs are cast to it under NumPy's "same_kind" rule (DTypeError otherwise).
Array concatenate(const std::vector<Array>& arrays, std::int64_t axis = 0, std::optional<DType> dtype = std::nullopt,
                  const OptionalStream& stream = std::nullopt);
Array stack(const std::vector<Array>& arrays, std::int64_t axis = 0, std::optional<DType> dtype = std::nullopt,
            const OptionalStream& stream = std::nullopt);

// NumPy's length rule: ceil((stop - start) / step) elements. dtype defaults as NumPy: int64 for
// integer arguments, float64 otherwise.
Array arange(Scalar start, Scalar stop, Scalar step = 1, std::optional<DType> dtype = std::nullopt,
             Device device = default_device(), const OptionalStream& stream = std::nullopt);
Array arange(Scalar stop, std::optional<DType> dtype = std::nullopt, Device device = default_device(),
             const OptionalStream& stream = std::nullopt);
Array linspace(Scalar start, Scalar stop, std::int64_t num = 50, bool endpoint = true,
               DType dtype = DType::float64, Device device = default_device(),
               const OptionalStream& stream = std::nullopt);

}  // namespace tessel
