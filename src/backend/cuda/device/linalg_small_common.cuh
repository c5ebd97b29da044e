#pragma once
// The shared part of tessel's batched small-matrix kernels (linalg_small.cuh): the helper
// macros, scalar helpers, the batch loop, the group width of the lane-group kernels and the
// Jacobi rotations.

#define TESSEL_SMALL __device__ __forceinline__
// Full unrolling: the loop bounds are template constants. (A host build of these kernels, as in
// tests/cpp/ops/linalg_small_host_test.cpp, defines it empty.)
#ifndef TESSEL_UNROLL
#define TESSEL_UNROLL _Pragma("unroll")
#endif

namespace tessel_linalg_small {

TESSEL_SMALL float sqrt_of(float x) { return sqrtf(x); }
TESSEL_SMALL double sqrt_of(double x) { return sqrt(x); }
TESSEL_SMALL float abs_of(float x) { return fabsf(x); }
TESSEL_SMALL double abs_of(double x) { return fabs(x); }
template <class T>
TESSEL_SMALL T epsilon();
template <>
TESSEL_SMALL float epsilon<float>() { return 1.1920929e-07f; }
template <>
TESSEL_SMALL double epsilon<double>() { return 2.220446049250313e-16; }

template <class T>
TESSEL_SMALL T nan_max(T a, T b) {  // NaN wins
  return (a > b || a != a) ? a : b;
}
template <class T>
TESSEL_SMALL T quiet_nan_of() {
  return T(0) * (T(1) / T(0));
}
template <class T>
TESSEL_SMALL bool finite_of(T x) {
  return x - x == T(0);  // NaN - NaN and Inf - Inf are NaN
}
// The exponent e with max|a| 2^-e in [0.5, 1), 0 for a zero or non-finite max|a|: the Jacobi
// kernels scale a matrix by 2^-e (exact) so that sums of squares can neither overflow nor vanish.
template <class T>
TESSEL_SMALL int scale_exponent(T amax) {
  int e = 0;
  if (finite_of(amax) && amax > T(0)) frexp(amax, &e);
  return e;
}

// A grid-stride loop over matrices.
#define TESSEL_FOR_EACH_MATRIX(b, batch)                                                            \
  for (long long b = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; b < (batch); \
       b += static_cast<long long>(gridDim.x) * blockDim.x)

// Lanes per matrix of the group kernels (gauss_jordan_inv, jacobi_eigh_warp): N rounded up to a
// power of two.
template <int N>
struct GroupWidth {
  static constexpr int value = N <= 1 ? 1 : N <= 2 ? 2 : N <= 4 ? 4 : N <= 8 ? 8 : N <= 16 ? 16 : 32;
};

// The rotation (c, s) with t = s / c that zeroes the off-diagonal entry of the 2 x 2 symmetric
// problem [[alpha, gamma], [gamma, beta]] (Rutishauser's formulas).
// Above |zeta| = 1 / eps, 1 + zeta^2 rounds to zeta^2 (or overflows): t = 1 / (2 zeta), which
// still shrinks gamma (t = 0 would leave it, and the sweep would repeat until the cap).
template <class T>
TESSEL_SMALL void jacobi_rotation(T alpha, T beta, T gamma, T& c, T& s, T& t) {
  const T zeta = (beta - alpha) / (T(2) * gamma);
  const T az = abs_of(zeta);
  t = az > T(1) / epsilon<T>() ? T(0.5) / zeta : (zeta >= T(0) ? T(1) : T(-1)) / (az + sqrt_of(T(1) + zeta * zeta));
  c = T(1) / sqrt_of(T(1) + t * t);
  s = c * t;
}

// jacobi_rotation with the hardware's reciprocal and reciprocal square root estimates instead of
// correctly rounded divisions and square roots (three of each, about half of a rotation's
// instructions in the per-thread eigh). zeta and t need no correct rounding: a t a few ulps off
// leaves gamma a few ulps of its size, which the next sweep removes. c takes one Newton step
// after the estimate, so that c^2 + s^2 = 1 to about an ulp and the rotations stay orthogonal.
TESSEL_SMALL float fast_rcp(float x) { return __fdividef(1.0f, x); }
TESSEL_SMALL double fast_rcp(double x) { return 1.0 / x; }
TESSEL_SMALL float fast_rsqrt(float x) { return rsqrtf(x); }
TESSEL_SMALL double fast_rsqrt(double x) { return rsqrt(x); }
template <class T>
TESSEL_SMALL void jacobi_rotation_fast(T alpha, T beta, T gamma, T& c, T& s, T& t) {
  const T zeta = (beta - alpha) * fast_rcp(T(2) * gamma);
  const T az = abs_of(zeta);
  if (az > T(1) / epsilon<T>()) {  // 1 + zeta^2 would round to zeta^2 or overflow
    t = T(0.5) * fast_rcp(zeta);
  } else {
    const T q = T(1) + zeta * zeta;
    t = (zeta >= T(0) ? T(1) : T(-1)) * fast_rcp(az + q * fast_rsqrt(q));
  }
  const T h = T(1) + t * t;
  const T r = fast_rsqrt(h);
  c = r * (T(1.5) - T(0.5) * h * r * r);  // Newton
  s = c * t;
}

// The plane rotation of one pair: (x, y) becomes (c * x - s * y, s * x + c * y).
template <class T>
TESSEL_SMALL void rotate_pair(T& x, T& y, T c, T s) {
  const T t = c * x - s * y;
  y = s * x + c * y;
  x = t;
}

// Columns p and q of the Rows x Cols column-major x become c * x_p - s * x_q and s * x_p + c * x_q.
template <class T, int Rows, int Cols>
TESSEL_SMALL void rotate_columns(T (&x)[Rows * Cols], int p, int q, T c, T s) {
  TESSEL_UNROLL
  for (int k = 0; k < Rows; ++k) rotate_pair(x[k + p * Rows], x[k + q * Rows], c, s);
}

}  // namespace tessel_linalg_small
