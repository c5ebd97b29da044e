#pragma once
// Backend entry points of the casting ops (src/ops/cast.cpp): dtype conversion between two
// strided operands, and arange/linspace, which compute in int64, float64 or complex128 and cast
// once to the destination's dtype. CPU: src/backend/cpu/cast.cpp; CUDA: src/backend/cuda/cast.cu.
#include "array/backend.hpp"
#include "tessel/array/scalar.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::backend {

using detail::StridedRef;

namespace cpu {
// dst = src converted elementwise (NumPy's unsafe casting); same shape, src may have zero strides.
void cast(const StridedRef& dst, const StridedRef& src);
// dst[i] = start + i * step over dst's single axis.
void arange(const StridedRef& dst, const Scalar& start, const Scalar& step);
// NumPy's linspace over dst's single axis.
void linspace(const StridedRef& dst, const Scalar& start, const Scalar& stop, bool endpoint);
}  // namespace cpu

namespace cuda {
// The cast is one generated elementwise kernel per dtype pair, through the jit launcher.
void cast(const StridedRef& dst, const StridedRef& src, const Stream& stream);
void arange(const StridedRef& dst, const Scalar& start, const Scalar& step, const Stream& stream);
void linspace(const StridedRef& dst, const Scalar& start, const Scalar& stop, bool endpoint, const Stream& stream);
}  // namespace cuda

}  // namespace tessel::backend
