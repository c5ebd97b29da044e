#pragma once
// eigh by Householder tridiagonalization and implicit QR, one matrix per thread.
// Included through linalg_small.cuh, which undefines the helper macros at its end.
#include "linalg_small_common.cuh"

namespace tessel_linalg_small {

// ---- tridiagonal QR eigh (real symmetric, lower triangle read) ----
// The contract of jacobi_eigh, by Householder tridiagonalization and implicit QR. The matrix,
// scaled by a power of two as there, becomes T = Q^T A Q (diagonal d, subdiagonal e) through
// N - 2 reflections H_k = I - beta_k u_k u_k^T, each a symmetric rank-2 update of the lower
// triangle; Q = H_0 H_1 ... H_{N-3} is formed from the right end, where each H_k meets a product
// that is still the identity outside its trailing block. Implicit QR steps with Wilkinson's shift
// then diagonalize T, each rotation also applied to the columns of Q. A step works on the lowest
// unreduced block [l, m] of T (so eigenvalues deflate from the bottom and the block shrinks); l
// and m are run-time values that only predicate the N - 1 rotation slots of the unrolled chase,
// so every register index is a constant. A warp runs a slot when any of its lanes needs it: the
// lanes of a warp step together, each on its own block, and the warp pays about the largest
// block of the step (a loop per block size, each lane waiting at its own, cost a third more in
// slots on random 8 x 8 matrices). e_j is negligible, and set to zero, when
// |e_j| <= eps (|d_j| + |d_j+1|) + eps^2: a scaled matrix has norm >= 0.5, so an eps^2 entry is
// far below the backward error, and the squares in the rotations and shifts of the others
// cannot underflow. max_iterations QR steps in all, then info 1 (NaN or Inf input runs none:
// every output NaN, info 1).

// Sums of squares below this are of entries far under eps of a scaled matrix: their rotation or
// reflection is the identity, the entries dropped.
template <class T>
TESSEL_SMALL T tiny_square();
template <>
TESSEL_SMALL float tiny_square<float>() { return 7.8886091e-31f; }  // 2^-100
template <>
TESSEL_SMALL double tiny_square<double>() { return 1.1794294e-271; }  // 2^-900

// The hardware estimates without the subnormal handling of fast_rcp and fast_rsqrt (one
// instruction instead of five in float), for arguments that are normal or whose result is not used.
TESSEL_SMALL float rcp_ftz(float x) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return fast_rcp(x);
#endif
}
TESSEL_SMALL double rcp_ftz(double x) { return fast_rcp(x); }
TESSEL_SMALL float rsqrt_ftz(float x) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return fast_rsqrt(x);
#endif
}
TESSEL_SMALL double rsqrt_ftz(double x) { return fast_rsqrt(x); }

// 1 / sqrt(h) from the estimate and one Newton step (about an ulp: the rotations and reflections
// built from it stay orthogonal to that).
template <class T>
TESSEL_SMALL T refined_rsqrt(T h) {
  const T y = rsqrt_ftz(h);
  return y * (T(1.5) - T(0.5) * h * y * y);
}

// The rotation with c x + s z = r, c z - s x = 0, r = sqrt(x^2 + z^2) (the identity, z dropped,
// for a tiny x^2 + z^2).
template <class T>
TESSEL_SMALL void givens_of(T x, T z, T& c, T& s, T& r) {
  const T h = x * x + z * z;
  const T q = refined_rsqrt(h);
  const bool tiny = !(h >= tiny_square<T>());
  c = tiny ? T(1) : x * q;
  s = tiny ? T(0) : z * q;
  r = tiny ? x : h * q;
}

template <class T, int N>
TESSEL_SMALL T& lower_of(T (&s)[N * N], int i, int j) {  // i, j compile-time after unrolling
  return i >= j ? s[i * N + j] : s[j * N + i];
}

// One matrix: m (read, the row-major input), wb its N eigenvalues, vb its vectors (may be m);
// returns info.
template <class T, int N>
TESSEL_SMALL int tridiagonal_eigh_one(const T* m, T* wb, T* vb, int vectors, int max_iterations) {
  constexpr int E = N > 1 ? N - 1 : 1;
  T s[N * N];  // the lower triangle, (i, j) at i * N + j; the other entries take no registers
  T amax = T(0);
  TESSEL_UNROLL
  for (int i = 0; i < N; ++i)
    TESSEL_UNROLL
    for (int j = 0; j <= i; ++j) {
      s[i * N + j] = m[i * N + j];
      amax = nan_max(amax, abs_of(s[i * N + j]));
    }
  const bool finite = finite_of(amax);
  const int exponent = scale_exponent(amax);
  const T scale = ldexp(T(1), -exponent);
  TESSEL_UNROLL
  for (int i = 0; i < N; ++i)
    TESSEL_UNROLL
    for (int j = 0; j <= i; ++j) s[i * N + j] *= scale;
  // Reflection k maps column k below the diagonal, x, to alpha e_{k+1}: u = x - alpha e_{k+1},
  // alpha = -sign(x_{k+1}) |x| (no cancellation), beta = 2 / u^T u. u stays in the column (its
  // first entry in s(k + 1, k)) for forming Q.
  T d[N], e[E], beta[E];
  TESSEL_UNROLL
  for (int k = 0; k + 2 < N; ++k) {
    T sigma = T(0);
    TESSEL_UNROLL
    for (int i = k + 2; i < N; ++i) sigma += s[i * N + k] * s[i * N + k];
    const T x0 = s[(k + 1) * N + k];
    const T h = x0 * x0 + sigma;
    const T norm = h * refined_rsqrt(h);
    const bool reflect = sigma >= tiny_square<T>();  // else the column is reduced already
    T u[N];
    u[k + 1] = reflect ? x0 + (x0 >= T(0) ? norm : -norm) : T(0);
    TESSEL_UNROLL
    for (int i = k + 2; i < N; ++i) u[i] = s[i * N + k];
    const T uu = u[k + 1] * u[k + 1] + sigma;
    T b = rcp_ftz(uu);
    b = b * (T(2) - uu * b);  // Newton: H stays orthogonal to about an ulp
    b = reflect ? T(2) * b : T(0);
    // The trailing block A22 -= u w^T + w u^T, w = p - (beta / 2) (u^T p) u, p = beta A22 u.
    T p[N];
    T up = T(0);
    TESSEL_UNROLL
    for (int i = k + 1; i < N; ++i) {
      T acc = T(0);
      TESSEL_UNROLL
      for (int j = k + 1; j < N; ++j) acc += lower_of<T, N>(s, i, j) * u[j];
      p[i] = b * acc;
      up += u[i] * p[i];
    }
    const T half = T(0.5) * b * up;
    TESSEL_UNROLL
    for (int i = k + 1; i < N; ++i) p[i] -= half * u[i];
    TESSEL_UNROLL
    for (int i = k + 1; i < N; ++i)
      TESSEL_UNROLL
      for (int j = k + 1; j <= i; ++j) s[i * N + j] -= u[i] * p[j] + p[i] * u[j];
    d[k] = s[k * N + k];
    e[k] = reflect ? (x0 >= T(0) ? -norm : norm) : x0;
    beta[k] = b;
    s[(k + 1) * N + k] = u[k + 1];
  }
  if constexpr (N >= 2) {
    d[N - 2] = s[(N - 2) * N + N - 2];
    e[N - 2] = s[(N - 1) * N + N - 2];
  }
  d[N - 1] = s[(N - 1) * N + N - 1];
  T v[N * N];  // (i, j) at i * N + j: Q, then the eigenvectors
  TESSEL_UNROLL
  for (int x = 0; x < N * N; ++x) v[x] = (x % (N + 1) == 0) ? T(1) : T(0);
  if (vectors) {
    // v <- H_k v for k = N - 3 down to 0: v is the identity in row and column k + 1 so far.
    TESSEL_UNROLL
    for (int k = N - 3; k >= 0; --k) {
      const T b = beta[k], u0 = s[(k + 1) * N + k];
      T g[N];  // beta u^T v, columns k + 2 on
      TESSEL_UNROLL
      for (int j = k + 2; j < N; ++j) {
        T acc = T(0);
        TESSEL_UNROLL
        for (int i = k + 2; i < N; ++i) acc += s[i * N + k] * v[i * N + j];
        g[j] = b * acc;
      }
      const T g0 = b * u0;
      v[(k + 1) * N + k + 1] = T(1) - g0 * u0;
      TESSEL_UNROLL
      for (int j = k + 2; j < N; ++j) v[(k + 1) * N + j] = -u0 * g[j];
      TESSEL_UNROLL
      for (int i = k + 2; i < N; ++i) {
        const T ui = s[i * N + k];
        v[i * N + k + 1] = -ui * g0;
        TESSEL_UNROLL
        for (int j = k + 2; j < N; ++j) v[i * N + j] -= ui * g[j];
      }
    }
  }
  const T eps = epsilon<T>();
  int iterations = 0;
  bool converged = finite;
  while (converged) {
    // The lowest unreduced block [l, m] (m = 0: T is diagonal) and its trailing 2 x 2 (a, b; b, c),
    // in one pass from the top: `top` is the row below the last negligible entry so far.
    int l = 0, m = 0, top = 0;
    T a = T(0), c = T(0), b = T(0);
    TESSEL_UNROLL
    for (int j = 0; j + 1 < N; ++j) {
      const bool keep = abs_of(e[j]) > eps * (abs_of(d[j]) + abs_of(d[j + 1])) + eps * eps;
      e[j] = keep ? e[j] : T(0);
      top = keep ? top : j + 1;
      l = keep ? top : l;
      m = keep ? j + 1 : m;
      a = keep ? d[j] : a;
      c = keep ? d[j + 1] : c;
      b = keep ? e[j] : b;
    }
    if (m == 0) break;
    if (iterations >= max_iterations) converged = false;
    if (!converged) break;
    ++iterations;
    // The shift: the eigenvalue of the trailing 2 x 2 nearer to d[m].
    const T delta = T(0.5) * (a - c);
    const T b2 = b * b;
    const T q = delta * delta + b2;
    const T root = q * rsqrt_ftz(q);
    const T mu = c - b2 * rcp_ftz(delta + (delta >= T(0) ? root : -root));
    // The chase: rotation k (rows and columns k, k + 1) zeroes the bulge at (k + 1, k - 1) that
    // rotation k - 1 made (the first one takes the shifted first column instead). Past the
    // block's bottom, e[m] is zero: the bulge and e[m] stay zero.
    T bulge = T(0);
    TESSEL_UNROLL
    for (int k = 0; k + 1 < N; ++k) {
      if (k < l || k >= m) continue;
      T x = d[k] - mu, z = e[k];
      if (k > 0) {
        x = k == l ? x : e[k - 1];
        z = k == l ? z : bulge;
      }
      T cs, sn, r;
      givens_of(x, z, cs, sn, r);
      if (k > 0) e[k - 1] = k == l ? e[k - 1] : r;
      const T dk = d[k], dk1 = d[k + 1], f = e[k];
      const T a1 = cs * dk + sn * f, a2 = cs * f + sn * dk1;  // row k of G^T T, columns k, k + 1
      const T top = cs * a1 + sn * a2;
      d[k] = top;
      d[k + 1] = (dk + dk1) - top;  // the trace is invariant
      e[k] = cs * a2 - sn * a1;
      if (k + 2 < N) {
        bulge = sn * e[k + 1];
        e[k + 1] *= cs;
      }
      if (vectors) {
        TESSEL_UNROLL
        for (int i = 0; i < N; ++i) rotate_pair(v[i * N + k], v[i * N + k + 1], cs, -sn);
      }
    }
  }
  if (!finite) {  // every output NaN, in place
    const T nan = quiet_nan_of<T>();
    TESSEL_UNROLL
    for (int i = 0; i < N; ++i) d[i] = nan;
    TESSEL_UNROLL
    for (int x = 0; x < N * N; ++x) v[x] = nan;
  }
  // Ascending order: each eigenvalue's rank (ties by index) is where it and its vector go. One
  // comparison a pair: d_j <= d_i (j < i) counts for i, its negation for j (all NaN: a
  // permutation still).
  int rank[N];
  TESSEL_UNROLL
  for (int i = 0; i < N; ++i) rank[i] = 0;
  TESSEL_UNROLL
  for (int i = 1; i < N; ++i)
    TESSEL_UNROLL
    for (int j = 0; j < i; ++j) {
      const bool before = d[j] <= d[i];
      rank[i] += before ? 1 : 0;
      rank[j] += before ? 0 : 1;
    }
  // 2^exponent in two exact factors (2^exponent alone may overflow).
  const T unscale_lo = ldexp(T(1), exponent / 2), unscale_hi = ldexp(T(1), exponent - exponent / 2);
  TESSEL_UNROLL
  for (int i = 0; i < N; ++i) {
    wb[rank[i]] = d[i] * unscale_lo * unscale_hi;
    if (vectors) {
      T* column = vb + rank[i];
      TESSEL_UNROLL
      for (int k = 0; k < N; ++k) column[k * N] = v[k * N + i];
    }
  }
  return converged || !finite ? 0 : 1;  // non-finite input: NaN results, info 0 (as the CPU's)
}

// Staged as jacobi_eigh, by the unrolled copies.
template <class T, int N>
__global__ void tridiagonal_eigh(const T* a, T* v, T* __restrict__ w, int vectors, int max_iterations,
                                 int* __restrict__ info, long long batch) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  if (StagedMatrices<T, N>::value && blockDim.x == kStagedBlock) {  // uniform: the loop is block-wide
    for_each_staged_matrix<T, N, true>(a, vectors ? v : static_cast<T*>(nullptr), batch, [&](T* slot, long long b) {
      info[b] = tridiagonal_eigh_one<T, N>(slot, w + b * N, slot, vectors, max_iterations);
    });
    return;
  }
#endif
  TESSEL_FOR_EACH_MATRIX(b, batch) {
    info[b] = tridiagonal_eigh_one<T, N>(a + b * N * N, w + b * N, v + b * N * N, vectors, max_iterations);
  }
}

}  // namespace tessel_linalg_small
