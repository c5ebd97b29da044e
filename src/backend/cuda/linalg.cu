// Helper kernels of the CUDA linear algebra (linalg.cpp): pointer arrays for the batched
// cuSOLVER/cuBLAS routines, the batched conjugate transpose that turns gesvdj's V into Vh, and
// the triangle copy that takes R out of a geqrf result.
#include <cuComplex.h>

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "backend/linalg.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t count) {
  return static_cast<unsigned>(std::min<std::int64_t>((count + kThreads - 1) / kThreads, 65535LL * 8));
}

__global__ void fill_pointers_kernel(void** pointers, char* base, long long stride, long long count) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    pointers[i] = base + i * stride;
  }
}

__device__ __forceinline__ float adjoint_of(float v) { return v; }
__device__ __forceinline__ double adjoint_of(double v) { return v; }
__device__ __forceinline__ cuFloatComplex adjoint_of(cuFloatComplex v) { return cuConjf(v); }
__device__ __forceinline__ cuDoubleComplex adjoint_of(cuDoubleComplex v) { return cuConj(v); }

// One thread per element of dst: dst[b][i + j * rows] = conj(src[b][j + i * cols]).
template <class T>
__global__ void adjoint_kernel(const T* src, long long src_cols, T* dst, long long rows, long long cols,
                               long long total) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long per = rows * cols;
    const long long b = e / per, r = e % per;
    const long long i = r % rows, j = r / rows;
    dst[e] = adjoint_of(src[b * cols * src_cols + j + i * cols]);
  }
}

// One thread per element of dst (n x n, column-major): the upper triangle of src, zero below.
// Type-erased by element size (zero is all-zero bits in every dtype).
template <class T>
__global__ void copy_upper_kernel(const T* src, long long lda, T* dst, long long n) {
  const long long total = n * n;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = e % n, j = e / n;
    dst[e] = i <= j ? src[i + j * lda] : T{};
  }
}
struct alignas(8) Bytes16 {
  unsigned long long low, high;
};

}  // namespace

void copy_upper_triangle(DType dtype, const void* src, std::int64_t lda, void* dst, std::int64_t n, void* stream) {
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = grid_for(n * n);
  switch (itemsize(dtype)) {
    case 4:
      copy_upper_kernel<<<grid, kThreads, 0, s>>>(static_cast<const unsigned*>(src), lda, static_cast<unsigned*>(dst), n);
      break;
    case 8:
      copy_upper_kernel<<<grid, kThreads, 0, s>>>(static_cast<const unsigned long long*>(src), lda,
                                                  static_cast<unsigned long long*>(dst), n);
      break;
    case 16:
      copy_upper_kernel<<<grid, kThreads, 0, s>>>(static_cast<const Bytes16*>(src), lda, static_cast<Bytes16*>(dst), n);
      break;
    default:
      throw DTypeError(fmt::format("linalg: no triangle copy for {}", dtype_name(dtype)));
  }
  TESSEL_CUDA_CHECK_LAUNCH(s, "linalg");
}

void fill_pointers(void** pointers, void* base, std::int64_t stride_bytes, std::int64_t count, void* stream) {
  if (count == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  fill_pointers_kernel<<<grid_for(count), kThreads, 0, s>>>(pointers, static_cast<char*>(base), stride_bytes, count);
  TESSEL_CUDA_CHECK_LAUNCH(s, "linalg");
}

void adjoint_batch(DType dtype, const void* src, std::int64_t src_cols, void* dst, std::int64_t rows,
                   std::int64_t cols, std::int64_t batch, void* stream) {
  const std::int64_t total = rows * cols * batch;
  if (total == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = grid_for(total);
  switch (dtype) {
    case DType::float32:
      adjoint_kernel<<<grid, kThreads, 0, s>>>(static_cast<const float*>(src), src_cols, static_cast<float*>(dst), rows,
                                               cols, total);
      break;
    case DType::float64:
      adjoint_kernel<<<grid, kThreads, 0, s>>>(static_cast<const double*>(src), src_cols, static_cast<double*>(dst),
                                               rows, cols, total);
      break;
    case DType::complex64:
      adjoint_kernel<<<grid, kThreads, 0, s>>>(static_cast<const cuFloatComplex*>(src), src_cols,
                                               static_cast<cuFloatComplex*>(dst), rows, cols, total);
      break;
    case DType::complex128:
      adjoint_kernel<<<grid, kThreads, 0, s>>>(static_cast<const cuDoubleComplex*>(src), src_cols,
                                               static_cast<cuDoubleComplex*>(dst), rows, cols, total);
      break;
    default:
      throw DTypeError(fmt::format("linalg: no adjoint kernel for {}", dtype_name(dtype)));
  }
  TESSEL_CUDA_CHECK_LAUNCH(s, "linalg");
}

}  // namespace tessel::backend::cuda
