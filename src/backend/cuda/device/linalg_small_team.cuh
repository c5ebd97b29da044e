#pragma once
// The team kernels: a warp or a block per matrix in shared memory (jacobi_svd_block), a group
// of lanes per matrix (jacobi_eigh_warp).
// Included through linalg_small.cuh, which undefines the helper macros at its end.
#include "linalg_small_common.cuh"

namespace tessel_linalg_small {

#if defined(__CUDACC_RTC__) || defined(__CUDACC__) || defined(TESSEL_SMALL_HOST_TEAMS)
// ---- block kernels: a team of threads per matrix, the matrix in dynamic shared memory ----
// jacobi_svd_block, for orders above the one-matrix-per-thread kernel (n > 16; linalg_small.cpp
// chooses Team by the order), and jacobi_eigh_warp (a group of lanes per matrix, n <= 32).
// Team == 32: a warp per matrix, blockDim / 32 matrices per block, synchronized by __syncwarp;
// otherwise Team == blockDim: one matrix per block. Each team's shared memory is
// `team_bytes` (linalg_small.cpp's block_kernel_bytes, the layouts below). The batch loop is
// uniform per team.
//
// Parallel cyclic Jacobi in the round-robin (circle method) order: the order is padded to even
// Ne (an odd order's extra index pairs with nothing: its rotation is the identity); in round r of
// the Ne - 1 rounds of a sweep, pair k is (rr_p, rr_q) below, every pair of indices once per
// sweep and Ne / 2 disjoint pairs per round, which are rotated at the same time.
// Non-finite input (NaN or Inf anywhere in the read part) is found before any sweep: every output
// is NaN and info is 0. A sweep that rotates nothing ends the iteration (info 0); the sweep cap
// ends it otherwise (info 1).
TESSEL_SMALL int rr_p(int k, int r, int ne) { return k == 0 ? 0 : 1 + (k - 1 + r) % (ne - 1); }
TESSEL_SMALL int rr_q(int k, int r, int ne) { return 1 + (ne - 2 - k + r) % (ne - 1); }

// Whether (a, i) sorts before (b, j): by value, ties by index.
template <class T>
TESSEL_SMALL bool ranks_before(T a, int i, T b, int j, bool descending) {
  return (descending ? a > b : a < b) || (a == b && i < j);
}

template <int Team>
TESSEL_SMALL void team_sync() {
  if (Team == 32) __syncwarp();
  else __syncthreads();
}
// Whether pred holds on any thread of the team; a barrier for the team.
template <int Team>
TESSEL_SMALL bool team_any(bool pred) {
  if (Team == 32) {
    __syncwarp();
    return __any_sync(0xffffffffu, pred) != 0;
  }
  return __syncthreads_or(pred) != 0;
}
template <class T>
TESSEL_SMALL T warp_sum(T v) {
  TESSEL_UNROLL
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// The team's sum (Max: NaN-propagating maximum) of v, on every thread; scratch: Team / 32 values.
template <class T, int Team, bool Max>
TESSEL_SMALL T team_reduce(T v, T* scratch) {
  TESSEL_UNROLL
  for (int o = 16; o > 0; o /= 2) {
    const T other = __shfl_xor_sync(0xffffffffu, v, o);
    v = Max ? nan_max(v, other) : v + other;
  }
  if (Team == 32) return v;
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < Team / 32; ++w) r = Max ? nan_max(r, scratch[w]) : r + scratch[w];
  __syncthreads();
  return r;
}

// Dynamic shared memory, 16-byte aligned (the teams' parts are multiples of 16 bytes).
#define TESSEL_TEAM_SHARED(bytes_per_team) \
  extern __shared__ __align__(16) unsigned char tessel_small_shared[];  \
  unsigned char* team_shared = tessel_small_shared + (threadIdx.x / Team) * (bytes_per_team)

// ---- one-sided Jacobi SVD (Hestenes), a team per matrix, M >= N, real ----
// The contract of jacobi_svd. Each warp of the team takes whole pairs of a round: its lanes hold
// the pair's two columns (M / 32 rows each, in registers), form the three dot products by
// butterflies (every lane gets the same sums) and write the rotated columns back. A pair is
// rotated when |x_p . x_q| > sqrt(M) eps |x_p| |x_q| (LAPACK's gesvj tolerance: a dot product of
// M terms carries about sqrt(M) eps of rounding, so a tighter test could rotate rounding noise
// forever). The matrix is scaled by a power of two (exact) so that max|a| is in [0.5, 1): the
// sums of squares cannot overflow. Shared memory per team: X (M x N), V (N x N, leading
// dimension N | 1) when `vectors`, the singular values and reduction scratch, the ranks and
// completion flags:
//   T[M N + (vectors ? N (N | 1) : 0) + N + 32], then int[2 N].
// U's columns are X's normalized; the columns of a zero singular value are completed with unit
// vectors orthogonalized against the others.
template <class T, int M, int N, int Team>
__global__ void jacobi_svd_block(const T* __restrict__ a, T* __restrict__ s, T* __restrict__ u, T* __restrict__ vh,
                                 int vectors, int max_sweeps, int* __restrict__ info, long long batch,
                                 long long team_bytes) {
  static_assert(M >= N, "jacobi_svd_block: tall or square matrices (wide ones come transposed)");
  constexpr int Ne = N + (N & 1), H = Ne / 2, ldv = N | 1, R = (M + 31) / 32;
  TESSEL_TEAM_SHARED(team_bytes);
  T* X = reinterpret_cast<T*>(team_shared);
  T* V = X + M * N;
  T* sigma = V + (vectors ? N * ldv : 0);
  T* scratch = sigma + N;
  int* rank = reinterpret_cast<int*>(scratch + 32);
  int* good = rank + N;
  const int teams = blockDim.x / Team, lane = threadIdx.x % Team;
  const int warp = lane / 32, wl = lane % 32;
  constexpr int warps = Team / 32;
  for (long long b = blockIdx.x * static_cast<long long>(teams) + threadIdx.x / Team; b < batch;
       b += static_cast<long long>(gridDim.x) * teams) {
    const T* m = a + b * M * N;
    T amax = T(0);
    for (int e = lane; e < M * N; e += Team) {
      const T x = m[e];
      X[e] = x;
      amax = nan_max(amax, abs_of(x));
    }
    if (vectors) {
      for (int e = lane; e < N * ldv; e += Team) V[e] = e % ldv == e / ldv ? T(1) : T(0);
    }
    amax = team_reduce<T, Team, true>(amax, scratch);
    const bool finite = finite_of(amax);
    const int exponent = scale_exponent(amax);
    const T scale = ldexp(T(1), -exponent);
    for (int e = lane; e < M * N; e += Team) X[e] *= scale;
    team_sync<Team>();
    const T tol = sqrt_of(T(M)) * epsilon<T>();
    int converged = 0;
    for (int sweep = 0; finite && sweep < max_sweeps; ++sweep) {
      bool rotated = false;
      for (int r = 0; r < Ne - 1; ++r) {
        for (int k = warp; k < H; k += warps) {  // uniform per warp
          const int p = rr_p(k, r, Ne), q = rr_q(k, r, Ne);
          if (p >= N || q >= N) continue;
          T xp[R], xq[R];
          T alpha = T(0), beta = T(0), gamma = T(0);
          TESSEL_UNROLL
          for (int j = 0; j < R; ++j) {
            const int i = wl + 32 * j;
            xp[j] = i < M ? X[i + p * M] : T(0);
            xq[j] = i < M ? X[i + q * M] : T(0);
            alpha += xp[j] * xp[j];
            beta += xq[j] * xq[j];
            gamma += xp[j] * xq[j];
          }
          alpha = warp_sum(alpha);
          beta = warp_sum(beta);
          gamma = warp_sum(gamma);
          if (!(abs_of(gamma) > tol * sqrt_of(alpha) * sqrt_of(beta))) continue;
          rotated = true;
          T c, sn, t;
          jacobi_rotation(alpha, beta, gamma, c, sn, t);
          TESSEL_UNROLL
          for (int j = 0; j < R; ++j) {
            const int i = wl + 32 * j;
            if (i < M) {
              X[i + p * M] = c * xp[j] - sn * xq[j];
              X[i + q * M] = sn * xp[j] + c * xq[j];
            }
          }
          if (vectors) {
            for (int i = wl; i < N; i += 32) rotate_pair(V[i + p * ldv], V[i + q * ldv], c, sn);
          }
        }
        team_sync<Team>();
      }
      if (!team_any<Team>(rotated)) {
        converged = 1;
        break;
      }
    }
    // The singular values: the columns' norms, a warp per column.
    for (int j = warp; j < N; j += warps) {
      T n2 = T(0);
      for (int i = wl; i < M; i += 32) n2 += X[i + j * M] * X[i + j * M];
      n2 = warp_sum(n2);
      if (wl == 0) sigma[j] = sqrt_of(n2);
    }
    team_sync<Team>();
    const T nan = quiet_nan_of<T>();
    for (int j = lane; j < N; j += Team) {
      const T sj = sigma[j];
      int rk = 0;
      if (finite) {
        for (int i = 0; i < N; ++i) rk += ranks_before(sigma[i], i, sj, j, true) ? 1 : 0;
      } else {
        rk = j;
      }
      rank[j] = rk;
      good[j] = sj > T(0) ? 1 : 0;
      s[b * N + rk] = finite ? ldexp(sj, exponent) : nan;
    }
    if (vectors) {
      team_sync<Team>();
      for (int e = lane; e < M * N; e += Team) {
        const T sj = sigma[e / M];
        if (sj > T(0)) X[e] /= sj;
      }
      team_sync<Team>();
      // Complete the columns of zero singular values (uniform loops): the unit vector e_c with
      // the largest part orthogonal to the finished columns (the first above 1/2; at least 1/M
      // of it is), orthogonalized twice (classical Gram-Schmidt; the dot products in sigma,
      // whose values are written out already).
      for (int j = 0; finite && j < N; ++j) {
        if (good[j]) continue;
        T best = T(-1);
        int best_cand = 0;
        for (int tries = 0; tries < M && !(best > T(0.5)); ++tries) {
          const int cand = (j + tries) % M;  // e_j first: for a zero matrix, U = I
          T n2 = T(0);
          for (int i = lane; i < M; i += Team) {
            T v = i == cand ? T(1) : T(0);
            for (int g = 0; g < N; ++g) {
              if (good[g]) v -= X[cand + g * M] * X[i + g * M];
            }
            n2 += v * v;
          }
          n2 = team_reduce<T, Team, false>(n2, scratch);
          if (n2 > best) {
            best = n2;
            best_cand = cand;
          }
        }
        for (int i = lane; i < M; i += Team) X[i + j * M] = i == best_cand ? T(1) : T(0);
        for (int pass = 0; pass < 2; ++pass) {
          team_sync<Team>();
          for (int g = lane; g < N; g += Team) {
            T d = T(0);
            if (good[g]) {
              for (int i = 0; i < M; ++i) d += X[i + g * M] * X[i + j * M];
            }
            sigma[g] = d;
          }
          team_sync<Team>();
          for (int i = lane; i < M; i += Team) {
            T v = X[i + j * M];
            for (int g = 0; g < N; ++g) v -= sigma[g] * X[i + g * M];
            X[i + j * M] = v;
          }
        }
        T n2 = T(0);
        for (int i = lane; i < M; i += Team) n2 += X[i + j * M] * X[i + j * M];
        n2 = team_reduce<T, Team, false>(n2, scratch);
        const T inv = T(1) / sqrt_of(n2);
        for (int i = lane; i < M; i += Team) X[i + j * M] *= inv;
        team_sync<Team>();
        if (lane == 0) good[j] = 1;
        team_sync<Team>();
      }
      for (int e = lane; e < M * N; e += Team) {
        const int j = e / M, i = e % M;
        u[b * M * N + i + rank[j] * M] = finite ? X[e] : nan;
      }
      for (int e = lane; e < N * N; e += Team) {  // Vh(rank_j, k) = V(k, j)
        const int j = e % N, k = e / N;
        vh[b * N * N + rank[j] + k * N] = finite ? V[k + j * ldv] : nan;
      }
    }
    if (lane == 0) info[b] = converged || !finite ? 0 : 1;  // non-finite input: NaN results, info 0
    team_sync<Team>();
  }
}

// ---- Jacobi eigh, a group of lanes per matrix: one-sided Jacobi on the shifted matrix ----
// The contract of jacobi_eigh (row-major matrices, the lower triangle read; v may be a), for
// N <= 32. W lanes per matrix (N rounded up to a power of two),
// 32 / W matrices per warp. Lane j < N of a group keeps column j of B = A 2^-e + sigma I in
// registers: 2^e scales max|a| into [0.5, 1) (exact), and sigma = 1.5 max_j sum_i |a_ij| puts B's
// eigenvalues in [sigma / 3, 5 sigma / 3], so B is positive definite and well conditioned. The
// one-sided (Hestenes) Jacobi method makes B's columns orthogonal: B V has orthogonal columns
// exactly when V's are eigenvectors of B^2, which for a positive definite B are B's, and A's;
// then column j of B V is mu_j v_j with mu_j > 0. So no V is accumulated: each final column,
// normalized, is an eigenvector, and its Rayleigh quotient with the staged A the eigenvalue
// (exact to the eigenvector's error squared, in A's own scale). In round r = 1 .. W - 1 of a
// sweep, lane j pairs with lane j ^ r (every pair once per sweep), gets the partner's column by
// shuffles, and both lanes form the same dot product (the same products, added in the same
// order) and so the same rotation. A pair rotates when |b_p . b_q| > sqrt(N) eps |b_p| |b_q|
// (jacobi_svd's test). B, in registers, is the only state: no V update and no shared-memory
// traffic in the sweeps (faster than syevjBatched at order 32: linalg_grid in bench/results).
// Shared memory per warp: the 32 / W matrices as read, N x N row-major with leading dimension
// N + 1 (the coalesced load and store go through it; the Rayleigh quotients read it):
//   T[(32 / W) N (N + 1)].
template <int W, class T>
TESSEL_SMALL T group_max(T v) {  // NaN wins
  TESSEL_UNROLL
  for (int o = W / 2; o > 0; o /= 2) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <int W>
TESSEL_SMALL int group_or(int v) {
  TESSEL_UNROLL
  for (int o = W / 2; o > 0; o /= 2) v |= __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T, int N>
__global__ void jacobi_eigh_warp(const T* a, T* v, T* __restrict__ w, int vectors, int max_sweeps,
                                 int* __restrict__ info, long long batch, long long team_bytes) {
  static_assert(N >= 1 && N <= 32, "jacobi_eigh_warp: a lane per column, N <= 32");
  constexpr int Team = 32, W = GroupWidth<N>::value, G = 32 / W, ld = N + 1;
  TESSEL_TEAM_SHARED(team_bytes);
  const int lane = threadIdx.x % 32, j = lane % W;
  T* S = reinterpret_cast<T*>(team_shared) + (lane / W) * N * ld;
  const int warps = blockDim.x / 32;
  const long long stride = static_cast<long long>(gridDim.x) * warps * G;
  const T nan = quiet_nan_of<T>();
  for (long long base = (blockIdx.x * static_cast<long long>(warps) + threadIdx.x / 32) * G; base < batch;
       base += stride) {  // uniform per warp
    const long long b = base + lane / W;
    const bool active = b < batch, owner = active && j < N;
    const long long offset = (active ? b : 0) * N * N;
    if (active) {
      for (int e = j; e < N * N; e += W) S[e % N + (e / N) * ld] = a[offset + e];  // (i, k) at k + i * ld
    }
    __syncwarp();
    T x[N];
    T amax = T(0);
    TESSEL_UNROLL
    for (int i = 0; i < N; ++i) {
      x[i] = T(0);
      if (owner) x[i] = i >= j ? S[j + i * ld] : S[i + j * ld];  // the lower triangle: (max, min)
      amax = nan_max(amax, abs_of(x[i]));
    }
    amax = group_max<W>(amax);
    const bool finite = finite_of(amax);
    T colsum = T(0);
    const T scale = ldexp(T(1), -scale_exponent(amax));
    TESSEL_UNROLL
    for (int i = 0; i < N; ++i) {
      x[i] *= scale;
      colsum += abs_of(x[i]);
    }
    if (!finite) {
      TESSEL_UNROLL
      for (int i = 0; i < N; ++i) x[i] = T(0);
    }
    colsum = group_max<W>(colsum);
    const T sigma = colsum > T(0) ? T(1.5) * colsum : T(1);  // a zero matrix: B = I
    TESSEL_UNROLL
    for (int i = 0; i < N; ++i) {
      if (owner && i == j) x[i] += sigma;
    }
    const T tol2 = T(N) * epsilon<T>() * epsilon<T>();  // the test squared: no square roots in the rounds
    int rotated = 0;
    // Within a sweep the lane's column is b_j = d x_j: a rotation b_p <- c (b_p - t b_q),
    // b_q <- c (b_q + t b_p) is one multiply-add per entry on x with the scale c folded into d
    // (d_p <- c d_p), instead of two; d only shrinks by c >= 1 / sqrt(2) a rotation, and each
    // sweep starts from d = 1. nrm is |b_j|^2 (Rutishauser's update in the rounds).
    for (int sweep = 0; sweep < max_sweeps; ++sweep) {
      T nrm = T(0);
      TESSEL_UNROLL
      for (int i = 0; i < N; ++i) nrm += x[i] * x[i];
      T d = T(1);
      rotated = 0;
      for (int r = 1; r < W; ++r) {
        T y[N];
        T g0 = T(0), g1 = T(0), g2 = T(0), g3 = T(0);  // four chains: the products' latency
        TESSEL_UNROLL
        for (int i = 0; i < N; ++i) {
          y[i] = __shfl_xor_sync(0xffffffffu, x[i], r);
          if (i % 4 == 0) g0 += x[i] * y[i];
          if (i % 4 == 1) g1 += x[i] * y[i];
          if (i % 4 == 2) g2 += x[i] * y[i];
          if (i % 4 == 3) g3 += x[i] * y[i];
        }
        const T dq = __shfl_xor_sync(0xffffffffu, d, r);  // the partner's scale
        const T gamma = ((g0 + g1) + (g2 + g3)) * (d * dq);  // b_p . b_q, the same on both lanes
        const T other = __shfl_xor_sync(0xffffffffu, nrm, r);
        const bool low = j < (j ^ r);  // the pair's p; its partner is q
        const T alpha = low ? nrm : other, beta = low ? other : nrm;
        if (gamma * gamma > tol2 * alpha * beta) {
          T c, s, t;
          jacobi_rotation_fast(alpha, beta, gamma, c, s, t);
          const T f = (low ? -t : t) * dq / d;  // p: x_p - t (d_q / d_p) x_q; q: x_q + t (d_p / d_q) x_p
          TESSEL_UNROLL
          for (int i = 0; i < N; ++i) x[i] += f * y[i];
          d *= c;
          nrm = low ? alpha - t * gamma : beta + t * gamma;
          rotated = 1;
        }
      }
      TESSEL_UNROLL
      for (int i = 0; i < N; ++i) x[i] *= d;  // b = d x: the next sweep starts from d = 1
      if (!__any_sync(0xffffffffu, rotated)) break;
    }
    const int unconverged = group_or<W>(rotated);
    // v_j = b_j / |b_j|, lambda_j = v_j^T A v_j over the staged lower triangle.
    T nrm = T(0);
    TESSEL_UNROLL
    for (int i = 0; i < N; ++i) nrm += x[i] * x[i];
    const T inv = owner ? T(1) / sqrt_of(nrm) : T(0);
    TESSEL_UNROLL
    for (int i = 0; i < N; ++i) x[i] *= inv;
    T lambda = T(0);
    if (owner && finite) {
      TESSEL_UNROLL
      for (int i = 0; i < N; ++i) {
        T off = T(0);
        TESSEL_UNROLL
        for (int k = 0; k < i; ++k) off += S[k + i * ld] * x[k];  // (i, k), i > k
        lambda += (S[i + i * ld] * x[i] + T(2) * off) * x[i];
      }
    }
    // Ascending order: the rank among the group's N eigenvalues (ties by index).
    int rank = 0;
    for (int r = 1; r < W; ++r) {
      const T o = __shfl_xor_sync(0xffffffffu, lambda, r);
      const int k = j ^ r;
      rank += (k < N && ranks_before(o, k, lambda, j, false)) ? 1 : 0;
    }
    if (!finite) rank = j;
    if (owner) w[b * N + rank] = finite ? lambda : nan;
    if (vectors) {
      __syncwarp();  // the Rayleigh quotients have read S
      if (owner) {
        TESSEL_UNROLL
        for (int i = 0; i < N; ++i) S[rank + i * ld] = finite ? x[i] : nan;  // (i, rank)
      }
      __syncwarp();
      if (active) {
        for (int e = j; e < N * N; e += W) v[offset + e] = S[e % N + (e / N) * ld];
      }
    }
    if (active && j == 0) info[b] = !finite || !unconverged ? 0 : 1;  // non-finite: NaN results, info 0
    __syncwarp();  // before the next matrices' load reuses S
  }
}

#undef TESSEL_TEAM_SHARED
#endif

}  // namespace tessel_linalg_small
