// The math of tessel's small-matrix CUDA kernels (src/backend/cuda/device/linalg_small.cuh), run
// on the host: the header is plain C++ once the CUDA qualifiers and thread indices are defined
// away, one "thread" handling every matrix of the batch. The GPU runs the same source through
// NVRTC (linalg_test.cpp compiles it; the Python tests run it on CUDA).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace tessel_small_host {
struct Index3 {
  unsigned x = 0;
};
const Index3 blockIdx{0}, threadIdx{0}, blockDim{1}, gridDim{1};
inline float sqrtf(float x) { return std::sqrt(x); }
inline float fabsf(float x) { return std::fabs(x); }
using std::fabs;
using std::sqrt;
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define TESSEL_UNROLL
#include "backend/cuda/device/linalg_small.cuh"
#undef __device__
#undef __global__
#undef __forceinline__
#undef __restrict__
}  // namespace tessel_small_host

namespace {

using namespace tessel_small_host::tessel_linalg_small;
constexpr double kTol = 1e-12;

std::vector<double> normal(std::mt19937_64& rng, std::size_t count) {
  std::normal_distribution<double> nd;
  std::vector<double> v(count);
  for (auto& x : v) x = nd(rng);
  return v;
}

template <int N>
void check_cholesky(std::mt19937_64& rng, bool upper) {
  const auto x = normal(rng, N * N);
  std::vector<double> a(N * N);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      double s = i == j ? N : 0;
      for (int k = 0; k < N; ++k) s += x[i + k * N] * x[j + k * N];
      a[i + j * N] = s;
    }
  auto f = a;
  int info = -1;
  if (upper) cholesky<double, N, true>(f.data(), &info, 1);
  else cholesky<double, N, false>(f.data(), &info, 1);
  EXPECT_EQ(info, 0);
  auto factor = [&](int i, int k) {  // L(i, k)
    if (k > i) return 0.0;
    return upper ? f[k + i * N] : f[i + k * N];
  };
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < N; ++k) s += factor(i, k) * factor(j, k);
      EXPECT_NEAR(s, a[i + j * N], kTol * N * N) << "N " << N << " upper " << upper;
    }
  // Not positive definite at order 2.
  std::vector<double> bad(N * N, 0.0);
  for (int i = 0; i < N; ++i) bad[i + i * N] = i == 1 ? -1.0 : 1.0;
  cholesky<double, N, false>(bad.data(), &info, 1);
  EXPECT_EQ(info, N >= 2 ? 2 : 0);
}

template <int N>
void check_lu_solve(std::mt19937_64& rng) {
  const auto a0 = normal(rng, N * N);
  const auto b0 = normal(rng, N * 2);
  auto a = a0, b = b0;
  int info = -1;
  lu_solve_batch<double, N, false>(a.data(), b.data(), b.data(), 2, &info, 1);
  EXPECT_EQ(info, 0);
  EXPECT_EQ(a, a0);  // the matrix is read only
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < N; ++i) {
      double r = 0;
      for (int k = 0; k < N; ++k) r += a0[i + k * N] * b[k + c * N];
      EXPECT_NEAR(r, b0[i + c * N], 1e-10) << "N " << N;
    }
  // Row-major: a0's buffer read in C order is the matrix a0^T.
  std::vector<double> bt(b0.size(), 0.0);  // out of place
  lu_solve_batch<double, N, true>(a0.data(), b0.data(), bt.data(), 2, &info, 1);
  EXPECT_EQ(info, 0);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < N; ++i) {
      double r = 0;
      for (int k = 0; k < N; ++k) r += a0[k + i * N] * bt[k + c * N];
      EXPECT_NEAR(r, b0[i + c * N], 1e-10) << "N " << N << " row-major";
    }
  std::vector<double> singular(N * N, 1.0);
  std::vector<int> piv(N);
  lu<double, N>(singular.data(), piv.data(), &info, 1);
  EXPECT_EQ(info, N >= 2 ? 2 : 0);
}

template <int N>
void check_eigh(std::mt19937_64& rng) {
  auto a = normal(rng, N * N);
  std::vector<double> sym(N * N);
  for (int j = 0; j < N; ++j)
    for (int i = 0; i < N; ++i) sym[i + j * N] = i >= j ? a[i + j * N] : a[j + i * N];
  for (int j = 0; j < N; ++j)
    for (int i = 0; i < j; ++i) a[i + j * N] = 1e300;  // the upper triangle is never read
  std::vector<double> w(N);
  int info = -1;
  jacobi_eigh<double, N>(a.data(), w.data(), 1, 60, &info, 1);
  EXPECT_EQ(info, 0);
  EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));
  for (int j = 0; j < N; ++j)
    for (int i = 0; i < N; ++i) {
      double av = 0;
      for (int k = 0; k < N; ++k) av += sym[i + k * N] * a[k + j * N];
      EXPECT_NEAR(av, a[i + j * N] * w[j], kTol * N * 10) << "N " << N;
    }
}

template <int M, int N>
void check_svd(std::mt19937_64& rng, bool rank_deficient) {
  auto a = normal(rng, M * N);
  if (rank_deficient)
    for (int k = 0; k < M; ++k) a[k + (N - 1) * M] = a[k];
  std::vector<double> s(N), u(M * N), vh(N * N);
  int info = -1;
  jacobi_svd<double, M, N>(a.data(), s.data(), u.data(), vh.data(), 1, 60, &info, 1);
  EXPECT_EQ(info, 0);
  EXPECT_TRUE(std::is_sorted(s.rbegin(), s.rend()));
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double r = 0;
      for (int k = 0; k < N; ++k) r += u[i + k * M] * s[k] * vh[k + j * N];
      EXPECT_NEAR(r, a[i + j * M], kTol * M * 10);
    }
  for (int p = 0; p < N; ++p)
    for (int q = 0; q < N; ++q) {
      double du = 0, dv = 0;
      for (int k = 0; k < M; ++k) du += u[k + p * M] * u[k + q * M];
      for (int k = 0; k < N; ++k) dv += vh[p + k * N] * vh[q + k * N];
      EXPECT_NEAR(du, p == q ? 1.0 : 0.0, kTol * M * 10) << M << "x" << N << " U columns " << p << ", " << q;
      EXPECT_NEAR(dv, p == q ? 1.0 : 0.0, kTol * N * 10);
    }
}

TEST(LinalgSmallKernelsOnHost, Cholesky) {
  std::mt19937_64 rng(1);
  check_cholesky<1>(rng, false);
  check_cholesky<5>(rng, false);
  check_cholesky<8>(rng, true);
  check_cholesky<16>(rng, true);
}

TEST(LinalgSmallKernelsOnHost, LuSolve) {
  std::mt19937_64 rng(2);
  check_lu_solve<1>(rng);
  check_lu_solve<7>(rng);
  check_lu_solve<16>(rng);
}

TEST(LinalgSmallKernelsOnHost, JacobiEigh) {
  std::mt19937_64 rng(3);
  check_eigh<1>(rng);
  check_eigh<5>(rng);
  check_eigh<16>(rng);
}

TEST(LinalgSmallKernelsOnHost, JacobiSvd) {
  std::mt19937_64 rng(4);
  check_svd<1, 1>(rng, false);
  check_svd<8, 8>(rng, false);
  check_svd<8, 8>(rng, true);
  check_svd<11, 8>(rng, true);
  check_svd<16, 16>(rng, false);
}

TEST(LinalgSmallKernelsOnHost, NonFiniteInputStopsAtTheSweepCap) {
  std::vector<double> a(16, 1.0), w(4), s(4), u(16), vh(16);
  a[5] = NAN;
  int info = 0;
  auto b = a;
  jacobi_eigh<double, 4>(a.data(), w.data(), 1, 60, &info, 1);
  EXPECT_EQ(info, 1);
  jacobi_svd<double, 4, 4>(b.data(), s.data(), u.data(), vh.data(), 1, 60, &info, 1);
  EXPECT_EQ(info, 1);
}

}  // namespace
