// Helper kernels of the CUDA linear algebra (linalg.cpp): pointer arrays for the batched
// cuSOLVER/cuBLAS routines, the batched conjugate transpose that turns gesvdj's V into Vh, the
// triangle copy that takes R out of a geqrf result, the reduction of an info array to its
// first failing index that the plain functions' error check reads (ops/linalg.cpp check_info),
// the finiteness flags that turn the results of non-finite input into NaN, and the row
// permutation that ends an LU solve by triangular solves, and the batched Q of a batched geqrf.
#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "backend/cuda/stream_cache.hpp"
#include "backend/linalg.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t count) {
  return static_cast<unsigned>(std::min<std::int64_t>((count + kThreads - 1) / kThreads, 65535LL * 8));
}

// x over one matrix's `per` elements (at most 1024 blocks, the rest by striding), y over the batch.
dim3 per_matrix_grid(std::int64_t per, std::int64_t batch) {
  return dim3(static_cast<unsigned>(std::min<std::int64_t>((per + kThreads - 1) / kThreads, 1024)),
              static_cast<unsigned>(std::min<std::int64_t>(batch, 65535)));
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
// The first i < n with info[i] != 0, as status[1] = i + 1 (status[1] is left alone, 0, when
// there is none). scratch (device memory, kept per stream, zeroed once when allocated): [0] the
// maximum of ~i over the failures seen (~i for i < 2^63 is never 0: 0 means none, and the
// largest ~i is the smallest i), [1] the blocks done. The block that finishes last reads [0],
// writes the result with one plain store (status may be page-locked host memory, where device
// atomics are not guaranteed; the atomics here touch device memory only) and zeroes both words
// for the next launch on the stream, which the stream orders after this one.
constexpr int kFailureThreads = 256;
__global__ void first_failure_kernel(const int* __restrict__ info, long long n, unsigned long long* scratch,
                                     long long* status) {
  unsigned long long first = ULLONG_MAX;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    if (info[i] != 0) {  // a thread's indices increase: its first hit is its minimum
      first = static_cast<unsigned long long>(i);
      break;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) first = min(first, __shfl_down_sync(0xffffffffu, first, offset));
  __shared__ unsigned long long warp_first[kFailureThreads / 32];
  if (threadIdx.x % 32 == 0) warp_first[threadIdx.x / 32] = first;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kFailureThreads / 32; ++w) first = min(first, warp_first[w]);
  if (first != ULLONG_MAX) atomicMax(&scratch[0], ~first);
  __threadfence();
  if (atomicAdd(&scratch[1], 1ULL) != gridDim.x - 1ULL) return;
  __threadfence();
  const unsigned long long found = atomicExch(&scratch[0], 0ULL);
  atomicExch(&scratch[1], 0ULL);
  if (found != 0) *reinterpret_cast<volatile long long*>(&status[1]) = static_cast<long long>(~found) + 1;
}

// flags[e / per] = 1 for every non-finite element e (plain stores: every writer writes 1). A
// complex matrix is read as 2 * per reals.
// Grid: x over a matrix's 16-byte vectors (V: float4 or double2), y over the batch; no division
// per element. `vectors` is false where a matrix is not a whole number of aligned vectors.
template <class R, class V>
__global__ void flag_nonfinite_kernel(const R* a, long long per, long long batch, bool vectors, int* flags) {
  constexpr int kLanes = sizeof(V) / sizeof(R);
  for (long long b = blockIdx.y; b < batch; b += gridDim.y) {
    const R* matrix = a + b * per;
    bool bad = false;
    if (vectors) {
      const V* v = reinterpret_cast<const V*>(matrix);
      for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < per / kLanes;
           e += static_cast<long long>(gridDim.x) * blockDim.x) {
        const V x = v[e];
        const R* lanes = reinterpret_cast<const R*>(&x);
#pragma unroll
        for (int l = 0; l < kLanes; ++l) bad |= !isfinite(lanes[l]);
      }
    } else {
      for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < per;
           e += static_cast<long long>(gridDim.x) * blockDim.x) {
        bad |= !isfinite(matrix[e]);
      }
    }
    if (bad) flags[b] = 1;
  }
}

// One flag read per block and matrix: the blocks of unflagged matrices (nearly always all of them)
// leave at once. Grid: x over a matrix's elements, y over the batch.
template <class R>
__global__ void poison_flagged_kernel(const int* flags, long long per, long long batch, R* out, int* info) {
  for (long long b = blockIdx.y; b < batch; b += gridDim.y) {
    if (flags[b] == 0) continue;
    R* matrix = out + b * per;
    for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < per;
         e += static_cast<long long>(gridDim.x) * blockDim.x) {
      matrix[e] = R(0) * (R(1) / R(0));  // NaN
    }
    if (info != nullptr && blockIdx.x == 0 && threadIdx.x == 0) info[b] = 0;
  }
}

// The reduction's two words per stream (see first_failure_kernel), zeroed once; each launch
// leaves them zeroed. The lock covers the launch, so launches from several host threads reach the
// stream one after another.
struct FailureScratch {
  std::mutex mutex;
  std::shared_ptr<Buffer> words;
};
auto* const g_failure_scratch = new StreamCache<FailureScratch>();

struct alignas(8) Bytes16 {
  unsigned long long low, high;
};

// getrf's pivots as one permutation: rows[i] = the row that getrf's swaps (row k with row
// piv[k] - 1, k = 0, 1, ...) bring to row i. The swaps are a chain, so one thread applies them, in
// shared memory (n ints: n <= kMaxPermutedRows); the block's other threads fill and copy out.
__global__ void pivots_to_rows_kernel(const int* __restrict__ piv, int n, int* __restrict__ rows) {
  extern __shared__ int moved[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) moved[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 0; k < n; ++k) {
      const int q = __ldg(piv + k) - 1;
      const int t = moved[k];
      moved[k] = moved[q];
      moved[q] = t;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) rows[i] = moved[i];
}

// x[rows[i] + c * n] = z[i + c * n] over the n x k column-major z: x = P z for getrf's P.
template <class T>
__global__ void scatter_rows_kernel(const T* __restrict__ z, const int* __restrict__ rows, long long n, long long total,
                                    T* __restrict__ x) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = e % n;
    x[rows[i] + (e - i)] = z[e];
  }
}


// ---- Q of geqrf's reflectors (LAPACK's orgqr / ungqr), batched ----
template <class T>
__device__ __forceinline__ T q_conj(T v) { return adjoint_of(v); }
__device__ __forceinline__ float q_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double q_mul(double a, double b) { return a * b; }
__device__ __forceinline__ cuFloatComplex q_mul(cuFloatComplex a, cuFloatComplex b) { return cuCmulf(a, b); }
__device__ __forceinline__ cuDoubleComplex q_mul(cuDoubleComplex a, cuDoubleComplex b) { return cuCmul(a, b); }
__device__ __forceinline__ float q_add(float a, float b) { return a + b; }
__device__ __forceinline__ double q_add(double a, double b) { return a + b; }
__device__ __forceinline__ cuFloatComplex q_add(cuFloatComplex a, cuFloatComplex b) { return cuCaddf(a, b); }
__device__ __forceinline__ cuDoubleComplex q_add(cuDoubleComplex a, cuDoubleComplex b) { return cuCadd(a, b); }
__device__ __forceinline__ float q_sub(float a, float b) { return a - b; }
__device__ __forceinline__ double q_sub(double a, double b) { return a - b; }
__device__ __forceinline__ cuFloatComplex q_sub(cuFloatComplex a, cuFloatComplex b) { return cuCsubf(a, b); }
__device__ __forceinline__ cuDoubleComplex q_sub(cuDoubleComplex a, cuDoubleComplex b) { return cuCsub(a, b); }
template <class T>
__device__ __forceinline__ T q_real(double v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ cuFloatComplex q_real<cuFloatComplex>(double v) { return make_cuFloatComplex(static_cast<float>(v), 0.0f); }
template <>
__device__ __forceinline__ cuDoubleComplex q_real<cuDoubleComplex>(double v) { return make_cuDoubleComplex(v, 0.0); }
__device__ __forceinline__ float q_shfl(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double q_shfl(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ cuFloatComplex q_shfl(cuFloatComplex v, int o) {
  return make_cuFloatComplex(__shfl_xor_sync(0xffffffffu, v.x, o), __shfl_xor_sync(0xffffffffu, v.y, o));
}
__device__ __forceinline__ cuDoubleComplex q_shfl(cuDoubleComplex v, int o) {
  return make_cuDoubleComplex(__shfl_xor_sync(0xffffffffu, v.x, o), __shfl_xor_sync(0xffffffffu, v.y, o));
}

// A warp per column j of Q (m x qcols): the column starts as e_j and takes the reflectors
// H_i = I - tau_i v_i v_i^H from the last to the first (backward accumulation, as LAPACK's org2r);
// v_i is 1 at row i and geqrf's column i below it. Column j < i is e_j, which H_i leaves alone.
// The lanes split the rows (coalesced column-major loads) and sum v_i^H q by butterflies.
// Grid: x over the columns (blockDim / 32 per block, grid-stride), y over the batch.
template <class T>
__global__ void householder_q_kernel(const T* __restrict__ v, long long m, long long n, const T* __restrict__ tau,
                                     long long k, T* __restrict__ q, long long qcols, long long batch) {
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (long long b = blockIdx.y; b < batch; b += gridDim.y) {
    const T* vb = v + b * m * n;
    const T* tb = tau + b * k;
    T* qb = q + b * m * qcols;
    for (long long j = blockIdx.x * static_cast<long long>(warps) + threadIdx.x / 32; j < qcols;
         j += static_cast<long long>(gridDim.x) * warps) {
      T* col = qb + j * m;
      for (long long r = lane; r < m; r += 32) col[r] = q_real<T>(r == j ? 1.0 : 0.0);
      for (long long i = k - 1; i >= 0; --i) {
        if (j < i) continue;
        const T* vi = vb + i * m;
        T w = q_real<T>(0.0);
        for (long long r = i + lane; r < m; r += 32) {
          const T vr = r == i ? q_real<T>(1.0) : vi[r];
          w = q_add(w, q_mul(q_conj(vr), col[r]));
        }
        for (int o = 16; o > 0; o /= 2) w = q_add(w, q_shfl(w, o));
        const T t = q_mul(tb[i], w);
        for (long long r = i + lane; r < m; r += 32) {
          const T vr = r == i ? q_real<T>(1.0) : vi[r];
          col[r] = q_sub(col[r], q_mul(vr, t));
        }
      }
    }
  }
}

}  // namespace

void householder_q(DType dtype, const void* v, std::int64_t m, std::int64_t n, const void* tau, std::int64_t qcols,
                   void* q, std::int64_t batch, void* stream) {
  const std::int64_t k = std::min(m, n);
  if (m * qcols * batch == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  constexpr int kWarps = kThreads / 32;
  const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>((qcols + kWarps - 1) / kWarps, 1024)),
                  static_cast<unsigned>(std::min<std::int64_t>(batch, 65535)));
  switch (dtype) {
    case DType::float32:
      householder_q_kernel<<<grid, kThreads, 0, s>>>(static_cast<const float*>(v), m, n, static_cast<const float*>(tau), k,
                                                     static_cast<float*>(q), qcols, batch);
      break;
    case DType::float64:
      householder_q_kernel<<<grid, kThreads, 0, s>>>(static_cast<const double*>(v), m, n, static_cast<const double*>(tau),
                                                     k, static_cast<double*>(q), qcols, batch);
      break;
    case DType::complex64:
      householder_q_kernel<<<grid, kThreads, 0, s>>>(static_cast<const cuFloatComplex*>(v), m, n,
                                                     static_cast<const cuFloatComplex*>(tau), k,
                                                     static_cast<cuFloatComplex*>(q), qcols, batch);
      break;
    case DType::complex128:
      householder_q_kernel<<<grid, kThreads, 0, s>>>(static_cast<const cuDoubleComplex*>(v), m, n,
                                                     static_cast<const cuDoubleComplex*>(tau), k,
                                                     static_cast<cuDoubleComplex*>(q), qcols, batch);
      break;
    default:
      throw DTypeError(fmt::format("qr: no Q kernel for {}", dtype_name(dtype)));
  }
  TESSEL_CUDA_CHECK_LAUNCH(s, "qr");
}

void permute_rows_by_pivots(DType dtype, const std::int32_t* piv, std::int64_t n, const void* z, std::int64_t k,
                            void* x, std::int32_t* rows, void* stream) {
  if (n == 0 || k == 0) return;
  if (n > kMaxPermutedRows) {
    throw Error(fmt::format("linalg: internal error: {} rows to permute, at most {}", n, kMaxPermutedRows));
  }
  auto s = static_cast<cudaStream_t>(stream);
  pivots_to_rows_kernel<<<1, kThreads, static_cast<std::size_t>(n) * sizeof(int), s>>>(piv, static_cast<int>(n), rows);
  TESSEL_CUDA_CHECK_LAUNCH(s, "linalg");
  const std::int64_t total = n * k;
  const unsigned grid = grid_for(total);
  switch (itemsize(dtype)) {
    case 4:
      scatter_rows_kernel<<<grid, kThreads, 0, s>>>(static_cast<const unsigned*>(z), rows, n, total,
                                                    static_cast<unsigned*>(x));
      break;
    case 8:
      scatter_rows_kernel<<<grid, kThreads, 0, s>>>(static_cast<const unsigned long long*>(z), rows, n, total,
                                                    static_cast<unsigned long long*>(x));
      break;
    case 16:
      scatter_rows_kernel<<<grid, kThreads, 0, s>>>(static_cast<const Bytes16*>(z), rows, n, total, static_cast<Bytes16*>(x));
      break;
    default:
      throw DTypeError(fmt::format("linalg: no row permutation for {}", dtype_name(dtype)));
  }
  TESSEL_CUDA_CHECK_LAUNCH(s, "linalg");
}

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

void first_failure(const std::int32_t* info, std::int64_t n, std::int64_t* status, const Stream& stream) {
  if (n == 0) return;
  DeviceGuard guard(stream.device());
  auto s = detail::cuda_stream(stream);
  FailureScratch& scratch = g_failure_scratch->get(stream.id(), [&] {
    auto made = std::make_unique<FailureScratch>();
    made->words = Buffer::allocate(stream.device(), 2 * sizeof(unsigned long long), stream);
    TESSEL_CUDA_CHECK(cudaMemsetAsync(made->words->data(), 0, 2 * sizeof(unsigned long long), s), "linalg");
    return made;
  });
  std::lock_guard<std::mutex> lock(scratch.mutex);
  const auto grid = static_cast<unsigned>(
      std::min<std::int64_t>((n + kFailureThreads - 1) / kFailureThreads, 4 * 132));
  first_failure_kernel<<<grid, kFailureThreads, 0, s>>>(info, n, static_cast<unsigned long long*>(scratch.words->data()),
                                                        reinterpret_cast<long long*>(status));
  TESSEL_CUDA_CHECK_LAUNCH(s, "linalg");
}

void flag_nonfinite(DType dtype, const void* a, std::int64_t per, std::int64_t batch, std::int32_t* flags, void* stream) {
  if (batch == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  TESSEL_CUDA_CHECK(cudaMemsetAsync(flags, 0, static_cast<std::size_t>(batch) * sizeof(std::int32_t), s), "linalg");
  const std::int64_t reals = is_complex(dtype) ? 2 : 1;
  if (per * reals == 0) return;
  const dim3 grid = per_matrix_grid(per * reals, batch);
  const std::int64_t lanes = 16 / itemsize(to_real(dtype));
  const bool vectors = reinterpret_cast<std::uintptr_t>(a) % 16 == 0 && (per * reals) % lanes == 0;
  if (to_real(dtype) == DType::float32) {
    flag_nonfinite_kernel<float, float4>
        <<<grid, kThreads, 0, s>>>(static_cast<const float*>(a), per * reals, batch, vectors, flags);
  } else if (to_real(dtype) == DType::float64) {
    flag_nonfinite_kernel<double, double2>
        <<<grid, kThreads, 0, s>>>(static_cast<const double*>(a), per * reals, batch, vectors, flags);
  } else {
    throw DTypeError(fmt::format("linalg: no finiteness check for {}", dtype_name(dtype)));
  }
  TESSEL_CUDA_CHECK_LAUNCH(s, "linalg");
}

void poison_flagged(DType dtype, const std::int32_t* flags, std::int64_t per, std::int64_t batch, void* out,
                    std::int32_t* info, void* stream) {
  const std::int64_t reals = is_complex(dtype) ? 2 : 1;
  if (per * reals * batch == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid = per_matrix_grid(per * reals, batch);
  if (to_real(dtype) == DType::float32) {
    poison_flagged_kernel<<<grid, kThreads, 0, s>>>(flags, per * reals, batch, static_cast<float*>(out), info);
  } else if (to_real(dtype) == DType::float64) {
    poison_flagged_kernel<<<grid, kThreads, 0, s>>>(flags, per * reals, batch, static_cast<double*>(out), info);
  } else {
    throw DTypeError(fmt::format("linalg: no NaN fill for {}", dtype_name(dtype)));
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
