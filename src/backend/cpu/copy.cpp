// CPU backend for the array layer: strided N-d copy with casting between any dtype pair, fill,
// arange and linspace. One generic loop over collapsed dimensions, parallel with OpenMP; the
// dtypes are dispatched once, outside the loop.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>

#include "array/backend.hpp"
#include "array/cast.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/error.hpp"

namespace tessel::detail::cpu_backend {

namespace {

// Elements per unit of parallel work: large enough to amortize the scheduling, small enough to
// split a single long row across threads.
constexpr std::int64_t block_elements = 16384;
// Below this many elements the work runs on the calling thread.
constexpr std::int64_t parallel_threshold = 1 << 16;

// Calls body(unit_offsets..., count) over the collapsed layout: for each run of `count`
// elements along the innermost axis, the element offsets of every operand at the run's start.
// Runs are independent, so they are spread over OpenMP threads.
template <std::size_t N, class Body>
void for_each_inner_run(const CollapsedDims& dims, Body&& body) {
  const std::int64_t ndim = dims.ndim();
  const std::int64_t inner = dims.shape.back();
  if (inner == 0) return;
  std::int64_t rows = 1;
  for (std::int64_t axis = 0; axis + 1 < ndim; ++axis) rows *= dims.shape[static_cast<std::size_t>(axis)];
  const std::int64_t blocks_per_row = (inner + block_elements - 1) / block_elements;
  const std::int64_t units = rows * blocks_per_row;
  const bool parallel = rows * inner >= parallel_threshold;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t unit = 0; unit < units; ++unit) {
    const std::int64_t row = unit / blocks_per_row;
    const std::int64_t first = (unit % blocks_per_row) * block_elements;
    const std::int64_t count = std::min(block_elements, inner - first);
    std::int64_t offsets[N];
    for (std::size_t op = 0; op < N; ++op) offsets[op] = first * dims.strides[op].back();
    // Decompose the row index over the outer axes, innermost outer axis first.
    std::int64_t rest = row;
    for (std::int64_t axis = ndim - 2; axis >= 0; --axis) {
      const std::int64_t extent = dims.shape[static_cast<std::size_t>(axis)];
      const std::int64_t coordinate = rest % extent;
      rest /= extent;
      for (std::size_t op = 0; op < N; ++op) offsets[op] += coordinate * dims.strides[op][static_cast<std::size_t>(axis)];
    }
    body(offsets, count);
  }
}

template <class Dst, class Src>
void cast_copy(const StridedRef& dst, const StridedRef& src, const CollapsedDims& dims) {
  Dst* const dst_base = static_cast<Dst*>(dst.data);
  const Src* const src_base = static_cast<const Src*>(src.data);
  const std::int64_t dst_stride = dims.strides[0].back();
  const std::int64_t src_stride = dims.strides[1].back();
  for_each_inner_run<2>(dims, [&](const std::int64_t* offsets, std::int64_t count) {
    Dst* out = dst_base + offsets[0];
    const Src* in = src_base + offsets[1];
    if (dst_stride == 1 && src_stride == 1) {
      for (std::int64_t i = 0; i < count; ++i) out[i] = cast_value<Dst>(in[i]);  // vectorizable
    } else {
      for (std::int64_t i = 0; i < count; ++i) out[i * dst_stride] = cast_value<Dst>(in[i * src_stride]);
    }
  });
}

// Same-size elements moved as raw bytes: one instantiation per itemsize serves all dtypes.
template <std::size_t Bytes>
struct Item {
  unsigned char bytes[Bytes];
};

template <std::size_t Bytes>
void raw_copy(const StridedRef& dst, const StridedRef& src, const CollapsedDims& dims) {
  using T = Item<Bytes>;
  cast_copy<T, T>(dst, src, dims);
}

void check_same_shape(const StridedRef& dst, const StridedRef& src, const char* op) {
  if (dst.shape != src.shape) {
    throw ShapeError(std::string(op) + ": destination shape " + shape_str(dst.shape) + " differs from source shape " +
                     shape_str(src.shape));
  }
}

}  // namespace

void copy(const StridedRef& dst, const StridedRef& src, const Stream& /*stream*/) {
  check_same_shape(dst, src, "copy");
  const CollapsedDims dims = collapse_dims(dst.shape, {dst.strides, src.strides});
  if (dims.shape.back() == 0) return;
  if (dst.dtype == src.dtype) {
    switch (itemsize(dst.dtype)) {
      case 1: return raw_copy<1>(dst, src, dims);
      case 2: return raw_copy<2>(dst, src, dims);
      case 4: return raw_copy<4>(dst, src, dims);
      case 8: return raw_copy<8>(dst, src, dims);
      case 16: return raw_copy<16>(dst, src, dims);
      default: break;
    }
  }
  dispatch_dtype(dst.dtype, [&](auto dst_tag) {
    dispatch_dtype(src.dtype, [&](auto src_tag) {
      cast_copy<typename decltype(dst_tag)::type, typename decltype(src_tag)::type>(dst, src, dims);
    });
  });
}

namespace {
template <std::size_t Bytes>
void fill_items(const StridedRef& dst, const void* value, const CollapsedDims& dims) {
  using T = Item<Bytes>;
  T pattern;
  std::memcpy(&pattern, value, Bytes);
  T* const base = static_cast<T*>(dst.data);
  const std::int64_t stride = dims.strides[0].back();
  for_each_inner_run<1>(dims, [&](const std::int64_t* offsets, std::int64_t count) {
    T* out = base + offsets[0];
    for (std::int64_t i = 0; i < count; ++i) out[i * stride] = pattern;
  });
}
}  // namespace

void fill(const StridedRef& dst, const void* value, const Stream& /*stream*/) {
  const CollapsedDims dims = collapse_dims(dst.shape, {dst.strides});
  if (dims.shape.back() == 0) return;
  switch (itemsize(dst.dtype)) {
    case 1: return fill_items<1>(dst, value, dims);
    case 2: return fill_items<2>(dst, value, dims);
    case 4: return fill_items<4>(dst, value, dims);
    case 8: return fill_items<8>(dst, value, dims);
    case 16: return fill_items<16>(dst, value, dims);
    default: throw DTypeError(std::string("fill: unsupported itemsize for dtype ") + dtype_name(dst.dtype));
  }
}

namespace {
void check_one_axis(const StridedRef& dst, const char* op) {
  if (dst.shape.size() != 1) {
    throw ShapeError(std::string(op) + ": expects a 1-d destination, got shape " + shape_str(dst.shape));
  }
}

// dst[i] = value(i) over a 1-d destination, computed in Compute and cast once to the dtype.
template <class Compute, class ValueAt>
void generate(const StridedRef& dst, ValueAt value_at) {
  const std::int64_t n = dst.shape[0];
  const std::int64_t stride = dst.strides[0];
  dispatch_dtype(dst.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = static_cast<T*>(dst.data);
#pragma omp parallel for schedule(static) if (n >= parallel_threshold)
    for (std::int64_t i = 0; i < n; ++i) out[i * stride] = cast_value<T>(static_cast<Compute>(value_at(i)));
  });
}
}  // namespace

void arange(const StridedRef& dst, const Scalar& start, const Scalar& step, const Stream& /*stream*/) {
  check_one_axis(dst, "arange");
  if (is_integer(dst.dtype) || is_bool(dst.dtype)) {
    // Exact integer arithmetic (wrapping like NumPy's int64 fill) when both bounds are integers.
    // As NumPy: the first two values are cast to the dtype and their difference is the step,
    // so arange(0.5, 3, 0.5, int64) counts 0, 1, 2, ...
    const bool exact = start.scalar_kind() == ScalarKind::int_ && step.scalar_kind() == ScalarKind::int_;
    const std::int64_t first = start.to_int64();
    const std::int64_t delta =
        exact ? step.to_int64() : cast_value<std::int64_t>(start.to_double() + step.to_double()) - first;
    generate<std::int64_t>(dst, [&](std::int64_t i) {
      return static_cast<std::int64_t>(static_cast<std::uint64_t>(first) +
                                       static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(delta));
    });
  } else if (is_complex(dst.dtype)) {
    const std::complex<double> first = start.to_complex();
    const std::complex<double> delta = step.to_complex();
    generate<std::complex<double>>(dst, [&](std::int64_t i) { return first + static_cast<double>(i) * delta; });
  } else {
    const double first = start.to_double();
    const double delta = step.to_double();
    generate<double>(dst, [&](std::int64_t i) { return first + static_cast<double>(i) * delta; });
  }
}

void linspace(const StridedRef& dst, const Scalar& start, const Scalar& stop, bool endpoint, const Stream& /*stream*/) {
  check_one_axis(dst, "linspace");
  const std::int64_t num = dst.shape[0];
  const std::int64_t divisions = endpoint ? num - 1 : num;
  // As NumPy: step = (stop - start) / div, y = start + i * step, and the last element is stop
  // exactly when endpoint is set.
  if (is_complex(dst.dtype)) {
    const std::complex<double> first = start.to_complex();
    const std::complex<double> last = stop.to_complex();
    const std::complex<double> step = divisions > 0 ? (last - first) / static_cast<double>(divisions) : 0.0;
    generate<std::complex<double>>(dst, [&](std::int64_t i) {
      return (endpoint && i == num - 1 && num > 1) ? last : first + static_cast<double>(i) * step;
    });
  } else {
    const double first = start.to_double();
    const double last = stop.to_double();
    const double span = last - first;
    const double step = divisions > 0 ? span / static_cast<double>(divisions) : 0.0;
    auto linspace_value = [&](std::int64_t i) {
      if (endpoint && i == num - 1 && num > 1) return last;
      // NumPy multiplies by the step unless it underflowed to zero, then scales the span.
      return (step != 0.0 || divisions == 0) ? first + static_cast<double>(i) * step
                         : first + static_cast<double>(i) * span / static_cast<double>(divisions);
    };
    // NumPy 2 floors the values for an integer dtype before the cast.
    const bool floor_values = is_integer(dst.dtype);
    generate<double>(dst, [&](std::int64_t i) {
      const double value = linspace_value(i);
      return floor_values ? std::floor(value) : value;
    });
  }
}

}  // namespace tessel::detail::cpu_backend
