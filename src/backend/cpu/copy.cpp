// CPU backend for the array layer: strided N-d copy and fill, moving elements as raw bytes of
// their itemsize. The loop over collapsed dimensions is strided_loop.hpp's.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>

#include "array/backend.hpp"
#include "backend/cpu/strided_loop.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {

namespace {

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

void check_same_dtype(const StridedRef& dst, const StridedRef& src, const char* op) {
  if (dst.dtype != src.dtype) {
    throw DTypeError(std::string(op) + ": destination dtype " + dtype_name(dst.dtype) + " differs from source dtype " +
                     dtype_name(src.dtype) + " (casting is the ops layer's)");
  }
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
  check_same_dtype(dst, src, "copy");
  switch (itemsize(dst.dtype)) {
    case 1: return raw_copy<1>(dst, src, dims);
    case 2: return raw_copy<2>(dst, src, dims);
    case 4: return raw_copy<4>(dst, src, dims);
    case 8: return raw_copy<8>(dst, src, dims);
    case 16: return raw_copy<16>(dst, src, dims);
    default: throw DTypeError(std::string("copy: unsupported itemsize for dtype ") + dtype_name(dst.dtype));
  }
}

namespace {
template <std::size_t Bytes>
void fill_items(const StridedRef& dst, const void* value, const CollapsedDims& dims) {
  using T = Item<Bytes>;
  T pattern;
  std::memcpy(&pattern, value, Bytes);
  T* const base = static_cast<T*>(dst.data);
  const std::int64_t stride = dims.strides[0].back();
  for_each_run<1>(dims, copy_threads(dims), [&](const std::int64_t* offsets, std::int64_t count) {
    T* out = base + offsets[0];
    if (stride == 1) {
      for (std::int64_t i = 0; i < count; ++i) out[i] = pattern;
    } else {
      for (std::int64_t i = 0; i < count; ++i) out[i * stride] = pattern;
    }
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

}  // namespace tessel::backend::cpu
