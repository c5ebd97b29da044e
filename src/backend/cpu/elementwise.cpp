// CPU elementwise loops. Each (op, dtype) has one kernel, a loop over n elements with strides
// (elementwise_kernel: a plain inlined functor over pointers that the compiler vectorizes; the
// element functions are elementwise_values.hpp's, the op list elementwise_ops.def). The dtype and
// op are dispatched once per call, at this type-erased boundary. float16/bfloat16 are computed in
// float32 and rounded once at the store. elementwise() cuts the collapsed iteration into one
// contiguous share per thread (at most num_threads(), fewer for small arrays: threads.hpp) and
// calls the kernel per run; the fused evaluator (ops/fuse.cpp) calls the same kernels on its
// chunks, so fused and op-by-op results agree bit for bit.
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cpu/elementwise_isa.hpp"
#include "backend/cpu/elementwise_values.hpp"
#include "backend/cpu/strided_loop.hpp"
#include "backend/cpu/threads.hpp"
#include "backend/elementwise.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/array/shape.hpp"

namespace tessel::backend::cpu {
namespace {

[[noreturn]] void unsupported(ElementwiseOp op, DType dtype) {
  // The ops layer checks the dtype table first; reaching this is a bug in the table.
  throw DTypeError(std::string("elementwise (cpu): ") + op_name(op) + " has no loop for " + dtype_name(dtype));
}

template <class S>
ElementwiseKernel find_kernel(ElementwiseOp op) {
  using C = compute_t<S>;
  using R = typename RealOf<S>::type;
  // float32/float64 costly ops: the kernel compiled for the best instruction set this CPU has.
  if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>) {
    if (const ElementwiseKernel k = isa_chunk_kernel(op, dtype_of<S>)) return k;
  }
// Each case compiles for exactly the kinds of the op's row in the op list; the ops layer has
// already rejected the others, so falling through is an internal error. A captureless lambda per
// op: a plain function pointer.
#define TESSEL_UNARY(NAME, OUT, EXPR)                                                                    \
  case ElementwiseOp::NAME:                                                                              \
    if constexpr (accepts<C>(ElementwiseOp::NAME)) {                                                     \
      return [](void* o, std::int64_t so, const void* const* in, const std::int64_t* si, std::int64_t n) { \
        run_kernel<1, OUT, S, bool, bool, is_complex_v<C> || costly(ElementwiseOp::NAME)>(               \
            o, so, in, si, n, [](C x) { return EXPR; });                                                 \
      };                                                                                                 \
    }                                                                                                    \
    break;
#define TESSEL_BINARY(NAME, OUT, EXPR)                                                                   \
  case ElementwiseOp::NAME:                                                                              \
    if constexpr (accepts<C>(ElementwiseOp::NAME)) {                                                     \
      return [](void* o, std::int64_t so, const void* const* in, const std::int64_t* si, std::int64_t n) { \
        run_kernel<2, OUT, S, S, bool, is_complex_v<C> || costly(ElementwiseOp::NAME)>(                  \
            o, so, in, si, n, [](C x, C y) { return EXPR; });                                            \
      };                                                                                                 \
    }                                                                                                    \
    break;
  switch (op) {
#include "backend/cpu/elementwise_ops.def"
    case ElementwiseOp::where:
      return [](void* o, std::int64_t so, const void* const* in, const std::int64_t* si, std::int64_t n) {
        run_kernel<3, S, bool, S, S, false>(o, so, in, si, n, [](bool c, C x, C y) { return c ? x : y; });
      };
    default:
      break;
  }
#undef TESSEL_UNARY
#undef TESSEL_BINARY
  unsupported(op, dtype_of<S>);
}

}  // namespace

ChunkKernel isa_chunk_kernel(ElementwiseOp op, DType dtype) {
#if defined(TESSEL_HAVE_ISA_KERNELS)
  // Once: the best level this CPU (and its OS: libgcc checks XCR0) runs.
  static const int level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) return 4;
    if (__builtin_cpu_supports("x86-64-v3")) return 3;
    return 0;
  }();
  if (level >= 4) return isa_avx512::chunk_kernel(op, dtype);
  if (level >= 3) return isa_avx2::chunk_kernel(op, dtype);
#else
  (void)op, (void)dtype;
#endif
  return nullptr;
}

ElementwiseKernel elementwise_kernel(ElementwiseOp op, DType dtype) {
  ElementwiseKernel kernel = nullptr;
  dispatch_dtype(dtype, [&](auto tag) { kernel = find_kernel<typename decltype(tag)::type>(op); });
  return kernel;
}

std::int64_t elementwise_grain(ElementwiseOp op, DType dtype) {
  return is_complex(dtype) || costly(op) ? kMinCostlyElementsPerThread : kMinElementsPerThread;
}

void elementwise(ElementwiseOp op, int count, const Array* const* inputs, const Scalar* const*, const DType*,
                 const Array& out, const Stream&) {
  // Every input is an array here (the ops layer stages scalars as 0-d arrays for the CPU).
  // where: dispatch on the value dtype (input 0 is the bool condition).
  const DType dtype = op == ElementwiseOp::where ? inputs[1]->dtype() : inputs[0]->dtype();
  const ElementwiseKernel kernel = elementwise_kernel(op, dtype);
  const std::size_t n = static_cast<std::size_t>(count);
  std::vector<Strides> strides{out.strides()};
  for (std::size_t k = 0; k < n; ++k) strides.push_back(inputs[k]->strides());
  const CollapsedDims dims = collapse_dims(out.shape(), strides);
  std::int64_t total = 1;
  for (const std::int64_t extent : dims.shape) total *= extent;
  if (total <= 0) return;
  const int threads = loop_threads(total, elementwise_grain(op, dtype));
  // Byte addresses of each operand's element offset.
  char* const out_base = static_cast<char*>(out.data());
  const std::int64_t out_size = itemsize(out.dtype());
  const char* in_base[3] = {};
  std::int64_t in_size[3] = {};
  std::int64_t si[3] = {};
  for (std::size_t k = 0; k < n; ++k) {
    in_base[k] = static_cast<const char*>(inputs[k]->data());
    in_size[k] = itemsize(inputs[k]->dtype());
    si[k] = dims.strides[k + 1].back();
  }
  const std::int64_t so = dims.strides[0].back();
  auto body = [&](const std::int64_t* off, std::int64_t run) {
    const void* in[3];
    for (std::size_t k = 0; k < n; ++k) in[k] = in_base[k] + off[k + 1] * in_size[k];
    kernel(out_base + off[0] * out_size, so, in, si, run);
  };
  switch (n) {
    case 1: return for_each_run<2>(dims, threads, body);
    case 2: return for_each_run<3>(dims, threads, body);
    default: return for_each_run<4>(dims, threads, body);
  }
}

}  // namespace tessel::backend::cpu
