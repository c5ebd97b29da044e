#pragma once
// tessel's own Hopper (sm_90a) GEMM for float16/bfloat16: TMA loads into a multi-stage
// mbarrier pipeline, wgmma on the tensor cores, fp32 accumulation and a fused epilogue.
// Plain C++ interface (no CUDA types) so the matmul front end and the autotuner can call it.
// See docs/matmul_sm90.md.
#include <cstdint>
namespace tessel::detail::sm90 {
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
int num_configs();                                   // tile configurations the autotuner may try
const char* config_name(int config);
bool can_implement(const GemmArgs& args, int config);  // false for layouts/alignments/devices it does not support (must check device cc == 9.0 and 16-byte alignment of pointers/leading dims for TMA)
void run(const GemmArgs& args, int config, void* stream /* cudaStream_t */);  // every CUDA call checked; throws tessel::CudaError/ValueError on failure
}
