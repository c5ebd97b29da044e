// The costly float32/float64 elementwise ops for one instruction set above the baseline
// (elementwise_isa.hpp). CMake compiles this file twice, with TESSEL_ISA=isa_avx2 and
// -march=x86-64-v3, and with TESSEL_ISA=isa_avx512 and -march=x86-64-v4; the ops and element
// functions are elementwise.cpp's own (elementwise_ops.def, elementwise_values.hpp, both with
// internal linkage here), so the results are the same functions of the same inputs, computed by
// libmvec's variants of the wider vectors.
#include "backend/cpu/elementwise_isa.hpp"
#include "backend/cpu/elementwise_values.hpp"

#ifndef TESSEL_ISA
#error "elementwise_isa.cpp is compiled with TESSEL_ISA=<namespace> (src/CMakeLists.txt)"
#endif

namespace tessel::backend::cpu::TESSEL_ISA {
namespace {

template <class S>
ChunkKernel find(ElementwiseOp op) {
  using C = compute_t<S>;
  using R = typename RealOf<S>::type;
  if (!costly(op)) return nullptr;
  // One kernel per op: a captureless lambda, so a plain function pointer.
#define TESSEL_UNARY(NAME, OUT, EXPR)                                                                    \
  case ElementwiseOp::NAME:                                                                              \
    if constexpr (costly(ElementwiseOp::NAME) && accepts<C>(ElementwiseOp::NAME)) {                       \
      return [](void* o, std::int64_t so, const void* const* in, const std::int64_t* si, std::int64_t n) { \
        run_kernel<1, OUT, S, bool, bool, true>(o, so, in, si, n, [](C x) { return EXPR; });             \
      };                                                                                                 \
    }                                                                                                    \
    return nullptr;
#define TESSEL_BINARY(NAME, OUT, EXPR)                                                                   \
  case ElementwiseOp::NAME:                                                                              \
    if constexpr (costly(ElementwiseOp::NAME) && accepts<C>(ElementwiseOp::NAME)) {                       \
      return [](void* o, std::int64_t so, const void* const* in, const std::int64_t* si, std::int64_t n) { \
        run_kernel<2, OUT, S, S, bool, true>(o, so, in, si, n, [](C x, C y) { return EXPR; });          \
      };                                                                                                 \
    }                                                                                                    \
    return nullptr;
  switch (op) {
#include "backend/cpu/elementwise_ops.def"
    default:
      return nullptr;
  }
#undef TESSEL_UNARY
#undef TESSEL_BINARY
}

}  // namespace

ChunkKernel chunk_kernel(ElementwiseOp op, DType dtype) {
  switch (dtype) {
    case DType::float32: return find<float>(op);
    case DType::float64: return find<double>(op);
    default: return nullptr;
  }
}

}  // namespace tessel::backend::cpu::TESSEL_ISA
