#pragma once
// Backend entry points of the casting ops (src/ops/cast.cpp): dtype conversion between two
// strided operands, and arange/linspace, which compute in int64, float64 or complex128 and cast
// once to the destination's dtype. CPU: src/backend/cpu/cast.cpp; CUDA: src/backend/cuda/cast.cu.
#include "array/backend.hpp"
#include "backend/dispatch.hpp"
#include "tessel/array/scalar.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::backend {

using detail::StridedRef;

// cast: dst = src converted elementwise (NumPy's unsafe casting); same shape, src may have zero
// strides (on CUDA one generated elementwise kernel per dtype pair, through the jit launcher).
// arange: dst[i] = start + i * step over dst's single axis. linspace: NumPy's, over dst's single
// axis. The CPU runs synchronously and ignores `stream`; CUDA queues on it.
#define TESSEL_CAST_BACKEND(X)                                                                         \
  X(void, cast, (const StridedRef& dst, const StridedRef& src, const Stream& stream))                    \
  X(void, arange, (const StridedRef& dst, const Scalar& start, const Scalar& step, const Stream& stream)) \
  X(void, linspace,                                                                                     \
    (const StridedRef& dst, const Scalar& start, const Scalar& stop, bool endpoint, const Stream& stream))
TESSEL_BACKEND_FAMILY(TESSEL_CAST_BACKEND)

}  // namespace tessel::backend
