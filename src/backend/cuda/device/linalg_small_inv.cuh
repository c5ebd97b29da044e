#pragma once
// The inverse by Gauss-Jordan, a group of lanes per matrix.
// Included through linalg_small.cuh, which undefines the helper macros at its end.
#include "linalg_small_common.cuh"

namespace tessel_linalg_small {

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
// ---- inverse: Gauss-Jordan with partial pivoting, one group of lanes per matrix ----
// The warp splits into 32 / W groups of W lanes (W: N rounded up to a power of two); lane r of a
// group holds row r of its column-major N x N matrix in registers (lanes r >= N hold nothing).
// Step k picks the pivot row p (the largest |entry| of column k among the rows not yet pivots,
// the row LAPACK's getrf picks; NaN counts as the largest, so every lane agrees) by a butterfly
// over the group, then every lane updates its row with p's row, read by shuffles:
//   row p <- row p / pivot, its column k <- 1 / pivot;
//   row r <- row r - (a_rk / pivot) row p, its column k <- -a_rk / pivot.
// This is the in-place Gauss-Jordan inverse of B = P a (row k of B is row p_k of a), done
// without moving rows: at the end, the lane that was step s's pivot holds row s of B^-1, and
// a^-1 = B^-1 P puts its column k at column p_k. Loads and stores are one matrix column per
// group per instruction. info: the first step whose pivot is exactly zero (1-based; LAPACK's
// getrf info, as the pivots are getrf's); the inverse of such a matrix is inf/NaN.
// out may not alias a. Launch: 32-thread multiples; the batch loop is uniform per warp.
template <class T, int N>
__global__ void gauss_jordan_inv(const T* __restrict__ a, T* __restrict__ out, int* __restrict__ info,
                                 long long batch) {
  static_assert(N >= 1 && N <= 32, "gauss_jordan_inv: one warp holds at most 32 rows");
  constexpr int W = GroupWidth<N>::value;
  constexpr int G = 32 / W;  // matrices per warp
  const int lane = threadIdx.x % 32;
  const int r = lane % W;
  const long long warp = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
  const long long warps = static_cast<long long>(gridDim.x) * blockDim.x / 32;
  for (long long first = warp * G; first < batch; first += warps * G) {  // uniform across the warp
    const long long b = first + lane / W;
    const bool valid = r < N && b < batch;
    const T* m = a + b * N * N;
    T row[N];
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j) row[j] = valid ? m[r + j * N] : T(0);
    int piv[N];
    bool used = !valid;
    int rank = 0;
    int failed = 0;
    TESSEL_UNROLL
    for (int k = 0; k < N; ++k) {
      T key = used ? T(-1) : abs_of(row[k]);
      if (key != key) key = T(1) / T(0);  // NaN: +inf, ties broken by row
      int p = r;
      TESSEL_UNROLL
      for (int offset = W / 2; offset > 0; offset /= 2) {
        const T other = __shfl_xor_sync(0xffffffffu, key, offset, W);
        const int other_p = __shfl_xor_sync(0xffffffffu, p, offset, W);
        if (other > key || (other == key && other_p < p)) {
          key = other;
          p = other_p;
        }
      }
      piv[k] = p;
      const T pivot = __shfl_sync(0xffffffffu, row[k], p, W);
      if (pivot == T(0) && failed == 0) failed = k + 1;
      const T inv = T(1) / pivot;
      const bool is_pivot = r == p;
      if (is_pivot) {
        used = true;
        rank = k;
      }
      const T f = is_pivot ? T(0) : row[k] * inv;
      TESSEL_UNROLL
      for (int j = 0; j < N; ++j) {
        const T pj = __shfl_sync(0xffffffffu, row[j], p, W);
        if (j == k) row[j] = is_pivot ? inv : -f;
        else row[j] = is_pivot ? row[j] * inv : row[j] - f * pj;
      }
    }
    if (valid) {
      T* o = out + b * N * N;
      TESSEL_UNROLL
      for (int k = 0; k < N; ++k) o[rank + piv[k] * N] = row[k];
      if (r == 0) info[b] = failed;
    }
  }
}
#endif

}  // namespace tessel_linalg_small
