#pragma once
// Matrix products, implemented by backend/cpu/matmul.cpp and backend/cuda/matmul.cpp (with the
// kernels of backend/cuda/matmul_simt.cu). src/ops/matmul.cpp validates, broadcasts and
// normalizes the operands into a MatmulProblem:
//   D[b] (m x n, row-major) = epilogue(alpha * A[b] @ B[b] + beta * D[b] + bias)
// beta reads D's current contents: ops/matmul.cpp copies c into D first. aux, when set,
// receives the epilogue's input (same layout as D).
#include <cstdint>
#include <memory>
#include <string>

#include "backend/dispatch.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/ops/matmul.hpp"

namespace tessel::backend {

// A matrix operand of r x c elements at data + i*row_stride + j*col_stride, batch b at
// + b*batch_stride (0: broadcast). ops/matmul.cpp guarantees col_stride == 1 with
// row_stride >= max(1, c) ("row-major"), or row_stride == 1 with col_stride >= max(1, r)
// ("column-major", e.g. a transposed view).
struct MatmulOperand {
  const void* data = nullptr;
  std::int64_t row_stride = 0, col_stride = 1, batch_stride = 0;
  bool row_major() const { return col_stride == 1; }
};

struct MatmulProblem {
  DType dtype = DType::float32;      // of A and B
  DType out_dtype = DType::float32;  // of D, aux and bias (int32 for int8 inputs, else dtype)
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  MatmulOperand a, b;                // a: m x k, b: k x n
  void* d = nullptr;                 // row-major, unit column stride
  std::int64_t ldd = 0, batch_stride_d = 0;
  void* aux = nullptr;               // nullptr or the layout of d (an input for *_grad epilogues)
  std::int64_t ldaux = 0, batch_stride_aux = 0;
  const void* bias = nullptr;        // n contiguous elements, or nullptr
  double alpha = 1.0, beta = 0.0;
  MatmulEpilogue epilogue = MatmulEpilogue::none;
  MatmulCompute compute = MatmulCompute::default_;
};

namespace cpu {
// OpenBLAS per batch (float16/bfloat16 through float32; int8 by a plain loop into int32).
void matmul(const MatmulProblem& problem, const Stream& stream);
}  // namespace cpu

// The candidates of one problem layout on CUDA: cuBLASLt heuristic algorithms, tessel's SIMT kernel
// configurations (float32) and tessel's sm90 kernel configurations (float16/bfloat16).
class MatmulCandidates {
 public:
  virtual ~MatmulCandidates() = default;
  virtual int size() const = 0;
  virtual std::string name(int candidate) const = 0;
  // Runs candidate on problem (same layout as planned; only the pointers and alpha/beta may
  // differ). Throws on failure.
  virtual void run(int candidate, const MatmulProblem& problem, const Stream& stream) = 0;
};

// CUDA only: the autotuned candidates (the CPU runs matmul above, one candidate), and what the
// ops layer calls around them. plan_matmul: DTypeError when no backend can run the layout (int8
// layouts cuBLASLt does not offer). matmul_library_version: "cublasLt <version>" for cache keys.
// The benchmark's ladder (matmul_simt.cu): one thread per output (a warp along a row of D:
// coalesced loads of B; or along a column: the uncoalesced first rung), and 16x16 shared-memory
// tiles without register blocking; float32, row-major contiguous, no epilogue. apply_epilogue:
// in place on D (out_dtype float16/bfloat16/float32/float64): aux = D + bias (when aux), then
// D = act(D + bias), the unfused fallback where a library epilogue is missing. `stream` is a
// cudaStream_t; every launch is checked.
#define TESSEL_MATMUL_CUDA_ONLY(X)                                                                    \
  X(std::unique_ptr<MatmulCandidates>, plan_matmul, (const MatmulProblem& problem, Device device))      \
  X(std::string, matmul_library_version, ())                                                          \
  X(void, naive_uncoalesced_sgemm,                                                                    \
    (const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k, void* stream)) \
  X(void, naive_sgemm,                                                                                \
    (const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k, void* stream)) \
  X(void, tiled_sgemm,                                                                                \
    (const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k, void* stream)) \
  X(void, apply_epilogue, (const MatmulProblem& problem, void* stream))
TESSEL_BACKEND_CUDA_ONLY(TESSEL_MATMUL_CUDA_ONLY)

namespace cuda {
using backend::MatmulCandidates;

// Kernels of matmul_simt.cu. All launch on `stream` (cudaStream_t) and are checked.
int simt_num_configs();
const char* simt_config_name(int config);
bool simt_can_implement(const MatmulProblem& problem, int config);
void simt_run(const MatmulProblem& problem, int config, void* stream);
}  // namespace cuda

}  // namespace tessel::backend
