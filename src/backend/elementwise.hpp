#pragma once
// Backend entry point of the elementwise ops (src/backend/{cpu,cuda}/elementwise.cpp).
// The ops layer has already validated and promoted everything: every input has the compute
// dtype of the op (where: input 0 is bool) and the output's shape, as a (possibly broadcast,
// strided, negative-stride) view; `out` has the result dtype, and does not overlap any input
// unless it is the identical view. The backend only loops.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/dispatch.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/ops/elementwise.hpp"

namespace tessel::backend {

// `count` inputs (at most 3), each of in_dtypes[i] and out's shape. scalars[i] set: input i is a
// weak scalar (inputs[i] null) passed by value, converted to in_dtypes[i]; this keeps `a * 2` on
// CUDA's contiguous vectorized path. The CPU loops take every input as an array (the ops layer
// stages a scalar as a 0-d array for them) and run synchronously, ignoring `stream`. Plain arrays,
// not vectors: this is the per-call hot path of every tiny op, and it allocates nothing on a
// CUDA kernel-cache hit.
#define TESSEL_ELEMENTWISE_BACKEND(X)                                                              \
  X(void, elementwise, (ElementwiseOp op, int count, const Array* const* inputs, const Scalar* const* scalars, \
                        const DType* in_dtypes, const Array& out, const Stream& stream))
TESSEL_BACKEND_FAMILY(TESSEL_ELEMENTWISE_BACKEND)

// What only CUDA has, for fusion (ops/fuse.cpp): the expression of `op` over argument expressions
// already in the op's compute dtype (where: bool, then two values), `result` the op's result
// dtype; and the device helpers every op expression may call (a spec built from op_expression
// needs them).
#define TESSEL_ELEMENTWISE_CUDA_ONLY(X)                                                         \
  X(jit::Expr, op_expression, (ElementwiseOp op, const std::vector<jit::Expr>& args, DType result)) \
  X(const char*, elementwise_preamble, ())
TESSEL_BACKEND_CUDA_ONLY(TESSEL_ELEMENTWISE_CUDA_ONLY)

namespace cpu {
// The loop of one op over n elements, type-erased: out[i * so] = op(in[0][i * si[0]], ...), strides
// in elements (0: an input broadcast along the run). `dtype` is the op's compute dtype (where: the
// value dtype; its condition is bool); the output has the op's result dtype. elementwise() runs it
// over each run of the collapsed layout, the fused evaluator over its chunks. DTypeError for a
// dtype the op has no loop for.
using ElementwiseKernel = void (*)(void* out, std::int64_t so, const void* const* in, const std::int64_t* si,
                                   std::int64_t n);
ElementwiseKernel elementwise_kernel(ElementwiseOp op, DType dtype);
// Elements per thread below which another thread does not pay for op on dtype (threads.hpp).
std::int64_t elementwise_grain(ElementwiseOp op, DType dtype);
// out[i * so] = in[i * si] converted from `from` to `to` (NumPy's unsafe casting, as astype).
using CastKernel = void (*)(void* out, std::int64_t so, const void* in, std::int64_t si, std::int64_t n);
CastKernel cast_kernel(DType to, DType from);
}
namespace cuda {
// The CUDA source of one op for a compute dtype and result dtype (for tests: NVRTC compiles it
// without a GPU). Layout contiguous, `unroll` vectors per thread per trip.
std::string elementwise_source(ElementwiseOp op, const std::vector<DType>& input_dtypes, DType out_dtype,
                               unsigned scalar_mask = 0,  // bit k: input k is a by-value scalar
                               int unroll = 1);
}  // namespace cuda
}  // namespace tessel::backend
