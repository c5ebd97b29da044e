// tessel::linalg: one body over backend (cpu, each test GPU) x dtype (float32, float64, complex64,
// complex128). Every factorization is checked by reconstruction in complex<double> on the host
// (L L^H, P^-1 solve residual, Q R, U diag(S) Vh, A v = lambda v), with tolerances of the
// dtype's epsilon times the order times a bound on the condition number of the inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "testing.hpp"
#if defined(TESSEL_HAVE_CUDA)
#include "backend/linalg_small.hpp"
#include "tessel/jit/compiler.hpp"
#endif
#include "tessel/tessel.hpp"

namespace tessel {
namespace {

using testing::expect_error;
using cd = std::complex<double>;

class LinalgTest : public testing::BackendDTypeTest {
 protected:
  double eps() const {
    return dtype() == DType::float32 || dtype() == DType::complex64 ? 1.2e-7 : 2.3e-16;
  }
  double tol(std::int64_t n, double cond = 10.0) const { return 50.0 * eps() * static_cast<double>(n) * cond; }
};

// Host copy of any array as complex<double>, C order.
std::vector<cd> host(const Array& x) {
  return astype(x, DType::complex128).to(Device::cpu()).contiguous().to_vector<cd>();
}

// Random values (real and, for complex dtypes, imaginary parts standard normal) on `device`.
Array random_matrices(std::mt19937_64& rng, const Shape& shape, DType dtype, Device device) {
  std::normal_distribution<double> normal;
  std::int64_t count = 1;
  for (auto d : shape) count *= d;
  std::vector<cd> values(static_cast<std::size_t>(count));
  for (auto& v : values) v = is_complex(dtype) ? cd(normal(rng), normal(rng)) : cd(normal(rng), 0.0);
  Array c = from_vector(values, shape, device);
  return is_complex(dtype) ? astype(c, dtype) : astype(real(c), dtype);
}

// batch x (n x n): A A^H + n I (Hermitian positive definite), or (A + A^H) / 2 + shift I.
std::vector<cd> make_hermitian(const std::vector<cd>& a, std::int64_t batch, std::int64_t n, bool positive) {
  std::vector<cd> out(a.size());
  for (std::int64_t b = 0; b < batch; ++b) {
    const cd* x = a.data() + b * n * n;
    cd* y = out.data() + b * n * n;
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        cd v = 0;
        if (positive) {
          for (std::int64_t k = 0; k < n; ++k) v += x[i * n + k] * std::conj(x[j * n + k]);
          if (i == j) v += static_cast<double>(n);
        } else {
          v = (x[i * n + j] + std::conj(x[j * n + i])) / 2.0;
        }
        y[i * n + j] = v;
      }
    }
  }
  return out;
}

Array upload(const std::vector<cd>& values, const Shape& shape, DType dtype, Device device) {
  Array c = from_vector(values, shape, device);
  return is_complex(dtype) ? astype(c, dtype) : astype(real(c), dtype);
}

// c (m x p) = a (m x k) b (k x p) for one batch entry; adjoint_a / adjoint_b use a^H / b^H.
std::vector<cd> matmul_host(const cd* a, const cd* b, std::int64_t m, std::int64_t k, std::int64_t p, bool adjoint_a,
                            bool adjoint_b) {
  std::vector<cd> c(static_cast<std::size_t>(m * p));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < p; ++j) {
      cd s = 0;
      for (std::int64_t l = 0; l < k; ++l) {
        const cd x = adjoint_a ? std::conj(a[l * m + i]) : a[i * k + l];
        const cd y = adjoint_b ? std::conj(b[j * k + l]) : b[l * p + j];
        s += x * y;
      }
      c[static_cast<std::size_t>(i * p + j)] = s;
    }
  return c;
}

// Checks one n x n matrix of an eigh result: |A v - v w| <= tolerance * scale and |V^H V - I| <=
// tolerance, scale the largest |eigenvalue| (at least 1); returns scale. a, v: the matrix and its
// eigenvectors (columns), w its n eigenvalues; b names the matrix in the messages.
double expect_eigenpairs(const cd* a, const cd* v, const cd* w, std::int64_t n, double tolerance, std::int64_t b) {
  const auto av = matmul_host(a, v, n, n, n, false, false);
  const auto vv = matmul_host(v, v, n, n, n, true, false);
  double scale = 1, worst = 0, orth = 0;
  for (std::int64_t j = 0; j < n; ++j) scale = std::max(scale, std::abs(w[j]));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const auto e = static_cast<std::size_t>(i * n + j);
      worst = std::max(worst, std::abs(av[e] - v[e] * w[j]));
      orth = std::max(orth, std::abs(vv[e] - (i == j ? 1.0 : 0.0)));
    }
  EXPECT_LE(worst, tolerance * scale) << "A v = v w, matrix " << b;
  EXPECT_LE(orth, tolerance) << "V^H V = I, matrix " << b;
  return scale;
}

double max_abs_diff(const cd* a, const cd* b, std::int64_t count) {
  double e = 0;
  for (std::int64_t i = 0; i < count; ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

TEST_P(LinalgTest, CholeskyReconstructs) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t batch = 3, n = 7;
  const auto a = make_hermitian(host(random_matrices(rng, {batch, n, n}, dtype(), Device::cpu())), batch, n, true);
  const Array x = upload(a, {batch, n, n}, dtype(), device());
  for (bool upper : {false, true}) {
    const Array f = linalg::cholesky(x, upper);
    ASSERT_EQ(f.shape(), (Shape{batch, n, n}));
    ASSERT_EQ(f.dtype(), dtype());
    const auto h = host(f);
    for (std::int64_t b = 0; b < batch; ++b) {
      const cd* l = h.data() + b * n * n;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j)
          if (upper ? i > j : j > i) {
            EXPECT_EQ(l[i * n + j], cd(0)) << "other triangle at " << i << "," << j;
          }
      const auto r = upper ? matmul_host(l, l, n, n, n, true, false) : matmul_host(l, l, n, n, n, false, true);
      EXPECT_LE(max_abs_diff(r.data(), a.data() + b * n * n, n * n), tol(n) * 2 * n);
    }
  }
}

// Order 70 is above tessel's kernels and potrfBatched (n <= 64): on CUDA each matrix goes through
// Xpotrf, which factors LOWER (an upper request runs through two conjugate transposes). Each
// factor reads one triangle of the input (the other holds garbage here), zeroes the other one,
// and reports a matrix that is not positive definite in info.
TEST_P(LinalgTest, CholeskyOneMatrixAtATime) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t n = 70;
  for (std::int64_t batch : {std::int64_t{1}, std::int64_t{2}}) {
    const auto a = make_hermitian(host(random_matrices(rng, {batch, n, n}, dtype(), Device::cpu())), batch, n, true);
    for (bool upper : {false, true}) {
      SCOPED_TRACE(fmt::format("batch {}, upper {}", batch, upper));
      auto input = a;
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j)
            if (upper ? i > j : j > i) input[static_cast<std::size_t>(b * n * n + i * n + j)] = cd(1e3 + i, 7.0 * j);
      const Array f = linalg::cholesky(upload(input, {batch, n, n}, dtype(), device()), upper);
      ASSERT_EQ(f.shape(), (Shape{batch, n, n}));
      const auto h = host(f);
      for (std::int64_t b = 0; b < batch; ++b) {
        const cd* l = h.data() + b * n * n;
        int nonzero = 0;
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j)
            if ((upper ? i > j : j > i) && l[i * n + j] != cd(0)) ++nonzero;
        EXPECT_EQ(nonzero, 0) << "entries of the other triangle";
        const auto r = upper ? matmul_host(l, l, n, n, n, true, false) : matmul_host(l, l, n, n, n, false, true);
        EXPECT_LE(max_abs_diff(r.data(), a.data() + b * n * n, n * n), tol(n) * n);
      }
    }
    if (batch == 2) {  // the second matrix is not positive definite: -I
      auto bad = a;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j) bad[static_cast<std::size_t>(n * n + i * n + j)] = i == j ? -1.0 : 0.0;
      const Array x = upload(bad, {batch, n, n}, dtype(), device());
      for (bool upper : {false, true}) {
        const auto info = linalg::cholesky_ex(x, upper).info.to(Device::cpu()).to_vector<std::int32_t>();
        EXPECT_EQ(info[0], 0);
        EXPECT_EQ(info[1], 1);
      }
      expect_error<linalg::LinAlgError>([&] { linalg::cholesky(x, true); },
                                        {"cholesky: the matrix at batch index (1,)", "not positive definite"});
    }
  }
}

TEST_P(LinalgTest, SolveInvAndDet) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t batch = 4, n = 6, k = 3;
  // Diagonally dominant: cond <= ~3.
  auto a = host(random_matrices(rng, {batch, n, n}, dtype(), Device::cpu()));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < n; ++i) a[static_cast<std::size_t>(b * n * n + i * n + i)] += 3.0 * n;
  const Array x = upload(a, {batch, n, n}, dtype(), device());
  const Array rhs = random_matrices(rng, {batch, n, k}, dtype(), device());
  const auto bh = host(rhs);
  const auto sol = host(linalg::solve(x, rhs));
  const auto inv = host(linalg::inv(x));
  const auto det = host(linalg::det(x));
  const auto sld = linalg::slogdet(x);
  const auto sign = host(sld.sign), logabs = host(sld.logabsdet);
  for (std::int64_t b = 0; b < batch; ++b) {
    const cd* ab = a.data() + b * n * n;
    const auto ax = matmul_host(ab, sol.data() + b * n * k, n, n, k, false, false);
    EXPECT_LE(max_abs_diff(ax.data(), bh.data() + b * n * k, n * k), tol(n) * 3 * n);
    const auto ai = matmul_host(ab, inv.data() + b * n * n, n, n, n, false, false);
    std::vector<cd> eye(static_cast<std::size_t>(n * n));
    for (std::int64_t i = 0; i < n; ++i) eye[static_cast<std::size_t>(i * n + i)] = 1.0;
    EXPECT_LE(max_abs_diff(ai.data(), eye.data(), n * n), tol(n) * 3 * n);
    // det = sign * exp(logabsdet), and det(A) det(A^-1) = 1.
    const cd d = det[static_cast<std::size_t>(b)];
    const cd from_log = sign[static_cast<std::size_t>(b)] * std::exp(logabs[static_cast<std::size_t>(b)]);
    EXPECT_LE(std::abs(d - from_log), tol(n) * std::abs(d));
  }
  const auto det_inv = host(linalg::det(linalg::inv(x)));
  for (std::int64_t b = 0; b < batch; ++b) {
    EXPECT_LE(std::abs(det[static_cast<std::size_t>(b)] * det_inv[static_cast<std::size_t>(b)] - 1.0), tol(n) * 10);
  }
}

// Orders on both sides of the CUDA solve's route change (getrs below kTrsmSolveMinN = 256, two
// triangular solves and the pivots' permutation from it), general random matrices (so getrf swaps
// rows), several right-hand sides and a vector: backward error |A x - b| <= c n eps (|A| |x| + |b|).
TEST_P(LinalgTest, SolveLargeOrders) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (std::int64_t n : {100, 1100}) {
    const std::int64_t batch = 2, k = 3;
    const Array x = random_matrices(rng, {batch, n, n}, dtype(), device());
    const Array rhs = random_matrices(rng, {batch, n, k}, dtype(), device());
    const Array vec = random_matrices(rng, {n}, dtype(), device());
    const auto a = host(x), bh = host(rhs), vh = host(vec);
    const auto sol = host(linalg::solve(x, rhs));
    const auto sol_vec = host(linalg::solve(x, vec));  // (batch, n): vec broadcast over the batch
    for (std::int64_t b = 0; b < batch; ++b) {
      const cd* ab = a.data() + b * n * n;
      double a_norm = 0;  // the infinity norm
      for (std::int64_t i = 0; i < n; ++i) {
        double row = 0;
        for (std::int64_t j = 0; j < n; ++j) row += std::abs(ab[i * n + j]);
        a_norm = std::max(a_norm, row);
      }
      auto expect_solved = [&](const cd* xs, const cd* bs, std::int64_t cols, const char* what) {
        const auto ax = matmul_host(ab, xs, n, n, cols, false, false);
        double x_norm = 0, b_norm = 0;
        for (std::int64_t e = 0; e < n * cols; ++e) {
          x_norm = std::max(x_norm, std::abs(xs[e]));
          b_norm = std::max(b_norm, std::abs(bs[e]));
        }
        ASSERT_TRUE(std::isfinite(x_norm)) << what << ", n " << n << ", matrix " << b;
        EXPECT_LE(max_abs_diff(ax.data(), bs, n * cols), 20 * eps() * n * (a_norm * x_norm + b_norm))
            << what << ", n " << n << ", matrix " << b;
      };
      expect_solved(sol.data() + b * n * k, bh.data() + b * n * k, k, "matrix right-hand side");
      expect_solved(sol_vec.data() + b * n, vh.data(), 1, "vector right-hand side");
    }
  }
}

TEST_P(LinalgTest, EighReconstructs) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (std::int64_t n : {1, 5, 33}) {
    const std::int64_t batch = 3;
    const auto a = make_hermitian(host(random_matrices(rng, {batch, n, n}, dtype(), Device::cpu())), batch, n, false);
    const auto r = linalg::eigh(upload(a, {batch, n, n}, dtype(), device()));
    ASSERT_EQ(r.eigenvalues.dtype(), to_real(dtype()));
    const auto w = host(r.eigenvalues), v = host(r.eigenvectors);
    for (std::int64_t b = 0; b < batch; ++b) {
      const cd* vb = v.data() + b * n * n;
      const auto av = matmul_host(a.data() + b * n * n, vb, n, n, n, false, false);
      double scale = 1;
      for (std::int64_t j = 0; j < n; ++j) scale = std::max(scale, std::abs(w[static_cast<std::size_t>(b * n + j)]));
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          const cd want = vb[i * n + j] * w[static_cast<std::size_t>(b * n + j)];
          EXPECT_LE(std::abs(av[static_cast<std::size_t>(i * n + j)] - want), tol(n) * scale) << "n " << n;
        }
      for (std::int64_t j = 1; j < n; ++j) EXPECT_LE(w[b * n + j - 1].real(), w[b * n + j].real());
    }
  }
}

// set_linalg_streams (TESSEL_LINALG_STREAMS): a batch split over 2 or 3 streams, and over 4,
// which a batch of 193 clamps to 3 parts of at least 64 matrices, gives what one stream gives.
// On CUDA order 40 takes cuSOLVER's XsyevBatched (above syevjBatched's range and tessel's eigh
// kernels), once on the current stream (the legacy default one) and once on a created stream,
// whose later reads must see every part. The CPU backend ignores the setting.
TEST_P(LinalgTest, EighSplitOverStreams) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t batch = 193, n = 40;
  const auto a = make_hermitian(host(random_matrices(rng, {batch, n, n}, dtype(), Device::cpu())), batch, n, false);
  const Array x = upload(a, {batch, n, n}, dtype(), device());
  struct Restore {
    int streams = config().linalg_streams;
    ~Restore() { set_linalg_streams(streams); }
  } restore;
  const Stream created = Stream::create(device());
  std::vector<cd> w_one_stream;
  for (auto [streams, on_created] : std::vector<std::pair<int, bool>>{{1, false}, {2, false}, {3, false}, {4, false}, {3, true}}) {
    SCOPED_TRACE(fmt::format("{} streams{}", streams, on_created ? ", on a created stream" : ""));
    set_linalg_streams(streams);
    const auto r = on_created ? linalg::eigh(x, created) : linalg::eigh(x);
    const auto w = host(r.eigenvalues), v = host(r.eigenvectors);
    ASSERT_EQ(w.size(), static_cast<std::size_t>(batch * n));
    for (std::int64_t b = 0; b < batch; ++b) {
      const double scale = expect_eigenpairs(a.data() + b * n * n, v.data() + b * n * n, w.data() + b * n, n, tol(n), b);
      if (!w_one_stream.empty()) {
        double diff = 0;
        for (std::int64_t j = 0; j < n; ++j) {
          const auto e = static_cast<std::size_t>(b * n + j);
          diff = std::max(diff, std::abs(w[e] - w_one_stream[e]));
        }
        EXPECT_LE(diff, tol(n) * scale) << "eigenvalues against one stream, matrix " << b;
      }
    }
    if (w_one_stream.empty()) w_one_stream = w;
  }
}

TEST_P(LinalgTest, QrAndSvdReconstruct) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (auto [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{{6, 4}, {4, 6}, {5, 5}, {40, 3}}) {
    const std::int64_t batch = 2, k = std::min(m, n);
    const Array x = random_matrices(rng, {batch, m, n}, dtype(), device());
    const auto a = host(x);
    const auto q = linalg::qr(x, "reduced");
    ASSERT_EQ(q.Q.shape(), (Shape{batch, m, k}));
    ASSERT_EQ(q.R.shape(), (Shape{batch, k, n}));
    const auto qh = host(q.Q), rh = host(q.R);
    const auto s = linalg::svd(x, false);
    ASSERT_EQ(s.U.shape(), (Shape{batch, m, k}));
    ASSERT_EQ(s.Vh.shape(), (Shape{batch, k, n}));
    const auto uh = host(s.U), sh = host(s.S), vh = host(s.Vh);
    for (std::int64_t b = 0; b < batch; ++b) {
      const auto qr = matmul_host(qh.data() + b * m * k, rh.data() + b * k * n, m, k, n, false, false);
      EXPECT_LE(max_abs_diff(qr.data(), a.data() + b * m * n, m * n), tol(std::max(m, n)) * 5);
      std::vector<cd> us(uh.begin() + b * m * k, uh.begin() + (b + 1) * m * k);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < k; ++j) us[static_cast<std::size_t>(i * k + j)] *= sh[static_cast<std::size_t>(b * k + j)];
      const auto usv = matmul_host(us.data(), vh.data() + b * k * n, m, k, n, false, false);
      EXPECT_LE(max_abs_diff(usv.data(), a.data() + b * m * n, m * n), tol(std::max(m, n)) * 5);
      for (std::int64_t j = 1; j < k; ++j) EXPECT_GE(sh[b * k + j - 1].real(), sh[b * k + j].real());
    }
  }
}

// Orders above the per-thread kernels: on CUDA, tessel's block Jacobi kernels (a warp or a block
// per matrix; n <= 128 in float32, <= 112 in float64, cuSOLVER above and for complex dtypes).
// eigh of random Hermitian matrices and of the zero matrix; svd of random, rank-deficient (a
// repeated column) and zero matrices, tall and wide.
TEST_P(LinalgTest, JacobiBlockOrders) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (std::int64_t n : {17, 32, 33, 64, 128}) {
    SCOPED_TRACE(fmt::format("n {}", n));
    // Batches that reach tessel's team kernels where the tuning table sends them (eigh_warp at
    // n 9-32 from 1024 matrices, svd_block at n >= 33 from 32; float64 svd at n 17-24 from 1024)
    // and cuSOLVER elsewhere.
    const std::int64_t batch = n == 17 ? 1024 : 32;
    auto a = make_hermitian(host(random_matrices(rng, {batch, n, n}, dtype(), Device::cpu())), batch, n, false);
    std::fill(a.begin() + 2 * n * n, a.end(), cd(0.0));  // the last matrix is zero
    const auto r = linalg::eigh(upload(a, {batch, n, n}, dtype(), device()));
    const auto w = host(r.eigenvalues), v = host(r.eigenvectors);
    for (std::int64_t b = 0; b < batch; ++b) {
      expect_eigenpairs(a.data() + b * n * n, v.data() + b * n * n, w.data() + b * n, n, tol(n), b);
      for (std::int64_t j = 1; j < n; ++j) EXPECT_LE(w[b * n + j - 1].real(), w[b * n + j].real());
    }
    for (std::int64_t j = 0; j < n; ++j) EXPECT_EQ(w[static_cast<std::size_t>(2 * n + j)], cd(0.0));
    for (auto [m, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{{n, n}, {std::min<std::int64_t>(n + 7, 128), n},
                                                                         {n, std::min<std::int64_t>(n + 7, 128)}}) {
      auto x = host(random_matrices(rng, {batch, m, k}, dtype(), Device::cpu()));
      for (std::int64_t i = 0; i < m; ++i) x[static_cast<std::size_t>(m * k + i * k + k - 1)] = x[static_cast<std::size_t>(m * k + i * k)];
      std::fill(x.begin() + 2 * m * k, x.end(), cd(0.0));
      const auto s = linalg::svd(upload(x, {batch, m, k}, dtype(), device()), false);
      const std::int64_t kk = std::min(m, k);
      const auto uh = host(s.U), sh = host(s.S), vh = host(s.Vh);
      for (std::int64_t b = 0; b < batch; ++b) {
        std::vector<cd> us(uh.begin() + b * m * kk, uh.begin() + (b + 1) * m * kk);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < kk; ++j) us[static_cast<std::size_t>(i * kk + j)] *= sh[static_cast<std::size_t>(b * kk + j)];
        const auto usv = matmul_host(us.data(), vh.data() + b * kk * k, m, kk, k, false, false);
        EXPECT_LE(max_abs_diff(usv.data(), x.data() + b * m * k, m * k), tol(std::max(m, k)) * 5) << m << "x" << k;
        const auto uu = matmul_host(uh.data() + b * m * kk, uh.data() + b * m * kk, kk, m, kk, true, false);
        const auto vv = matmul_host(vh.data() + b * kk * k, vh.data() + b * kk * k, kk, k, kk, false, true);
        for (std::int64_t i = 0; i < kk; ++i)
          for (std::int64_t j = 0; j < kk; ++j) {
            const auto e = static_cast<std::size_t>(i * kk + j);
            EXPECT_LE(std::abs(uu[e] - (i == j ? 1.0 : 0.0)), tol(std::max(m, k))) << "U^H U, " << m << "x" << k;
            EXPECT_LE(std::abs(vv[e] - (i == j ? 1.0 : 0.0)), tol(std::max(m, k))) << "Vh Vh^H, " << m << "x" << k;
          }
        for (std::int64_t j = 1; j < kk; ++j) EXPECT_GE(sh[b * kk + j - 1].real(), sh[b * kk + j].real());
      }
      for (std::int64_t j = 0; j < kk; ++j) EXPECT_EQ(sh[static_cast<std::size_t>(2 * kk + j)], cd(0.0));
    }
  }
}

// Tall and wide matrices above the batched and small-kernel ranges: on CUDA the per-matrix route
// of the SVD table (QR first, then gesvdj, for 300 x 40 and, transposed, 40 x 300; the full U of
// a tall matrix direct). The last matrix of each batch is rank deficient (a repeated column or
// row): U and Vh must still be orthonormal.
TEST_P(LinalgTest, SvdOfTallAndWideMatrices) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (auto [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{{300, 40}, {40, 300}}) {
    for (std::int64_t batch : {std::int64_t{1}, std::int64_t{2}}) {
      const std::int64_t k = std::min(m, n);
      auto a = host(random_matrices(rng, {batch, m, n}, dtype(), Device::cpu()));
      const std::int64_t last = (batch - 1) * m * n;
      if (m >= n) {  // a repeated column (tall) or row (wide): rank k - 1
        for (std::int64_t i = 0; i < m; ++i) a[static_cast<std::size_t>(last + i * n + n - 1)] = a[static_cast<std::size_t>(last + i * n)];
      } else {
        for (std::int64_t j = 0; j < n; ++j) a[static_cast<std::size_t>(last + (m - 1) * n + j)] = a[static_cast<std::size_t>(last + j)];
      }
      const Array x = upload(a, {batch, m, n}, dtype(), device());
      const auto values = host(linalg::svdvals(x));
      ASSERT_EQ(values.size(), static_cast<std::size_t>(batch * k));
      for (bool full : {false, true}) {
        SCOPED_TRACE(fmt::format("{} x {}, batch {}, full {}", m, n, batch, full));
        const std::int64_t uc = full ? m : k, vr = full ? n : k;
        const auto r = linalg::svd(x, full);
        ASSERT_EQ(r.U.shape(), (Shape{batch, m, uc}));
        ASSERT_EQ(r.S.shape(), (Shape{batch, k}));
        ASSERT_EQ(r.Vh.shape(), (Shape{batch, vr, n}));
        const auto uh = host(r.U), sh = host(r.S), vh = host(r.Vh);
        const double t = tol(std::max(m, n)) * 5;
        for (std::int64_t b = 0; b < batch; ++b) {
          const cd* ub = uh.data() + b * m * uc;
          const cd* vb = vh.data() + b * vr * n;
          std::vector<cd> us(static_cast<std::size_t>(m * k)), vk(vb, vb + k * n);
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < k; ++j)
              us[static_cast<std::size_t>(i * k + j)] = ub[i * uc + j] * sh[static_cast<std::size_t>(b * k + j)];
          const auto usv = matmul_host(us.data(), vk.data(), m, k, n, false, false);
          EXPECT_LE(max_abs_diff(usv.data(), a.data() + b * m * n, m * n), t);
          std::vector<cd> eye_u(static_cast<std::size_t>(uc * uc)), eye_v(static_cast<std::size_t>(vr * vr));
          for (std::int64_t i = 0; i < uc; ++i) eye_u[static_cast<std::size_t>(i * uc + i)] = 1.0;
          for (std::int64_t i = 0; i < vr; ++i) eye_v[static_cast<std::size_t>(i * vr + i)] = 1.0;
          const auto utu = matmul_host(ub, ub, uc, m, uc, true, false);
          EXPECT_LE(max_abs_diff(utu.data(), eye_u.data(), uc * uc), t) << "U^H U";
          const auto vvt = matmul_host(vb, vb, vr, n, vr, false, true);
          EXPECT_LE(max_abs_diff(vvt.data(), eye_v.data(), vr * vr), t) << "Vh Vh^H";
          for (std::int64_t j = 0; j < k; ++j) {
            if (j > 0) {
              EXPECT_GE(sh[b * k + j - 1].real(), sh[b * k + j].real());
            }
            EXPECT_LE(std::abs(sh[b * k + j] - values[b * k + j]), t) << "svdvals";
          }
          EXPECT_LE(std::abs(sh[b * k + k - 1]), b == batch - 1 ? t * 10 : 1e30) << "rank deficient";
        }
      }
    }
  }
}

TEST_P(LinalgTest, EigReconstructs) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t batch = 2, n = 5;
  const Array x = random_matrices(rng, {batch, n, n}, dtype(), device());
  const auto a = host(x);
  const auto r = linalg::eig(x);
  ASSERT_EQ(r.eigenvalues.dtype(), to_complex(dtype()));
  const auto w = host(r.eigenvalues), v = host(r.eigenvectors);
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto av = matmul_host(a.data() + b * n * n, v.data() + b * n * n, n, n, n, false, false);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const cd want = v[static_cast<std::size_t>(b * n * n + i * n + j)] * w[static_cast<std::size_t>(b * n + j)];
        EXPECT_LE(std::abs(av[static_cast<std::size_t>(i * n + j)] - want), tol(n, 1e3));
      }
  }
}

TEST_P(LinalgTest, ErrorsNameTheOpAndTheBatchIndex) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Array rect = random_matrices(rng, {2, 3, 4}, dtype(), device());
  expect_error<ShapeError>([&] { linalg::inv(rect); }, {"inv", "square", "(2, 3, 4)"});
  expect_error<ShapeError>([&] { linalg::cholesky(rect); }, {"cholesky", "square"});
  expect_error<ValueError>([&] { linalg::qr(rect, "full"); }, {"qr", "reduced", "complete", "full"});
  // Batch entry 1 is singular / not positive definite.
  std::vector<cd> a(2 * 3 * 3, cd(0));
  for (int i = 0; i < 3; ++i) a[static_cast<std::size_t>(i * 3 + i)] = 2.0;
  a[9 + 0] = 1.0;  // rank 1, and -1 on the diagonal below
  a[9 + 4] = -1.0;
  const Array x = upload(a, {2, 3, 3}, dtype(), device());
  expect_error<linalg::LinAlgError>([&] { linalg::inv(x); }, {"inv: the matrix at batch index (1,) is singular"});
  expect_error<linalg::LinAlgError>([&] { linalg::cholesky(x); },
                                    {"cholesky: the matrix at batch index (1,)", "not positive definite"});
  const auto ex = linalg::inv_ex(x);
  EXPECT_EQ(ex.info.device(), device());
  const auto info = ex.info.to(Device::cpu()).to_vector<std::int32_t>();
  EXPECT_EQ(info[0], 0);
  EXPECT_GT(info[1], 0);
  expect_error<DTypeError>([&] { linalg::inv(astype(x, DType::bool_)); }, {"inv", "floating-point", "bool"});
}

// Batches of small matrices, every order 1..32: on CUDA, tessel's Gauss-Jordan inverse (every
// n <= 32) and its LU solve that reads x1's own C-order buffer (n <= 16, batch >= 64); on the CPU,
// LAPACK; complex dtypes take cuSOLVER. Entries 5 and 40 are singular (a zero last / first
// column: exact zero pivots in every algorithm): info names them, the plain functions raise
// for entry 5 (the first-failure reduction), and their inverses are not finite. Transposed
// views (not contiguous) and a broadcast x1 take the copying paths.
TEST_P(LinalgTest, SmallBatchesEveryOrderWithSingularEntries) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t batch = 70, k = 2;
  const auto singular = [](std::int64_t b) { return b == 5 || b == 40; };
  // max |M X - B| over the non-singular entries, M = A (or A^T), all C-order (n x n, n x k).
  const auto residual = [&](const std::vector<cd>& a, bool transpose_a, const std::vector<cd>& x,
                            const std::vector<cd>* rhs, std::int64_t n, std::int64_t cols, bool broadcast_a) {
    double worst = 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t ab = broadcast_a ? 0 : b;
      if (singular(ab)) continue;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < cols; ++j) {
          cd s = 0;
          for (std::int64_t l = 0; l < n; ++l) {
            const cd m = transpose_a ? a[static_cast<std::size_t>(ab * n * n + l * n + i)]
                                     : a[static_cast<std::size_t>(ab * n * n + i * n + l)];
            s += m * x[static_cast<std::size_t>(b * n * cols + l * cols + j)];
          }
          const cd want = rhs ? (*rhs)[static_cast<std::size_t>(b * n * cols + i * cols + j)] : cd(i == j ? 1.0 : 0.0);
          worst = std::max(worst, std::abs(s - want));
        }
    }
    return worst;
  };
  for (std::int64_t n = 1; n <= 32; ++n) {
    SCOPED_TRACE(fmt::format("n {}", n));
    auto a = host(random_matrices(rng, {batch, n, n}, dtype(), Device::cpu()));
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t i = 0; i < n; ++i) a[static_cast<std::size_t>(b * n * n + i * n + i)] += 3.0 * n;
    for (std::int64_t i = 0; i < n; ++i) {
      a[static_cast<std::size_t>(5 * n * n + i * n + n - 1)] = 0.0;
      a[static_cast<std::size_t>(40 * n * n + i * n)] = 0.0;
    }
    a = host(upload(a, {batch, n, n}, dtype(), Device::cpu()));  // rounded to the dtype
    const Array x = upload(a, {batch, n, n}, dtype(), device());
    const double bound = tol(n) * 3 * n;
    const auto ex = linalg::inv_ex(x);
    ASSERT_EQ(ex.inverse.shape(), (Shape{batch, n, n}));
    ASSERT_EQ(ex.info.shape(), (Shape{batch}));
    const auto info = ex.info.to(Device::cpu()).to_vector<std::int32_t>();
    const auto inv = host(ex.inverse);
    for (std::int64_t b = 0; b < batch; ++b) {
      EXPECT_EQ(info[static_cast<std::size_t>(b)] > 0, singular(b)) << "batch entry " << b;
      EXPECT_GE(info[static_cast<std::size_t>(b)], 0);
      if (!singular(b)) continue;
      bool finite = true;
      for (std::int64_t e = 0; e < n * n; ++e) {
        const cd v = inv[static_cast<std::size_t>(b * n * n + e)];
        finite = finite && std::isfinite(v.real()) && std::isfinite(v.imag());
      }
      EXPECT_FALSE(finite) << "the inverse of singular entry " << b;
    }
    EXPECT_LE(residual(a, false, inv, nullptr, n, n, false), bound);
    expect_error<linalg::LinAlgError>([&] { linalg::inv(x); }, {"inv: the matrix at batch index (5,) is singular"});
    // A transposed view: inv(x^T) through a copy.
    const auto ext = linalg::inv_ex(x.swapaxes(-1, -2));
    EXPECT_EQ(ext.info.to(Device::cpu()).to_vector<std::int32_t>()[5] > 0, true);
    EXPECT_LE(residual(a, true, host(ext.inverse), nullptr, n, n, false), bound);
    if (n > 16 && n != 32) continue;  // the solve kernel's orders (compiling each costs seconds) and one above
    const Array rhs = random_matrices(rng, {batch, n, k}, dtype(), device());
    const auto bh = host(rhs);
    const auto sx = linalg::solve_ex(x, rhs);
    const auto sinfo = sx.info.to(Device::cpu()).to_vector<std::int32_t>();
    for (std::int64_t b = 0; b < batch; ++b) EXPECT_EQ(sinfo[static_cast<std::size_t>(b)] > 0, singular(b)) << b;
    EXPECT_LE(residual(a, false, host(sx.result), &bh, n, k, false), bound);
    EXPECT_EQ(host(x), a);  // solve leaves x1 as it was (the kernel reads x1's buffer itself)
    expect_error<linalg::LinAlgError>([&] { linalg::solve(x, rhs); },
                                      {"solve: the matrix at batch index (5,) is singular"});
    const auto st = linalg::solve_ex(x.swapaxes(-1, -2), rhs);  // not contiguous: a copy
    EXPECT_LE(residual(a, true, host(st.result), &bh, n, k, false), bound);
    const Array first = x.slice(0, Slice(0, 1));  // (1, n, n), broadcast against 70 right-hand sides
    EXPECT_LE(residual(a, false, host(linalg::solve(first, rhs)), &bh, n, k, true), bound);
  }
}

// The plain functions' error check on a batch large enough for many blocks of the device-side
// first-failure reduction: failures far from the start and in the last entry, the first named.
TEST_P(LinalgTest, ErrorCheckFindsTheFirstFailureOfALargeBatch) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const std::int64_t batch = 100000;
  std::vector<cd> values(static_cast<std::size_t>(batch), cd(2.0));
  Array ok = upload(values, {batch, 1, 1}, dtype(), device());
  EXPECT_EQ(linalg::cholesky(ok).shape(), (Shape{batch, 1, 1}));  // no failure: no error
  EXPECT_EQ(linalg::inv(ok).shape(), (Shape{batch, 1, 1}));
  for (std::int64_t b : {std::int64_t{77777}, batch - 1}) values[static_cast<std::size_t>(b)] = 0.0;
  values[static_cast<std::size_t>(99998)] = -1.0;
  const Array x = upload(values, {batch, 1, 1}, dtype(), device());
  expect_error<linalg::LinAlgError>([&] { linalg::inv(x); }, {"inv: the matrix at batch index (77777,) is singular"});
  expect_error<linalg::LinAlgError>([&] { linalg::cholesky(x); },
                                    {"cholesky: the matrix at batch index (77777,) is not positive definite"});
  try {
    linalg::solve(x, upload(values, {batch, 1, 1}, dtype(), device()));
    ADD_FAILURE() << "solve of singular matrices did not raise";
  } catch (const linalg::LinAlgError& e) {
    EXPECT_EQ(e.batch_index(), 77777);
  }
  // The same stream's indexing status words are left clean: a later in-range gather succeeds.
  EXPECT_EQ(host(take(x.reshape({batch}), from_vector(std::vector<std::int64_t>{batch - 1}, {1}, device())))[0], cd(0.0));
  // One matrix: no batch index.
  expect_error<linalg::LinAlgError>([&] { linalg::inv(zeros({2, 2}, dtype(), device())); }, {"inv: the matrix is singular"});
}

TEST_P(LinalgTest, EmptyBatchesAndMatrices) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Array none = zeros({0, 3, 3}, dtype(), device());
  EXPECT_EQ(linalg::inv(none).shape(), (Shape{0, 3, 3}));
  EXPECT_EQ(linalg::eigh(none).eigenvalues.shape(), (Shape{0, 3}));
  EXPECT_EQ(linalg::svd(none).S.shape(), (Shape{0, 3}));
  EXPECT_EQ(linalg::det(none).shape(), (Shape{0}));
  const Array empty_matrices = zeros({2, 0, 0}, dtype(), device());
  const auto d = host(linalg::det(empty_matrices));
  EXPECT_EQ(d, (std::vector<cd>{1.0, 1.0}));
}

#if defined(TESSEL_HAVE_CUDA)
// tessel's small-matrix kernels compile for Hopper (NVRTC runs without a GPU), every kind and
// dtype, at orders 1, 3 and 8 (the table's largest orders take minutes to compile on two cores).
// Every kind has table rows.
TEST(LinalgSmallKernels, CompileForSm90) {
  using backend::cuda::SmallKernel;
  for (DType dtype : {DType::float32, DType::float64}) {
    for (SmallKernel kind : {SmallKernel::cholesky, SmallKernel::lu_solve, SmallKernel::eigh, SmallKernel::svd,
                             SmallKernel::inv, SmallKernel::svd_block, SmallKernel::eigh_warp,
                             SmallKernel::eigh_tridiagonal}) {
      const auto rows = backend::cuda::small_kernel_rows(kind, dtype);
      ASSERT_FALSE(rows.empty());
      for (const auto& row : rows) {
        EXPECT_NE(std::string(row.measurement), "");
        EXPECT_LE(row.min_n, row.max_n);
      }
      const std::int64_t max_n = backend::cuda::small_kernel_max_n(kind, dtype);
      ASSERT_GT(max_n, 0);
      std::vector<std::int64_t> orders{1, 3, std::min<std::int64_t>(8, max_n)};
      if (kind == SmallKernel::inv) orders.insert(orders.end(), {17, 32});  // one warp per matrix: cheap to compile
      if (kind == SmallKernel::svd_block) {  // loops, not unrolled: cheap
        orders = {17, 32, 33, 64, max_n};
      }
      if (kind == SmallKernel::eigh_warp) orders = {8, 12, 32};  // group widths 8 (the table's n 7-8) and 16, and a warp
      for (std::int64_t n : orders) {
        const bool svd = kind == SmallKernel::svd || kind == SmallKernel::svd_block;
        const std::int64_t m = svd ? std::min<std::int64_t>(n + 2, max_n) : n;
        jit::CompileRequest r = backend::cuda::small_kernel_request(kind, dtype, std::max(m, n), n, n == 3);
        r.arch = "sm_90";
        SCOPED_TRACE(r.name);
        const jit::CompileResult c = jit::compile_to_cubin(r);
        EXPECT_FALSE(c.cubin.empty());
      }
    }
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(All, LinalgTest,
                         ::testing::ValuesIn(testing::backend_dtype_cases(
                             {DType::float32, DType::float64, DType::complex64, DType::complex128})),
                         testing::case_name);

}  // namespace
}  // namespace tessel
