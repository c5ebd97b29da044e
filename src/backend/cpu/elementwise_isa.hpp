#pragma once
// The CPU elementwise kernels compiled for more than the baseline instruction set: the float32 and
// float64 ops of elementwise_ops.def that each call a library function (costly(): exp, log, the
// trigonometric and hyperbolic functions, pow, erf...), once for x86-64-v3 (AVX2, FMA) and once for
// x86-64-v4 (AVX-512), from elementwise_isa.cpp. Their loops call glibc's libmvec variants of the
// same width (_ZGVdN8v_expf, _ZGVeN16v_expf), two or four times the baseline's four lanes, which
// makes a loop of expf about twice as fast with 16 lanes as with 4 (cpu_numpy's exp rows).
// The memory-bound ops (add, compare, where...) stay on the baseline's loops, as fast there.
#include <cstdint>

#include "backend/elementwise.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/ops/elementwise.hpp"

namespace tessel::backend::cpu {

// The same signature as elementwise_kernel's (backend/elementwise.hpp).
using ChunkKernel = ElementwiseKernel;

namespace isa_avx2 {
ChunkKernel chunk_kernel(ElementwiseOp op, DType dtype);
}
namespace isa_avx512 {
ChunkKernel chunk_kernel(ElementwiseOp op, DType dtype);
}

// The kernel of (op, dtype) for the best instruction set this CPU runs, or nullptr: no such kernel
// (a cheap op, another dtype), or a CPU below x86-64-v3, or a build without them (not x86).
ChunkKernel isa_chunk_kernel(ElementwiseOp op, DType dtype);

}  // namespace tessel::backend::cpu
