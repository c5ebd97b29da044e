#pragma once
// LU with partial pivoting and the batched solve, one matrix per thread in registers.
// Included through linalg_small.cuh, which undefines the helper macros at its end.
#include "linalg_small_common.cuh"

namespace tessel_linalg_small {

// ---- LU with partial pivoting, in registers ----
// Factors lu (column-major N x N) in place; piv[k] = the 0-based row swapped with row k; returns
// LAPACK's info (the first exactly zero pivot, 1-based, or 0).
template <class T, int N>
TESSEL_SMALL int lu_factor(T (&lu)[N * N], int (&piv)[N]) {
  int info = 0;
  TESSEL_UNROLL
  for (int k = 0; k < N; ++k) {
    int p = k;
    T best = abs_of(lu[k + k * N]);
    TESSEL_UNROLL
    for (int i = k + 1; i < N; ++i) {
      const T v = abs_of(lu[i + k * N]);
      if (v > best) {
        best = v;
        p = i;
      }
    }
    piv[k] = p;
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j) {  // swap rows k and p by selects
      const T rk = lu[k + j * N];
      T rp = rk;
      TESSEL_UNROLL
      for (int i = k + 1; i < N; ++i) rp = i == p ? lu[i + j * N] : rp;
      TESSEL_UNROLL
      for (int i = k + 1; i < N; ++i) lu[i + j * N] = i == p ? rk : lu[i + j * N];
      lu[k + j * N] = rp;
    }
    const T pivot = lu[k + k * N];
    if (pivot == T(0)) {
      if (info == 0) info = k + 1;
      continue;  // LAPACK goes on; the column below stays as it is
    }
    const T inv = T(1) / pivot;
    TESSEL_UNROLL
    for (int i = k + 1; i < N; ++i) lu[i + k * N] *= inv;
    TESSEL_UNROLL
    for (int j = k + 1; j < N; ++j)
      TESSEL_UNROLL
      for (int i = k + 1; i < N; ++i) lu[i + j * N] -= lu[i + k * N] * lu[k + j * N];
  }
  return info;
}

// x <- (LU)^-1 P x for one right-hand side.
template <class T, int N>
TESSEL_SMALL void lu_solve(const T (&lu)[N * N], const int (&piv)[N], T (&x)[N]) {
  TESSEL_UNROLL
  for (int k = 0; k < N; ++k) {
    const T xk = x[k];
    T xp = xk;
    TESSEL_UNROLL
    for (int i = k + 1; i < N; ++i) xp = i == piv[k] ? x[i] : xp;
    TESSEL_UNROLL
    for (int i = k + 1; i < N; ++i) x[i] = i == piv[k] ? xk : x[i];
    x[k] = xp;
  }
  TESSEL_UNROLL
  for (int i = 1; i < N; ++i)
    TESSEL_UNROLL
    for (int k = 0; k < i; ++k) x[i] -= lu[i + k * N] * x[k];
  TESSEL_UNROLL
  for (int i = N - 1; i >= 0; --i) {
    TESSEL_UNROLL
    for (int k = i + 1; k < N; ++k) x[i] -= lu[i + k * N] * x[k];
    x[i] /= lu[i + i * N];
  }
}

// One matrix of lu_solve_batch: m is its N x N (column-major, or row-major when RowMajor), b its
// batch index.
template <class T, int N, bool RowMajor>
TESSEL_SMALL void lu_solve_one(const T* m, const T* rhs, T* out, int nrhs, int* info, long long b) {
  T f[N * N];
  int piv[N];
  TESSEL_UNROLL
  for (int i = 0; i < N; ++i)
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j) f[i + j * N] = RowMajor ? m[j + i * N] : m[i + j * N];
  info[b] = lu_factor<T, N>(f, piv);
  const T* in = rhs + b * N * static_cast<long long>(nrhs);
  T* x = out + b * N * static_cast<long long>(nrhs);
  for (int c = 0; c < nrhs; ++c) {
    T v[N];
    TESSEL_UNROLL
    for (int i = 0; i < N; ++i) v[i] = in[i + c * N];
    lu_solve<T, N>(f, piv, v);
    TESSEL_UNROLL
    for (int i = 0; i < N; ++i) x[i + c * N] = v[i];
  }
}

// The launch block of the one-matrix-per-thread kernels (linalg_small.cpp kBlock).
constexpr int kStagedBlock = 64;
// Whether lu_solve_batch and jacobi_eigh stage their matrices through shared memory (at most
// 24 KB a block). A thread's matrix is N * N consecutive values, so loads straight into registers
// touch 32 lines per warp instruction; staged, the block copies its 64 matrices with coalesced
// loads (and jacobi_eigh its vectors back with coalesced stores), and each thread reads its own
// with one value of padding per matrix (no bank conflicts for even N).
template <class T, int N>
struct StagedMatrices {
  static constexpr bool value = kStagedBlock * (N * N + 1) * sizeof(T) <= 24 * 1024;
};

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
// The staged kernels' block-wide loop over the batch: each pass loads up to kStagedBlock
// matrices of `a` into the block's slots (coalesced), runs body(slot, b) on the thread's own
// matrix b, and, when `back` is not null, stores the slots into `back` (coalesced). Every thread
// of the block must call it (it synchronizes). Unrolled, where N * N is a multiple of
// kStagedBlock (N = 8): a full pass copies by an unrolled loop, two instructions a value (a load
// or a store at a constant offset), against about 11 in the loop (its index arithmetic: 1,470 a
// matrix at N = 8). Only tridiagonal_eigh asks for it: at other orders, and in
// jacobi_eigh<float, 7>, it raised the registers (sm_90: tridiagonal float N = 7 96 to 148,
// double N = 4 88 to 118; jacobi float N = 7 125 to 161). The unrolled copy was not timed on its own.
template <class T, int N, bool Unrolled = false, class Body>
__device__ void for_each_staged_matrix(const T* a, T* back, long long batch, Body body) {
  constexpr int kStride = N * N + 1;
  constexpr bool kUnrolled = Unrolled && (N * N) % kStagedBlock == 0;
  __shared__ T stage[StagedMatrices<T, N>::value ? kStagedBlock * kStride : 1];
  for (long long base = blockIdx.x * static_cast<long long>(kStagedBlock); base < batch;
       base += static_cast<long long>(gridDim.x) * kStagedBlock) {
    const int count = batch - base < kStagedBlock ? static_cast<int>(batch - base) : kStagedBlock;
    const T* src = a + base * N * N;
    // Value e of the pass sits at stage[e + e / (N * N)]: entry e % (N * N) of slot e / (N * N).
    // t < kStagedBlock (blockDim.x) lets the compiler fold e / (N * N) into the offsets.
    const unsigned t = threadIdx.x % kStagedBlock;
    if (kUnrolled && count == kStagedBlock) {
      TESSEL_UNROLL
      for (int i = 0; i < N * N; ++i) {
        const unsigned e = t + i * kStagedBlock;
        stage[e + e / (N * N)] = src[e];
      }
    } else {
      for (int e = threadIdx.x; e < count * N * N; e += kStagedBlock) stage[(e / (N * N)) * kStride + e % (N * N)] = src[e];
    }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < count) body(stage + threadIdx.x * kStride, base + threadIdx.x);
    __syncthreads();
    if (back != nullptr) {
      T* dst = back + base * N * N;
      if (kUnrolled && count == kStagedBlock) {
        TESSEL_UNROLL
        for (int i = 0; i < N * N; ++i) {
          const unsigned e = t + i * kStagedBlock;
          dst[e] = stage[e + e / (N * N)];
        }
      } else {
        for (int e = threadIdx.x; e < count * N * N; e += kStagedBlock) dst[e] = stage[(e / (N * N)) * kStride + e % (N * N)];
      }
      __syncthreads();  // the next pass overwrites the slots
    }
  }
}
#endif

// a: N x N, read only (the factors stay in registers: solve returns only the solution), column-
// major, or row-major when RowMajor (the caller's own C-order batch, no transposing copy); rhs:
// N x nrhs per matrix, column-major; out (the same layout, may be rhs itself) receives the
// solution.
template <class T, int N, bool RowMajor>
__global__ void lu_solve_batch(const T* __restrict__ a, const T* rhs, T* out, int nrhs, int* __restrict__ info,
                               long long batch) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  if (StagedMatrices<T, N>::value && blockDim.x == kStagedBlock) {  // uniform: the loop is block-wide
    for_each_staged_matrix<T, N>(a, static_cast<T*>(nullptr), batch, [&](const T* slot, long long b) {
      lu_solve_one<T, N, RowMajor>(slot, rhs, out, nrhs, info, b);
    });
    return;
  }
#endif
  TESSEL_FOR_EACH_MATRIX(b, batch) { lu_solve_one<T, N, RowMajor>(a + b * N * N, rhs, out, nrhs, info, b); }
}

}  // namespace tessel_linalg_small
