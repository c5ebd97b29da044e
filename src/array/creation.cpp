// Array creation: empty, full, zeros, ones, eye and the *_like functions. (arange and linspace,
// which cast, are in the ops layer: src/ops/cast.cpp.)
#include <algorithm>
#include <cmath>
#include <string>

#include "array/backend.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/error.hpp"

namespace tessel {


Array empty(const Shape& shape, DType dtype, Device device, const OptionalStream& stream) {
  return detail::allocate_array(shape, dtype, device, detail::resolve_stream(device, stream));
}

Array empty_pinned(const Shape& shape, DType dtype) {
  auto storage = std::make_shared<detail::Storage>(Buffer::allocate_pinned(numel(shape) * itemsize(dtype)));
  return Array(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

Array full(const Shape& shape, Scalar value, DType dtype, Device device, const OptionalStream& stream) {
  const Stream s = detail::resolve_stream(device, stream);
  Array result = detail::allocate_array(shape, dtype, device, s);
  fill(result, value, s);
  return result;
}

Array zeros(const Shape& shape, DType dtype, Device device, const OptionalStream& stream) {
  return full(shape, 0, dtype, device, stream);
}

Array ones(const Shape& shape, DType dtype, Device device, const OptionalStream& stream) {
  return full(shape, 1, dtype, device, stream);
}

Array eye(std::int64_t n, std::optional<std::int64_t> m, std::int64_t k, DType dtype, Device device,
          const OptionalStream& stream) {
  const std::int64_t columns = m.value_or(n);
  if (n < 0 || columns < 0) {
    throw ShapeError("eye: negative dimensions are not allowed, got (" + std::to_string(n) + ", " +
                     std::to_string(columns) + ")");
  }
  const Stream s = detail::resolve_stream(device, stream);
  Array result = zeros({n, columns}, dtype, device, s);
  // The diagonal is a strided view: step one row and one column at a time.
  const std::int64_t first_row = k < 0 ? -k : 0;
  const std::int64_t first_column = k > 0 ? k : 0;
  const std::int64_t length = std::max<std::int64_t>(0, std::min(n - first_row, columns - first_column));
  if (length > 0) {
    fill(result.as_strided({length}, {columns + 1}, first_row * columns + first_column), 1, s);
  }
  return result;
}

Array empty_like(const Array& other, std::optional<DType> dtype, std::optional<Device> device,
                 const OptionalStream& stream) {
  return empty(other.shape(), dtype.value_or(other.dtype()), device.value_or(other.device()), stream);
}
Array zeros_like(const Array& other, std::optional<DType> dtype, std::optional<Device> device,
                 const OptionalStream& stream) {
  return zeros(other.shape(), dtype.value_or(other.dtype()), device.value_or(other.device()), stream);
}
Array ones_like(const Array& other, std::optional<DType> dtype, std::optional<Device> device,
                const OptionalStream& stream) {
  return ones(other.shape(), dtype.value_or(other.dtype()), device.value_or(other.device()), stream);
}
Array full_like(const Array& other, Scalar value, std::optional<DType> dtype, std::optional<Device> device,
                const OptionalStream& stream) {
  return full(other.shape(), value, dtype.value_or(other.dtype()), device.value_or(other.device()), stream);
}

}  // namespace tessel
