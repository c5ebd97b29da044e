#pragma once
// tessel's batched small-matrix kernels, compiled at run time by NVRTC and specialized on the
// matrix order (src/backend/cuda/linalg_small.cpp builds the requests; the dispatcher in
// linalg.cpp chooses them over cuSOLVER by its tuning table). One matrix per thread, held in
// registers (except gauss_jordan_inv: a group of lanes per matrix, a row per lane; and the team
// kernels at the end: jacobi_svd_block, a warp or a block per matrix in shared memory, and
// jacobi_eigh_warp, a group of lanes per matrix, a column per lane; their host build in
// tests/cpp/ops/linalg_small_host_test.cpp defines TESSEL_SMALL_HOST_TEAMS and emulates the
// barriers, shuffles and votes): every loop over matrix indices has compile-time bounds and is
// unrolled, so indices are constants and the arrays stay in registers (row swaps and sorts use
// selects, not dynamic indexing). Matrices are column-major, one after another (the layout of
// backend/linalg.hpp), except the eigh kernels': row-major, the caller's C order.
// Real float and double only; complex batches go to cuSOLVER.
//
// Iterative kernels (Jacobi eigh and SVD, tridiagonal QR eigh) stop after max_sweeps sweeps or
// max_iterations QR steps; NaN or Inf input never iterates: its results are NaN and its info 0,
// as the CPU backend's.

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

// ---- Cholesky: the factor replaces the `Upper` triangle; info = order of the failing minor ----
template <class T, int N, bool Upper>
__global__ void cholesky(T* __restrict__ a, int* __restrict__ info, long long batch) {
  TESSEL_FOR_EACH_MATRIX(b, batch) {
    T* m = a + b * N * N;
    T l[N * N];  // l[i + j * N] = L(i, j), i >= j; read from the chosen triangle
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j)
      TESSEL_UNROLL
      for (int i = j; i < N; ++i) l[i + j * N] = Upper ? m[j + i * N] : m[i + j * N];
    int failed = 0;
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j) {
      T d = l[j + j * N];
      TESSEL_UNROLL
      for (int k = 0; k < j; ++k) d -= l[j + k * N] * l[j + k * N];
      if (!(d > T(0)) && failed == 0) failed = j + 1;  // also NaN
      const T r = sqrt_of(d);
      l[j + j * N] = r;
      TESSEL_UNROLL
      for (int i = j + 1; i < N; ++i) {
        T s = l[i + j * N];
        TESSEL_UNROLL
        for (int k = 0; k < j; ++k) s -= l[i + k * N] * l[j + k * N];
        l[i + j * N] = s / r;
      }
    }
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j)
      TESSEL_UNROLL
      for (int i = j; i < N; ++i) {
        if (Upper) m[j + i * N] = l[i + j * N];
        else m[i + j * N] = l[i + j * N];
      }
    info[b] = failed;
  }
}

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

// Lanes per matrix of the group kernels (gauss_jordan_inv, jacobi_eigh_warp): N rounded up to a
// power of two.
template <int N>
struct GroupWidth {
  static constexpr int value = N <= 1 ? 1 : N <= 2 ? 2 : N <= 4 ? 4 : N <= 8 ? 8 : N <= 16 ? 16 : 32;
};

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
// traffic in the sweeps (20,000 matrices of order 32 in float64: 4.0 ms on the H100, where
// syevjBatched takes 11.6 ms).
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

#undef TESSEL_FOR_EACH_MATRIX

}  // namespace tessel_linalg_small

#undef TESSEL_SMALL
#undef TESSEL_UNROLL
