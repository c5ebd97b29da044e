#pragma once
// The cyclic Jacobi eigh, one matrix per thread in registers.
// Included through linalg_small.cuh, which undefines the helper macros at its end.
#include "linalg_small_common.cuh"

namespace tessel_linalg_small {

// ---- Jacobi eigh (cyclic, real symmetric, lower triangle read) ----
// The matrices are row-major, as the caller's C-order batch (linalg.cpp reads the user's array
// itself): the lower triangle of a, entry (i, j), i >= j, at i * N + j, is read; w receives the N
// ascending eigenvalues and, when `vectors`, v the eigenvectors as the columns of a row-major
// N x N (entry (i, k) of eigenvector k at i * N + k). v may be a itself.
// Only the upper triangle of the working copy is kept (s(i, j), i <= j, at i + j * N; the other
// entries of the array are never touched, so they take no registers): a rotation of the pair
// (p, q) moves the N - 2 pairs (a_kp, a_kq), k != p, q, and sets a_pp -= t a_pq, a_qq += t a_pq,
// a_pq = 0 (Rutishauser), about half the work of rotating full columns and rows. The matrix is
// first scaled by a power of two (exact) so that max|a| is in [0.5, 1): the sum of squares behind
// the convergence test can neither overflow nor vanish. A pair is skipped while
// |a_pq| <= eps sqrt(|a_pp| |a_qq|) (the relative test of Demmel and Veselic); the iteration ends
// when the off-diagonal part is below eps times the whole (in squares: eps^2 ||A||_F^2) or a
// sweep skips every pair. NaN or Inf input: every output NaN, info 1.
template <class T, int N>
TESSEL_SMALL T& upper_of(T (&s)[N * N], int i, int j) {  // i, j compile-time after unrolling
  return i <= j ? s[i + j * N] : s[j + i * N];
}

// One matrix: m (read, the row-major input), wb its N eigenvalues, vb its vectors (may be m);
// returns info.
template <class T, int N>
TESSEL_SMALL int jacobi_eigh_one(const T* m, T* wb, T* vb, int vectors, int max_sweeps) {
  T s[N * N], v[N * N];
  T amax = T(0);
  TESSEL_UNROLL
  for (int i = 0; i < N; ++i)
    TESSEL_UNROLL
    for (int j = 0; j <= i; ++j) {
      const T x = m[i * N + j];  // (i, j) of the lower triangle is (j, i) of the upper
      s[j + i * N] = x;
      amax = nan_max(amax, abs_of(x));
    }
  const bool finite = finite_of(amax);
  const int exponent = scale_exponent(amax);
  const T scale = ldexp(T(1), -exponent);
  TESSEL_UNROLL
  for (int j = 0; j < N; ++j)
    TESSEL_UNROLL
    for (int i = 0; i <= j; ++i) s[i + j * N] *= scale;
  TESSEL_UNROLL
  for (int e = 0; e < N * N; ++e) v[e] = (e % (N + 1) == 0) ? T(1) : T(0);
  T total = T(0);
  TESSEL_UNROLL
  for (int j = 0; j < N; ++j)
    TESSEL_UNROLL
    for (int i = 0; i <= j; ++i) total += (i == j ? T(1) : T(2)) * s[i + j * N] * s[i + j * N];
  const T tolerance = epsilon<T>() * epsilon<T>() * total;
  int converged = 0;
  for (int sweep = 0; finite && sweep < max_sweeps; ++sweep) {
    T off = T(0);
    TESSEL_UNROLL
    for (int q = 1; q < N; ++q)
      TESSEL_UNROLL
      for (int p = 0; p < q; ++p) off += s[p + q * N] * s[p + q * N];
    if (off <= tolerance) {
      converged = 1;
      break;
    }
    bool rotated = false;
    TESSEL_UNROLL
    for (int q = 1; q < N; ++q)
      TESSEL_UNROLL
      for (int p = 0; p < q; ++p) {
        const T apq = s[p + q * N], app = s[p + p * N], aqq = s[q + q * N];
        if (apq * apq <= epsilon<T>() * epsilon<T>() * abs_of(app * aqq)) continue;  // squared: no sqrt
        rotated = true;
        T c, sn, t;
        jacobi_rotation_fast(app, aqq, apq, c, sn, t);
        TESSEL_UNROLL
        for (int k = 0; k < N; ++k) {
          if (k != p && k != q) rotate_pair(upper_of<T, N>(s, k, p), upper_of<T, N>(s, k, q), c, sn);
        }
        s[p + p * N] = app - t * apq;
        s[q + q * N] = aqq + t * apq;
        s[p + q * N] = T(0);
        rotate_columns<T, N, N>(v, p, q, c, sn);
      }
    if (!rotated) {  // every pair below the relative test: off may still exceed the tolerance
      converged = 1;
      break;
    }
  }
  // Ascending order: each eigenvalue's rank (ties by index) is where it and its vector go.
  const T nan = quiet_nan_of<T>();
  TESSEL_UNROLL
  for (int i = 0; i < N; ++i) {
    const T wi = s[i + i * N];
    int rank = 0;
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j) {
      const T wj = s[j + j * N];
      rank += (wj < wi || (wj == wi && j < i)) ? 1 : 0;
    }
    if (!finite) rank = i;
    wb[rank] = finite ? ldexp(wi, exponent) : nan;
    if (vectors) {
      TESSEL_UNROLL
      for (int k = 0; k < N; ++k) vb[k * N + rank] = finite ? v[k + i * N] : nan;
    }
  }
  return converged || !finite ? 0 : 1;  // non-finite input: NaN results, info 0 (as the CPU's)
}

// A block of kStagedBlock threads stages its matrices (StagedMatrices): the coalesced load, each
// thread's matrix from its slot, its vectors back into the slot, the coalesced store.
template <class T, int N>
__global__ void jacobi_eigh(const T* a, T* v, T* __restrict__ w, int vectors, int max_sweeps, int* __restrict__ info,
                            long long batch) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  if (StagedMatrices<T, N>::value && blockDim.x == kStagedBlock) {  // uniform: the loop is block-wide
    // The eigenvectors overwrite the matrix in its slot and are stored from there.
    for_each_staged_matrix<T, N>(a, vectors ? v : static_cast<T*>(nullptr), batch, [&](T* slot, long long b) {
      info[b] = jacobi_eigh_one<T, N>(slot, w + b * N, slot, vectors, max_sweeps);
    });
    return;
  }
#endif
  TESSEL_FOR_EACH_MATRIX(b, batch) { info[b] = jacobi_eigh_one<T, N>(a + b * N * N, w + b * N, v + b * N * N, vectors, max_sweeps); }
}

}  // namespace tessel_linalg_small
