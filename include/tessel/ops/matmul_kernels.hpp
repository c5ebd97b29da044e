#pragma once
// INTERNAL, not part of tessel's API (tessel.hpp does not include it; names and signatures follow
// the kernels). tessel's own GEMM kernels one at a time, for the benchmarks (bench/, `tessel
// bench`) and the kernel tests. Applications call tessel::matmul or MatmulPlan, which choose among
// these kernels. Everything launches asynchronously on the given stream; without a CUDA build it
// raises DeviceError (sm90::num_configs is 0).
#include <cstdint>
#include <string>

#include "tessel/array/array.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::internal {

// ---- the SGEMM ladder: D = A @ B, float32, row-major contiguous A (m x k), B (k x n), D (m x n) ----
// One thread per output, consecutive threads of a warp along a row of D (coalesced loads of B).
void naive_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k,
                 const Stream& stream);
// The same along a column of D: each load of B is 32 scattered words (the ladder's first rung).
void naive_uncoalesced_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n,
                             std::int64_t k, const Stream& stream);
// 16x16 shared-memory tiles, without register blocking.
void tiled_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k,
                 const Stream& stream);

// ---- tessel's SIMT SGEMM kernel template compiled at run time (tile experiments) ----
// The template is src/backend/cuda/matmul_simt_kernel.cuh; jit::RawKernel compiles it for a tile
// given simt_sgemm_name(tile), so configurations are tried without growing the AOT build.
struct SimtTile {
  int bm, bn, bk;  // block tile of D and the K slice
  int tm, tn;      // per-thread tile
  int warp_x;      // 0: row-major thread order; else a (32 / warp_x) x warp_x warp patch
  int threads() const { return (bm / tm) * (bn / tn); }
};
enum class SimtEpilogue { none = 0, relu = 1, gelu = 2, gelu_tanh = 3 };
// "tessel_simt::simt_gemm_kernel<bm, bn, bk, tm, tn, warp_x>": the name expression to compile.
std::string simt_sgemm_name(const SimtTile& tile);
// d = epilogue(a @ b + bias) with `kernel` compiled from the template for `tile`: float32 2-D
// row-major arrays a (m x k), b (k x n), d (m x n) and bias (n, or undefined). ValueError naming
// the shapes or dtypes otherwise.
void launch_simt_sgemm(const jit::Kernel& kernel, const SimtTile& tile, const Array& a, const Array& b,
                       const Array& d, const Array& bias, SimtEpilogue epilogue, const Stream& stream);

// ---- tessel's Hopper (sm_90a) GEMM for float16/bfloat16 ----
// TMA loads into a multi-stage mbarrier pipeline, wgmma on the tensor cores, fp32 accumulation
// and a fused epilogue (src/backend/cuda/matmul_sm90.cu). Plain C++ (no CUDA types).
namespace sm90 {
enum class Epilogue { none, bias, bias_relu, bias_gelu, bias_gelu_tanh, relu, gelu, gelu_tanh };
struct GemmArgs {
  // Row-major D[m x n] = epilogue(alpha * A[m x k] @ B[k x n] + bias[n]); fp32 accumulation.
  std::int64_t m, n, k, batch;     // batch >= 1
  int dtype;                       // 0 = float16, 1 = bfloat16 (A, B, D and bias share it)
  const void* a; std::int64_t lda, batch_stride_a;  // A row-major, K contiguous: A[i,kk] = a[i*lda + kk]
  const void* b; std::int64_t ldb, batch_stride_b; bool b_k_contiguous; // true: B[kk,j] = b[j*ldb + kk]; false: b[kk*ldb + j]
  void* d; std::int64_t ldd, batch_stride_d;         // D row-major
  const void* bias;                // n elements, or nullptr
  float alpha;
  Epilogue epilogue;
  // Optional training output: the epilogue's input alpha*A@B + bias (before the activation),
  // row-major like D, same dtype. nullptr: none.
  void* aux = nullptr; std::int64_t ldaux = 0, batch_stride_aux = 0;
};
int num_configs();                                     // tile configurations the autotuner may try
const char* config_name(int config);                   // "invalid" out of range
// False for layouts, alignments or devices it does not support (compute capability 9.0 and
// 16-byte aligned pointers and leading dimensions for TMA).
bool can_implement(const GemmArgs& args, int config);
// Every CUDA call checked; CudaError/ValueError on failure. `stream` is a cudaStream_t.
void run(const GemmArgs& args, int config, void* stream);
}  // namespace sm90

}  // namespace tessel::internal
