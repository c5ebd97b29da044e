#pragma once
// Elementwise kernels on the CPU backend (internal): the same ElementwiseSpec as host C++, which
// ElementwiseLauncher compiles with the host compiler (tessel/jit/host_compiler.hpp) and calls
// with the parameters it packs for the CUDA kernel.
#include <cstdint>
#include <string>

#include "tessel/jit/elementwise.hpp"

namespace tessel::jit::detail {

// Launches of at least this many elements run on OpenMP threads.
constexpr std::int64_t kHostParallelThreshold = 32768;
// The compile option of every host elementwise kernel: GCC contracts a * b + c into an FMA even in
// ISO C++ mode, which would make results depend on the CPU (-march=native) and differ from
// NumPy's; CUDA contracts (NVRTC's default), so on the GPU they may differ in the last bit.
constexpr const char* kHostContractFlag = "-ffp-contract=off";

// The exported entry of a spec's host kernel: elementwise_kernel_name() of the host variant
// (64-bit index, no unroll) + "_host".
std::string elementwise_host_symbol(const ElementwiseSpec& spec);

// The host C++ source of a spec's layout and rank (index32, unroll and streaming do not apply on
// the host): the prelude (src/jit/host_prelude.hpp) pasted in, then the preamble, then
//   extern "C" int <symbol>(TsHostLaunch*, void** params)
// over the parameters as ElementwiseLauncher packs them: n, the alignment flag (contiguous) or
// the collapsed dims (strided), then per operand its value (scalars), or its pointer and, strided,
// its strides. The body is host C++: the prelude's names, not tessel_device.cuh's. Validates the
// spec (ValueError).
std::string generate_elementwise_host_source(const ElementwiseSpec& spec);

// The prelude text, as pasted.
const std::string& host_prelude();

}  // namespace tessel::jit::detail
