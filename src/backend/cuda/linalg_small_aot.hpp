#pragma once
// The specializations of tessel's small-matrix kernels (device/linalg_small.cuh) compiled ahead of
// time by nvcc, for the build's GPU architectures: the orders and variants that the rows of
// tuning/linalg_routes.hpp (kSmallKernelRows) send to them, so that no call of the default routes
// compiles at run time. Each kernel kind is instantiated in its own linalg_small_aot_<kind>.cu
// (the build compiles them in parallel); any other specialization goes to NVRTC.
#include <cstdint>
#include <vector>

#include "backend/linalg_small.hpp"
#include "tessel/array/dtype.hpp"

namespace tessel::backend::cuda {

struct AotSmallKernel {
  SmallKernel kind;
  DType dtype;
  int m, n;
  bool variant;        // small_kernel_request's `variant`
  const void* entry;   // the __global__ function
};

// The entry of a specialization built ahead of time, or null.
const void* aot_small_kernel(SmallKernel kind, DType dtype, std::int64_t m, std::int64_t n, bool variant);
// Every specialization built ahead of time (for tests and the cold-call benchmark's report).
const std::vector<AotSmallKernel>& aot_small_kernels();

// The parts, one per linalg_small_aot_*.cu.
void add_aot_cholesky_lu(std::vector<AotSmallKernel>& out);
void add_aot_inv(std::vector<AotSmallKernel>& out);
void add_aot_eigh_svd(std::vector<AotSmallKernel>& out);
void add_aot_eigh_warp(std::vector<AotSmallKernel>& out);

template <class T>
constexpr DType aot_dtype() {
  return sizeof(T) == 4 ? DType::float32 : DType::float64;
}

}  // namespace tessel::backend::cuda
