#pragma once
// The one-sided Jacobi SVD, one matrix per thread in registers.
// Included through linalg_small.cuh, which undefines the helper macros at its end.
#include "linalg_small_common.cuh"

namespace tessel_linalg_small {

// ---- one-sided Jacobi SVD (Hestenes), M >= N, real ----
// s: N descending singular values. With `vectors`: u (M x N, the thin U) and vh (N x N).
template <class T, int M, int N>
__global__ void jacobi_svd(const T* __restrict__ a, T* __restrict__ s, T* __restrict__ u, T* __restrict__ vh,
                           int vectors, int max_sweeps, int* __restrict__ info, long long batch) {
  TESSEL_FOR_EACH_MATRIX(b, batch) {
    const T* m = a + b * M * N;
    T x[M * N], v[N * N];
    T amax = T(0);
    TESSEL_UNROLL
    for (int e = 0; e < M * N; ++e) {
      x[e] = m[e];
      amax = nan_max(amax, abs_of(x[e]));
    }
    // Scaled by a power of two (exact) so that max|a| is in [0.5, 1): the sums of squares can
    // neither overflow nor vanish (jacobi_svd_block does the same).
    // NaN or Inf input: no sweeps, every output NaN, info 1.
    const bool finite = finite_of(amax);
    const int exponent = scale_exponent(amax);
    const T scale = ldexp(T(1), -exponent);
    TESSEL_UNROLL
    for (int e = 0; e < M * N; ++e) x[e] *= scale;
    TESSEL_UNROLL
    for (int e = 0; e < N * N; ++e) v[e] = (e % (N + 1) == 0) ? T(1) : T(0);
    int converged = 0;
    for (int sweep = 0; finite && sweep < max_sweeps; ++sweep) {
      int rotated = 0;
      TESSEL_UNROLL
      for (int q = 1; q < N; ++q)
        TESSEL_UNROLL
        for (int p = 0; p < q; ++p) {
          T alpha = T(0), beta = T(0), gamma = T(0);
          TESSEL_UNROLL
          for (int k = 0; k < M; ++k) {
            alpha += x[k + p * M] * x[k + p * M];
            beta += x[k + q * M] * x[k + q * M];
            gamma += x[k + p * M] * x[k + q * M];
          }
          // Converged pair: |gamma| <= sqrt(M) eps sqrt(alpha beta) (false for NaN: the cap ends
          // it). The sqrt(M) is LAPACK's (xGESVJ) and the block kernel's: the rounding of the M-term
          // dot product alone reaches eps sqrt(alpha beta), and with eps itself as the bound about
          // one random 16 x 16 matrix in 20,000 kept rotating to the sweep cap (H100, float32 and
          // float64).
          if (abs_of(gamma) <= sqrt_of(T(M)) * epsilon<T>() * sqrt_of(alpha) * sqrt_of(beta)) continue;
          rotated = 1;
          T c, sn, t;
          jacobi_rotation(alpha, beta, gamma, c, sn, t);
          rotate_columns<T, M, N>(x, p, q, c, sn);
          rotate_columns<T, N, N>(v, p, q, c, sn);
        }
      if (!rotated) {
        converged = 1;
        break;
      }
    }
    info[b] = converged || !finite ? 0 : 1;  // non-finite input: NaN results, info 0
    T sigma[N];
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j) {
      T n2 = T(0);
      TESSEL_UNROLL
      for (int k = 0; k < M; ++k) n2 += x[k + j * M] * x[k + j * M];
      sigma[j] = sqrt_of(n2);
    }
    if (vectors) {
      // U's columns: x's columns normalized; a zero column is completed with the unit vector e_c
      // with the largest part orthogonal to the finished columns (the first above 1/2; with k
      // columns missing, some e_c has at least k / M of it, so the last has at least 1 / M),
      // orthogonalized twice (classical Gram-Schmidt), as in jacobi_svd_block.
      TESSEL_UNROLL
      for (int j = 0; j < N; ++j) {
        if (sigma[j] > T(0)) {
          TESSEL_UNROLL
          for (int k = 0; k < M; ++k) x[k + j * M] /= sigma[j];
        }
      }
      TESSEL_UNROLL
      for (int j = 0; j < N; ++j) {
        if (sigma[j] > T(0) || !finite) continue;
        // finished: normalized columns, and completed ones before j
        auto finished = [&](int i) { return i != j && (sigma[i] > T(0) || i < j); };
        T best = T(-1);
        int best_candidate = 0;
        for (int tries = 0; tries < M && !(best > T(0.5)); ++tries) {
          const int candidate = (j + tries) % M;  // e_j first: for a zero matrix, U = I
          T n2 = T(1);  // |e_c - sum_i (x_i . e_c) x_i|^2 = 1 - sum_i x_i[c]^2 for orthonormal x_i
          TESSEL_UNROLL
          for (int i = 0; i < N; ++i) {
            if (!finished(i)) continue;
            T xc = T(0);
            TESSEL_UNROLL
            for (int k = 0; k < M; ++k) xc = k == candidate ? x[k + i * M] : xc;
            n2 -= xc * xc;
          }
          if (n2 > best) {
            best = n2;
            best_candidate = candidate;
          }
        }
        T col[M];
        TESSEL_UNROLL
        for (int k = 0; k < M; ++k) col[k] = k == best_candidate ? T(1) : T(0);
        for (int pass = 0; pass < 2; ++pass) {
          TESSEL_UNROLL
          for (int i = 0; i < N; ++i) {
            if (!finished(i)) continue;
            T dot = T(0);
            TESSEL_UNROLL
            for (int k = 0; k < M; ++k) dot += x[k + i * M] * col[k];
            TESSEL_UNROLL
            for (int k = 0; k < M; ++k) col[k] -= dot * x[k + i * M];
          }
        }
        T n2 = T(0);
        TESSEL_UNROLL
        for (int k = 0; k < M; ++k) n2 += col[k] * col[k];
        const T r = T(1) / sqrt_of(n2);
        TESSEL_UNROLL
        for (int k = 0; k < M; ++k) x[k + j * M] = col[k] * r;
      }
    }
    // Descending order by rank (ties by index).
    const T nan = quiet_nan_of<T>();
    TESSEL_UNROLL
    for (int i = 0; i < N; ++i) {
      int rank = 0;
      TESSEL_UNROLL
      for (int j = 0; j < N; ++j) rank += (sigma[j] > sigma[i] || (sigma[j] == sigma[i] && j < i)) ? 1 : 0;
      if (!finite) rank = i;
      s[b * N + rank] = finite ? ldexp(sigma[i], exponent) : nan;
      if (vectors) {
        TESSEL_UNROLL
        for (int k = 0; k < M; ++k) u[b * M * N + k + rank * M] = finite ? x[k + i * M] : nan;
        // Vh(rank, k) = V(k, i); Vh is N x N column-major.
        TESSEL_UNROLL
        for (int k = 0; k < N; ++k) vh[b * N * N + rank + k * N] = finite ? v[k + i * N] : nan;
      }
    }
  }
}

}  // namespace tessel_linalg_small
