// Casting (astype, copyto) and the array functions that cast: concatenate and stack promote,
// arange and linspace compute wide and cast once.
#include <algorithm>
#include <cmath>
#include <string>

#include "array/backend.hpp"
#include "backend/cast.hpp"
#include "ops/checks.hpp"
#include "ops/op_stream.hpp"
#include "tessel/array/profile_args.hpp"
#include "tessel/core/error.hpp"
#include "tessel/ops/cast.hpp"

namespace tessel {

namespace {

// dst = src converted, both on one device, src already broadcast to dst's shape.
void cast_same_device(const Array& dst, const Array& src, const Stream& stream) {
  if (dst.device().is_cpu()) {
    src.wait();
    dst.wait();
  } else {
    src.storage()->wait_on_stream(stream);
    dst.storage()->wait_on_stream(stream);
  }
  backend::dispatch::cast(dst.device(), detail::strided_ref(dst), detail::strided_ref(src), stream);
  dst.storage()->record_pending_write(stream);  // nothing to record on the CPU
}

void check_defined(const Array& array, const char* op, const char* name) {
  if (!array.defined()) throw ValueError(std::string(op) + ": " + name + " is an undefined array");
}

void run_generator(const Array& dst, const Stream& stream, bool is_arange, const Scalar& a, const Scalar& b,
                   bool endpoint) {
  if (dst.size() == 0) return;
  if (is_arange) {
    backend::dispatch::arange(dst.device(), detail::strided_ref(dst), a, b, stream);
  } else {
    backend::dispatch::linspace(dst.device(), detail::strided_ref(dst), a, b, endpoint, stream);
  }
  dst.storage()->record_pending_write(stream);  // nothing to record on the CPU
}

// Checks what concatenate and stack share: a non-empty list of defined arrays on one device,
// and a dtype every input casts to. Returns the result dtype.
DType check_join_inputs(const std::vector<Array>& arrays, std::optional<DType> dtype, const char* op) {
  if (arrays.empty()) throw ValueError(std::string(op) + ": need at least one array to join");
  DType promoted = arrays[0].dtype();
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    if (!arrays[i].defined()) throw ValueError(std::string(op) + ": array " + std::to_string(i) + " is undefined");
    if (arrays[i].device() != arrays[0].device()) {
      throw DeviceError(std::string(op) + ": all arrays must be on one device, but array 0 is on " +
                        arrays[0].device().str() + " and array " + std::to_string(i) + " is on " +
                        arrays[i].device().str());
    }
    promoted = result_type(promoted, arrays[i].dtype());
  }
  if (!dtype) return promoted;
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    if (!can_cast_same_kind(arrays[i].dtype(), *dtype)) {
      throw DTypeError(std::string(op) + ": cannot cast array " + std::to_string(i) + " from dtype " +
                       dtype_name(arrays[i].dtype()) + " to dtype " + dtype_name(*dtype) +
                       " under the 'same_kind' rule");
    }
  }
  return *dtype;
}

Array join_along(const std::vector<Array>& arrays, std::int64_t axis, DType dtype, const OptionalStream& stream,
                 const char* op) {
  const Array& first = arrays[0];
  Shape shape = first.shape();
  const auto joined_axis = static_cast<std::size_t>(axis);
  shape[joined_axis] = 0;
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const Array& array = arrays[i];
    if (array.ndim() != first.ndim()) {
      throw ShapeError(std::string(op) + ": all the input arrays must have the same number of dimensions, but array 0 has shape " +
                       shape_str(first.shape()) + " and array " + std::to_string(i) + " has shape " +
                       shape_str(array.shape()));
    }
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (d != joined_axis && array.shape()[d] != first.shape()[d]) {
        throw ShapeError(std::string(op) + ": all the input array dimensions except for the concatenation axis must match "
                         "exactly, but along axis " + std::to_string(d) + ", array 0 has shape " +
                         shape_str(first.shape()) + " and array " + std::to_string(i) + " has shape " +
                         shape_str(array.shape()));
      }
    }
    shape[joined_axis] += array.shape()[joined_axis];
  }
  const Stream s = detail::op_stream(first.device(), stream, op);
  Array result = detail::allocate_array(shape, dtype, first.device(), s);
  std::int64_t position = 0;
  for (const Array& array : arrays) {
    const std::int64_t length = array.shape()[joined_axis];
    copyto(result.slice(axis, Slice(position, position + length)), array, s);
    position += length;
  }
  return result;
}


}  // namespace

void copyto(const Array& dst, const Array& src, const OptionalStream& stream) {
  TESSEL_RANGE("copyto", dst, src, stream);
  check_defined(dst, "copyto", "dst");
  check_defined(src, "copyto", "src");
  check_writable(dst, "copyto");
  if (dst.dtype() == src.dtype()) {
    detail::copy_into(dst, src, stream);
    return;
  }
  const Array broadcast_source = src.broadcast_to(dst.shape());
  if (dst.size() == 0) return;
  const Stream s = detail::op_stream(dst, stream, "copyto");
  // Across devices the (un-broadcast) source moves over first, in its own dtype.
  const Array local = src.device() == dst.device() ? broadcast_source : src.to(dst.device(), s).broadcast_to(dst.shape());
  cast_same_device(dst, local, s);
}

Array astype(const Array& x, DType dtype, const OptionalStream& stream) {
  TESSEL_RANGE("astype", x, dtype_name(dtype), stream);
  check_defined(x, "astype", "the array");
  const Stream s = detail::op_stream(x, stream, "astype");
  Array result = detail::allocate_array(x.shape(), dtype, x.device(), s);
  copyto(result, x, s);
  TESSEL_CHECK_RESULT(result);
  return result;
}

Array concatenate(const std::vector<Array>& arrays, std::int64_t axis, std::optional<DType> dtype,
                  const OptionalStream& stream) {
  TESSEL_RANGE("concatenate", arrays, stream);
  const DType result_dtype = check_join_inputs(arrays, dtype, "concatenate");
  if (arrays[0].ndim() == 0) throw ShapeError("concatenate: zero-dimensional arrays cannot be concatenated");
  return join_along(arrays, normalize_axis(axis, arrays[0].ndim(), "concatenate"), result_dtype, stream,
                    "concatenate");
}

Array stack(const std::vector<Array>& arrays, std::int64_t axis, std::optional<DType> dtype,
            const OptionalStream& stream) {
  TESSEL_RANGE("stack", arrays, stream);
  const DType result_dtype = check_join_inputs(arrays, dtype, "stack");
  for (std::size_t i = 1; i < arrays.size(); ++i) {
    if (arrays[i].shape() != arrays[0].shape()) {
      throw ShapeError("stack: all input arrays must have the same shape, but array 0 has shape " +
                       shape_str(arrays[0].shape()) + " and array " + std::to_string(i) + " has shape " +
                       shape_str(arrays[i].shape()));
    }
  }
  const std::int64_t new_axis = normalize_axis(axis, arrays[0].ndim() + 1, "stack");
  std::vector<Array> expanded;
  expanded.reserve(arrays.size());
  for (const Array& array : arrays) expanded.push_back(array.expand_dims(new_axis));
  return join_along(expanded, new_axis, result_dtype, stream, "stack");
}

Array arange(Scalar start, Scalar stop, Scalar step, std::optional<DType> dtype, Device device,
             const OptionalStream& stream) {
  TESSEL_RANGE("arange", stream);
  std::int64_t length = 0;
  const bool integral = start.scalar_kind() != ScalarKind::float_ && start.scalar_kind() != ScalarKind::complex_ &&
                        stop.scalar_kind() != ScalarKind::float_ && stop.scalar_kind() != ScalarKind::complex_ &&
                        step.scalar_kind() != ScalarKind::float_ && step.scalar_kind() != ScalarKind::complex_;
  if (start.kind() == Scalar::Kind::complex_ || stop.kind() == Scalar::Kind::complex_ ||
      step.kind() == Scalar::Kind::complex_) {
    throw ValueError("arange: complex bounds are not supported");
  }
  if (integral) {
    const std::int64_t first = start.to_int64(), last = stop.to_int64(), delta = step.to_int64();
    if (delta == 0) throw ValueError("arange: step must not be zero");
    // ceil((last - first) / delta) in exact integer arithmetic, 0 when the range is empty.
    const std::int64_t span = last - first;
    if (delta > 0 && span > 0) length = (span + delta - 1) / delta;
    if (delta < 0 && span < 0) length = (span + delta + 1) / delta;
  } else {
    const double delta = step.to_double();
    if (delta == 0) throw ValueError("arange: step must not be zero");
    const double count = std::ceil((stop.to_double() - start.to_double()) / delta);
    if (!std::isfinite(count)) throw ValueError("arange: the length is not finite");
    length = count > 0 ? static_cast<std::int64_t>(count) : 0;
  }
  const DType result_dtype = dtype.value_or(integral ? DType::int64 : DType::float64);
  const Stream s = detail::op_stream(device, stream, "arange");
  Array result = detail::allocate_array({length}, result_dtype, device, s);
  run_generator(result, s, true, start, step, false);
  return result;
}

Array arange(Scalar stop, std::optional<DType> dtype, Device device, const OptionalStream& stream) {
  return arange(0, stop, 1, dtype, device, stream);
}

Array linspace(Scalar start, Scalar stop, std::int64_t num, bool endpoint, DType dtype, Device device,
               const OptionalStream& stream) {
  TESSEL_RANGE("linspace", stream);
  if (num < 0) throw ValueError("linspace: number of samples, " + std::to_string(num) + ", must be non-negative");
  const Stream s = detail::op_stream(device, stream, "linspace");
  Array result = detail::allocate_array({num}, dtype, device, s);
  run_generator(result, s, false, start, stop, endpoint);
  return result;
}

}  // namespace tessel
