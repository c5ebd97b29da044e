// The math of tessel's small-matrix CUDA kernels (src/backend/cuda/device/linalg_small.cuh), run
// on the host: the header is plain C++ once the CUDA qualifiers and thread indices are defined
// away, one "thread" handling every matrix of the batch. The block kernels (a team of threads per
// matrix) run on an emulated block: one fiber (ucontext) per CUDA thread on the test's thread,
// switched at the warp and block barriers (shuffles and votes exchange through arrays between
// two barriers), the dynamic shared memory one host array. The GPU runs the same source through
// NVRTC (linalg_test.cpp compiles it; the Python tests run it on CUDA).
#include <gtest/gtest.h>
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#if defined(TESSEL_HAVE_CUDA)
#include "backend/linalg_small.hpp"
#endif

namespace tessel_small_host {
struct Index3 {
  unsigned x = 0;
};
// The running fiber's indices (the scheduler sets threadIdx before it resumes one); the one-thread
// kernels see a block of one.
inline Index3 blockIdx{0}, threadIdx{0}, blockDim{1}, gridDim{1};
struct float2 {
  float x, y;
};
struct alignas(16) double2 {
  double x, y;
};
inline float sqrtf(float x) { return std::sqrt(x); }
inline float fabsf(float x) { return std::fabs(x); }
// The device's estimates, exact here (the kernels' results must not depend on which).
inline float __fdividef(float x, float y) { return x / y; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
using std::fabs;
using std::frexp;
using std::ldexp;
using std::sqrt;

// The emulated block: a fiber per thread, resumed round-robin; a thread at a barrier yields until
// the barrier's generation moves on.
struct EmulatedBlock {
  struct Barrier {
    int count = 0, arrived = 0;
    long long generation = 0;
  };
  ucontext_t scheduler{};
  std::vector<ucontext_t> fibers;
  std::vector<std::vector<char>> stacks;
  Barrier block;
  std::vector<Barrier> warps;
  std::vector<double> slots;  // two per thread (float and double shuffle exactly through double)
  std::vector<std::size_t> parity;  // each thread's slot array
  std::vector<int> votes;
  std::vector<char> done;
  const std::function<void()>* kernel = nullptr;
};
inline EmulatedBlock* g_block = nullptr;

inline void wait_at(EmulatedBlock::Barrier& b) {
  const long long generation = b.generation;
  if (++b.arrived == b.count) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  while (b.generation == generation) {
    const unsigned me = threadIdx.x;
    swapcontext(&g_block->fibers[me], &g_block->scheduler);
  }
}

inline void __syncthreads() { wait_at(g_block->block); }
inline int __syncthreads_or(int pred) {
  g_block->votes[threadIdx.x] = pred;
  __syncthreads();
  int any = 0;
  for (int v : g_block->votes) any |= v != 0;
  __syncthreads();
  return any;
}
inline void __syncwarp() { wait_at(g_block->warps[threadIdx.x / 32]); }
// Two slot arrays used in turn: a lane writes one array again only after every lane of its warp
// has passed the barrier of the shuffle in between, so one barrier per shuffle suffices.
template <class T>
T __shfl_xor_sync(unsigned, T v, int offset) {
  const unsigned me = threadIdx.x;
  double* slots = g_block->slots.data() + (g_block->parity[me] ^= 1) * g_block->parity.size();
  slots[me] = static_cast<double>(v);
  __syncwarp();
  return static_cast<T>(slots[me ^ static_cast<unsigned>(offset)]);
}
inline int __any_sync(unsigned, int pred) {
  g_block->votes[threadIdx.x] = pred;
  __syncwarp();
  int any = 0;
  const unsigned first = threadIdx.x / 32 * 32;
  for (unsigned l = first; l < first + 32; ++l) any |= g_block->votes[l] != 0;
  __syncwarp();
  return any;
}

// A fiber runs the kernel, marks itself done and switches back for good.
inline void fiber_main() {
  (*g_block->kernel)();
  const unsigned me = threadIdx.x;
  g_block->done[me] = true;
  swapcontext(&g_block->fibers[me], &g_block->scheduler);
}

// Runs kernel() on one block of `threads` threads (a multiple of 32), gridDim 1.
inline void run_block(int threads, const std::function<void()>& kernel) {
  EmulatedBlock b;
  b.kernel = &kernel;
  b.block.count = threads;
  b.warps.assign(static_cast<std::size_t>(threads / 32), EmulatedBlock::Barrier{32, 0, 0});
  b.slots.assign(static_cast<std::size_t>(2 * threads), 0.0);
  b.parity.assign(static_cast<std::size_t>(threads), 0);
  b.votes.assign(static_cast<std::size_t>(threads), 0);
  b.done.assign(static_cast<std::size_t>(threads), false);
  b.fibers.resize(static_cast<std::size_t>(threads));
  b.stacks.assign(static_cast<std::size_t>(threads), std::vector<char>(256 * 1024));
  g_block = &b;
  blockDim.x = static_cast<unsigned>(threads);
  for (int t = 0; t < threads; ++t) {
    getcontext(&b.fibers[t]);
    b.fibers[t].uc_stack.ss_sp = b.stacks[t].data();
    b.fibers[t].uc_stack.ss_size = b.stacks[t].size();
    b.fibers[t].uc_link = nullptr;
    makecontext(&b.fibers[t], fiber_main, 0);
  }
  for (bool running = true; running;) {
    running = false;
    for (int t = 0; t < threads; ++t) {
      if (b.done[t]) continue;
      threadIdx.x = static_cast<unsigned>(t);
      swapcontext(&b.scheduler, &b.fibers[t]);  // back when the fiber yields or is done
      running = true;
    }
  }
  g_block = nullptr;
  threadIdx.x = 0;
  blockDim.x = 1;
}

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __align__(n)
#define TESSEL_UNROLL
#define TESSEL_SMALL_HOST_TEAMS
#define __shared__  // the kernels' `extern __shared__` array: the one defined below
#include "backend/cuda/device/linalg_small.cuh"
#undef __shared__
#undef __device__
#undef __global__
#undef __forceinline__
#undef __restrict__
#undef __align__
}  // namespace tessel_small_host

namespace tessel_small_host::tessel_linalg_small {
alignas(16) unsigned char tessel_small_shared[512 * 1024];  // the emulated block's dynamic shared memory
}

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
  // A singular matrix: info is the first zero pivot (LAPACK's getrf).
  std::vector<double> singular(N * N, 1.0);
  lu_solve_batch<double, N, false>(singular.data(), b0.data(), bt.data(), 1, &info, 1);
  EXPECT_EQ(info, N >= 2 ? 2 : 0);
}

// jacobi_eigh's matrices are row-major: it reads the lower triangle, (i, j) at i * N + j for
// i >= j, and writes eigenvector k as column k (v may be the input itself: here it is).
template <int N>
void check_eigh(std::mt19937_64& rng) {
  auto a = normal(rng, N * N);
  std::vector<double> sym(N * N);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) sym[i * N + j] = i >= j ? a[i * N + j] : a[j * N + i];
  for (int i = 0; i < N; ++i)
    for (int j = i + 1; j < N; ++j) a[i * N + j] = 1e300;  // the upper triangle is never read
  std::vector<double> w(N);
  int info = -1;
  jacobi_eigh<double, N>(a.data(), a.data(), w.data(), 1, 60, &info, 1);
  EXPECT_EQ(info, 0);
  EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));
  for (int j = 0; j < N; ++j)
    for (int i = 0; i < N; ++i) {
      double av = 0;
      for (int k = 0; k < N; ++k) av += sym[i * N + k] * a[k * N + j];
      EXPECT_NEAR(av, a[i * N + j] * w[j], kTol * N * 10) << "N " << N;
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

// Every one of many random 16 x 16 matrices converges, in float32 and float64. (On the H100, with
// eps alone as the pair bound, about one matrix in 20,000 rotated to the sweep cap; this host
// arithmetic, without fused multiply-adds, converged under either bound.)
// How many of `batch` random N x N matrices (normal entries; eigh reads the lower triangle) end at
// the sweep cap (info != 0) in `kernel`(a, info, batch).
template <class T, int N, class Kernel>
int sweep_cap_hits(std::mt19937_64& rng, int batch, Kernel&& kernel) {
  std::normal_distribution<double> g;
  std::vector<T> a(static_cast<std::size_t>(batch) * N * N);
  for (T& v : a) v = static_cast<T>(g(rng));
  std::vector<int> info(static_cast<std::size_t>(batch), -1);
  kernel(a.data(), info.data(), batch);
  return static_cast<int>(std::count_if(info.begin(), info.end(), [](int i) { return i != 0; }));
}

template <class T>
int svd_sweep_cap_hits(std::mt19937_64& rng, int batch) {
  std::vector<T> s(static_cast<std::size_t>(batch) * 16);
  return sweep_cap_hits<T, 16>(rng, batch, [&](T* a, int* info, int b) {
    jacobi_svd<T, 16, 16>(a, s.data(), nullptr, nullptr, 0, 60, info, b);
  });
}

// The eigh kernels: the one-matrix-per-thread jacobi_eigh and tridiagonal_eigh, and
// jacobi_eigh_warp (a group of lanes per matrix; in the CUDA build, which has its shared memory
// layout, block_kernel_bytes).
enum class EighKernel { jacobi, tridiagonal, warp };

// jacobi_eigh: 60 sweeps; tridiagonal_eigh: 30 N QR steps (linalg_small.cpp's caps).
template <class T, int N>
void per_thread_eigh(EighKernel kernel, const T* a, T* v, T* w, int vectors, int* info, int batch) {
  if (kernel == EighKernel::jacobi) jacobi_eigh<T, N>(a, v, w, vectors, 60, info, batch);
  else tridiagonal_eigh<T, N>(a, v, w, vectors, 30 * N, info, batch);
}

template <class T>
int eigh_sweep_cap_hits(std::mt19937_64& rng, int batch, EighKernel kernel) {
  std::vector<T> w(static_cast<std::size_t>(batch) * 8);
  return sweep_cap_hits<T, 8>(rng, batch, [&](T* a, int* info, int b) {
    per_thread_eigh<T, 8>(kernel, a, nullptr, w.data(), 0, info, b);
  });
}

TEST(LinalgSmallKernelsOnHost, JacobiSvdConvergesOnManyRandomMatrices) {
  std::mt19937_64 rng(11);
  EXPECT_EQ(svd_sweep_cap_hits<float>(rng, 10000), 0);
  EXPECT_EQ(svd_sweep_cap_hits<double>(rng, 10000), 0);
}

TEST(LinalgSmallKernelsOnHost, JacobiEighConvergesOnManyRandomMatrices) {
  std::mt19937_64 rng(12);
  EXPECT_EQ(eigh_sweep_cap_hits<float>(rng, 20000, EighKernel::jacobi), 0);
  EXPECT_EQ(eigh_sweep_cap_hits<double>(rng, 20000, EighKernel::jacobi), 0);
}

TEST(LinalgSmallKernelsOnHost, TridiagonalEighConvergesOnManyRandomMatrices) {
  std::mt19937_64 rng(13);
  EXPECT_EQ(eigh_sweep_cap_hits<float>(rng, 20000, EighKernel::tridiagonal), 0);
  EXPECT_EQ(eigh_sweep_cap_hits<double>(rng, 20000, EighKernel::tridiagonal), 0);
}

TEST(LinalgSmallKernelsOnHost, NonFiniteInputGivesNanAndInfoZero) {
  std::vector<double> a(16, 1.0), w(4), s(4), u(16), vh(16);
  a[5] = NAN;
  int info = 0;
  auto b = a, c = a;
  jacobi_eigh<double, 4>(a.data(), a.data(), w.data(), 1, 60, &info, 1);
  EXPECT_EQ(info, 0);  // NaN results and info 0, as the CPU backend's
  jacobi_svd<double, 4, 4>(b.data(), s.data(), u.data(), vh.data(), 1, 60, &info, 1);
  EXPECT_EQ(info, 0);
  tridiagonal_eigh<double, 4>(c.data(), c.data(), w.data(), 1, 120, &info, 1);
  EXPECT_EQ(info, 0);
}

// tridiagonal_eigh's QR step cap: a matrix that needs more steps ends with info 1 and finite
// outputs (its Householder Q and the diagonal of T at 0 steps), as jacobi_eigh at its sweep cap.
TEST(LinalgSmallKernelsOnHost, TridiagonalEighIterationCap) {
  std::mt19937_64 rng(14);
  constexpr int N = 8;
  const auto a = normal(rng, N * N);  // the lower triangle is read
  for (int cap : {0, 1, 2}) {
    std::vector<double> v(N * N), w(N);
    int info = -1;
    tridiagonal_eigh<double, N>(a.data(), v.data(), w.data(), 1, cap, &info, 1);
    EXPECT_EQ(info, 1) << "cap " << cap;
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) {
        double vv = 0;
        for (int k = 0; k < N; ++k) vv += v[k * N + i] * v[k * N + j];
        ASSERT_NEAR(vv, i == j ? 1.0 : 0.0, 1e-13) << "cap " << cap << ": V^T V = I at " << i << ", " << j;
      }
    EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));
  }
  std::vector<double> w(N);
  int info = -1;
  tridiagonal_eigh<double, N>(a.data(), nullptr, w.data(), 0, 30 * N, &info, 1);
  EXPECT_EQ(info, 0);
}

#if defined(TESSEL_HAVE_CUDA)
// ---- the block kernels on an emulated block (their shared memory layouts are the CUDA build's) ----
using tessel::backend::cuda::block_kernel_bytes;
using tessel::backend::cuda::small_kernel_request;
using tessel::backend::cuda::SmallKernel;

// Runs `teams` teams of Team threads (one block), with the shared memory of block_kernel_bytes
// per team, and checks that nothing past the teams' parts was written.
template <int Team, class Kernel>
void run_teams(int teams, long long team_bytes, Kernel&& kernel) {
  unsigned char* shared = tessel_small_host::tessel_linalg_small::tessel_small_shared;
  const long long used = team_bytes * teams, guard = 4096;
  ASSERT_LE(used + guard, 512 * 1024);
  std::fill(shared, shared + used + guard, static_cast<unsigned char>(0xA5));
  tessel_small_host::run_block(Team * teams, kernel);
  for (long long i = used; i < used + guard; ++i) ASSERT_EQ(shared[i], 0xA5) << "shared memory written past the layout";
}
#endif

std::vector<double> random_orthogonal(std::mt19937_64& rng, int n) {  // Gram-Schmidt, twice
  auto q = normal(rng, static_cast<std::size_t>(n * n));
  for (int j = 0; j < n; ++j)
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < j; ++i) {
        double d = 0;
        for (int k = 0; k < n; ++k) d += q[k + i * n] * q[k + j * n];
        for (int k = 0; k < n; ++k) q[k + j * n] -= d * q[k + i * n];
      }
      double nn = 0;
      for (int k = 0; k < n; ++k) nn += q[k + j * n] * q[k + j * n];
      for (int k = 0; k < n; ++k) q[k + j * n] /= std::sqrt(nn);
    }
  return q;
}

// Column-major n x n Q diag(lambda) Q^T.
std::vector<double> with_spectrum(const std::vector<double>& q, const std::vector<double>& lambda, int n) {
  std::vector<double> a(static_cast<std::size_t>(n * n), 0.0);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < n; ++k) a[i + j * n] += q[i + k * n] * lambda[k] * q[j + k * n];
  return a;
}

// Test matrices: random (normal entries; the eigh ones symmetric), repeated (eigenvalues of
// multiplicity n / 2 and more; rank deficient for svd), ill-conditioned (eigenvalues or column
// scales from 1 to eps), zero, NaN, Inf, huge and tiny (squares overflow or vanish); for eigh
// also diagonal (with a repeated entry), the identity, rank one (x x^T) and tridiagonal.
enum class Kind { random, repeated, ill_conditioned, zero, nan, inf, huge, tiny, diagonal, identity, rank_one, tridiagonal };

// The eigenvalues of the repeated and ill-conditioned kinds.
std::vector<double> spectrum(int n, Kind kind, double eps) {
  std::vector<double> lambda(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    const double step = n > 1 ? static_cast<double>(k) / (n - 1) : 0.0;
    lambda[k] = kind == Kind::repeated ? (k < n / 2 ? 2.0 : (k % 2 ? -1.0 : 3.0)) : std::pow(eps, step) * (k % 2 ? -1 : 1);
  }
  return lambda;
}

// One symmetric test matrix of each kind (column-major, double).
std::vector<double> symmetric(std::mt19937_64& rng, int n, Kind kind, double eps) {
  std::vector<double> a(static_cast<std::size_t>(n * n), 0.0);
  if (kind == Kind::random || kind == Kind::nan || kind == Kind::inf || kind == Kind::huge || kind == Kind::tiny) {
    const auto x = normal(rng, a.size());
    // huge and tiny: the squares of the entries overflow or vanish in float (eps 1.2e-7) and double
    const double scale = kind == Kind::huge ? (eps > 1e-10 ? 1e30 : 1e200) : kind == Kind::tiny ? (eps > 1e-10 ? 1e-30 : 1e-200) : 1.0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) a[i + j * n] = scale * x[std::max(i, j) + std::min(i, j) * n];
    if (kind == Kind::nan) a[(n - 1) + std::min(2, n - 1) * n] = NAN;  // in the lower triangle at every n
    if (kind == Kind::inf) a[(n - 1) + std::min(3, n - 1) * n] = INFINITY;
  } else if (kind == Kind::repeated || kind == Kind::ill_conditioned) {
    a = with_spectrum(random_orthogonal(rng, n), spectrum(n, kind, eps), n);
  } else if (kind == Kind::diagonal || kind == Kind::identity) {
    const auto x = normal(rng, static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) a[i + i * n] = kind == Kind::identity ? 1.0 : x[i];
    if (kind == Kind::diagonal && n > 2) a[(n - 1) + (n - 1) * n] = a[0];
  } else if (kind == Kind::rank_one) {
    const auto x = normal(rng, static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) a[i + j * n] = x[i] * x[j];
  } else if (kind == Kind::tridiagonal) {
    const auto x = normal(rng, static_cast<std::size_t>(2 * n));
    for (int i = 0; i < n; ++i) {
      a[i + i * n] = x[i];
      if (i + 1 < n) a[(i + 1) + i * n] = a[i + (i + 1) * n] = x[n + i];
    }
  }
  return a;
}

// `kernel` on `batch` matrices of `kind` (jacobi_eigh_warp on `warps` warps, 32 / GroupWidth<N>
// matrices a warp), with and without vectors, into poisoned outputs: info 0, w ascending and equal
// to the float64 eigenvalues (the known ones, or jacobi_eigh's in double), A V = V diag(w) and
// V^T V = I, all to 20 eps N (times max|A|); NaN and Inf input: info 1 and every output NaN.
template <class T, int N>
void check_eigh_kernel(std::mt19937_64& rng, EighKernel kernel, Kind kind, int warps, int batch) {
  const char* names[] = {"jacobi_eigh", "tridiagonal_eigh", "jacobi_eigh_warp"};
  SCOPED_TRACE(::testing::Message() << names[static_cast<int>(kernel)] << " N " << N << " warps " << warps << " kind "
                                    << static_cast<int>(kind) << (sizeof(T) == 4 ? " float" : " double"));
  const double eps = sizeof(T) == 4 ? 1.2e-7 : 2.3e-16;
#if defined(TESSEL_HAVE_CUDA)
  const tessel::DType dtype = sizeof(T) == 4 ? tessel::DType::float32 : tessel::DType::float64;
  const SmallKernel kinds[] = {SmallKernel::eigh, SmallKernel::eigh_tridiagonal, SmallKernel::eigh_warp};
  EXPECT_EQ(small_kernel_request(kinds[static_cast<int>(kernel)], dtype, N, N, false).name,
            std::string("tessel_linalg_small::") + names[static_cast<int>(kernel)] + "<" +
                (sizeof(T) == 4 ? "float" : "double") + ", " + std::to_string(N) + ">");
#endif
  for (bool vectors : {true, false}) {
    std::vector<std::vector<double>> ref;
    // row-major input, the eigenvectors into a poisoned buffer of their own
    std::vector<T> a(static_cast<std::size_t>(batch * N * N)), w(static_cast<std::size_t>(batch * N), T(-7));
    std::vector<T> vout(a.size(), T(-7));
    for (int b = 0; b < batch; ++b) {
      ref.push_back(symmetric(rng, N, kind, eps));
      for (int e = 0; e < N * N; ++e) {
        const int i = e / N, j = e % N;  // ref is column-major
        a[b * N * N + e] = i >= j ? static_cast<T>(ref[b][i + j * N]) : T(1e30);  // the upper triangle is never read
      }
    }
    std::vector<int> info(static_cast<std::size_t>(batch), -1);
    if (kernel != EighKernel::warp) {
      per_thread_eigh<T, N>(kernel, a.data(), vout.data(), w.data(), vectors ? 1 : 0, info.data(), batch);
    } else {
#if defined(TESSEL_HAVE_CUDA)
      const long long bytes = block_kernel_bytes(SmallKernel::eigh_warp, dtype, N, N, vectors);
      run_teams<32>(warps, bytes, [&] {
        jacobi_eigh_warp<T, N>(a.data(), vout.data(), w.data(), vectors ? 1 : 0, 60, info.data(), batch, bytes);
      });
#else
      FAIL() << "jacobi_eigh_warp's layout is the CUDA build's";
#endif
    }
    for (int b = 0; b < batch; ++b) {
      const T* wb = w.data() + b * N;
      const T* v = vout.data() + b * N * N;  // row-major: (i, j) at i * N + j
      if (kind == Kind::nan || kind == Kind::inf) {
        EXPECT_EQ(info[b], 0);
        for (int j = 0; j < N; ++j) EXPECT_TRUE(std::isnan(wb[j]));
        if (vectors) {
          for (int e = 0; e < N * N; ++e) EXPECT_TRUE(std::isnan(v[e])) << e;
        }
        continue;
      }
      EXPECT_EQ(info[b], 0);
      EXPECT_TRUE(std::is_sorted(wb, wb + N));
      double scale = 0;
      for (double x : ref[b]) scale = std::max(scale, std::fabs(x));
      const double tol = 20 * eps * N * std::max(scale, 1e-300);
      if (kind == Kind::zero) {
        for (int j = 0; j < N; ++j) EXPECT_EQ(wb[j], T(0));
      }
      std::vector<double> want(static_cast<std::size_t>(N), 0.0);
      if (kind == Kind::repeated || kind == Kind::ill_conditioned) {
        want = spectrum(N, kind, eps);
      } else if (kind == Kind::zero || kind == Kind::diagonal || kind == Kind::identity) {
        for (int j = 0; j < N; ++j) want[j] = ref[b][j + j * N];
      } else if (kind == Kind::rank_one) {
        for (int j = 0; j < N; ++j) want[N - 1] += ref[b][j + j * N];  // x^T x
      } else {
        int ref_info = -1;
        jacobi_eigh<double, N>(ref[b].data(), nullptr, want.data(), 0, 60, &ref_info, 1);  // symmetric: either order
        EXPECT_EQ(ref_info, 0);
      }
      std::sort(want.begin(), want.end());
      for (int j = 0; j < N; ++j) EXPECT_NEAR(wb[j], want[j], tol) << j;
      if (!vectors) continue;
      for (int j = 0; j < N; ++j)
        for (int i = 0; i < N; ++i) {
          double av = 0, vv = 0;
          for (int k = 0; k < N; ++k) {
            av += ref[b][i + k * N] * v[k * N + j];
            vv += static_cast<double>(v[k * N + i]) * v[k * N + j];
          }
          ASSERT_NEAR(av, static_cast<double>(v[i * N + j]) * wb[j], tol) << "A v = v w at " << i << ", " << j;
          ASSERT_NEAR(vv, i == j ? 1.0 : 0.0, 20 * eps * N) << "V^T V = I at " << i << ", " << j;
        }
    }
  }
}

// check_eigh_kernel of a per-thread kernel at orders 1 to sizeof...(Ns), float and double.
template <int... Ns>
void check_eigh_orders(std::mt19937_64& rng, EighKernel kernel, Kind kind, int batch, std::integer_sequence<int, Ns...>) {
  (check_eigh_kernel<float, Ns + 1>(rng, kernel, kind, 0, batch), ...);
  (check_eigh_kernel<double, Ns + 1>(rng, kernel, kind, 0, batch), ...);
}

constexpr Kind kEighKinds[] = {Kind::random,   Kind::repeated, Kind::ill_conditioned, Kind::zero,
                               Kind::nan,      Kind::inf,      Kind::huge,            Kind::tiny,
                               Kind::diagonal, Kind::identity, Kind::rank_one,        Kind::tridiagonal};

// Both per-thread eigh kernels, every kind, orders 1-8 and batches of 200 at 8; the tridiagonal
// kernel also at the larger orders it takes (float 12, its table's largest; double 16, its largest).
TEST(LinalgSmallKernelsOnHost, PerThreadEighEveryKind) {
  std::mt19937_64 rng(8);
  for (EighKernel kernel : {EighKernel::jacobi, EighKernel::tridiagonal}) {
    for (Kind kind : kEighKinds) {
      check_eigh_orders(rng, kernel, kind, 20, std::make_integer_sequence<int, 8>{});
      check_eigh_kernel<float, 8>(rng, kernel, kind, 0, 200);
      check_eigh_kernel<double, 8>(rng, kernel, kind, 0, 200);
      if (kernel == EighKernel::tridiagonal) {
        check_eigh_kernel<float, 12>(rng, kernel, kind, 0, 10);
        check_eigh_kernel<double, 16>(rng, kernel, kind, 0, 5);
      }
    }
  }
}

#if defined(TESSEL_HAVE_CUDA)
// Column-major m x n test matrices: random, rank deficient (a repeated and a zero column),
// ill-conditioned (columns scaled down to eps), zero, NaN, Inf.
std::vector<double> general(std::mt19937_64& rng, int m, int n, Kind kind, double eps) {
  std::vector<double> a(static_cast<std::size_t>(m * n), 0.0);
  if (kind == Kind::zero) return a;
  a = normal(rng, a.size());
  if (kind == Kind::repeated) {
    for (int k = 0; k < m; ++k) {
      a[k + (n - 1) * m] = a[k];
      a[k + (n / 2) * m] = 0.0;
    }
  }
  if (kind == Kind::ill_conditioned) {
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < m; ++k) a[k + j * m] *= std::pow(eps, static_cast<double>(j) / (n - 1));
  }
  if (kind == Kind::nan) a[3] = NAN;
  if (kind == Kind::inf) a[m + 1] = -INFINITY;
  if (kind == Kind::huge || kind == Kind::tiny) {
    const double scale = kind == Kind::huge ? (eps > 1e-10 ? 1e30 : 1e200) : (eps > 1e-10 ? 1e-30 : 1e-200);
    for (double& x : a) x *= scale;
  }
  return a;
}

// jacobi_svd_block on `teams` teams of Team threads, or (teams == 0) the one-matrix-per-thread
// jacobi_svd.
template <class T, int M, int N, int Team>
void check_svd_block(std::mt19937_64& rng, Kind kind, int teams, int batch) {
  SCOPED_TRACE(::testing::Message() << (teams ? "svd_block " : "svd ") << M << "x" << N << " Team " << Team << " kind "
                                    << static_cast<int>(kind) << (sizeof(T) == 4 ? " float" : " double"));
  const double eps = sizeof(T) == 4 ? 1.2e-7 : 2.3e-16;
  for (bool vectors : {true, false}) {
    std::vector<std::vector<double>> ref;
    std::vector<T> a(static_cast<std::size_t>(batch * M * N)), s(static_cast<std::size_t>(batch * N), T(-7));
    std::vector<T> u(static_cast<std::size_t>(batch * M * N), T(-7)), vh(static_cast<std::size_t>(batch * N * N), T(-7));
    for (int b = 0; b < batch; ++b) {
      ref.push_back(general(rng, M, N, kind, eps));
      for (int e = 0; e < M * N; ++e) a[b * M * N + e] = static_cast<T>(ref[b][e]);
    }
    const auto a0 = a;
    std::vector<int> info(static_cast<std::size_t>(batch), -1);
    const long long bytes = block_kernel_bytes(SmallKernel::svd_block, sizeof(T) == 4 ? tessel::DType::float32
                                                                                      : tessel::DType::float64,
                                               M, N, vectors);
    if (teams == 0) {
      jacobi_svd<T, M, N>(a.data(), s.data(), u.data(), vh.data(), vectors ? 1 : 0, 60, info.data(), batch);
    } else {
      run_teams<Team>(teams, bytes, [&] {
        jacobi_svd_block<T, M, N, Team>(a.data(), s.data(), u.data(), vh.data(), vectors ? 1 : 0, 60, info.data(),
                                        batch, bytes);
      });
    }
    EXPECT_EQ(std::memcmp(a.data(), a0.data(), a.size() * sizeof(T)), 0);  // read only
    for (int b = 0; b < batch; ++b) {
      const T* sb = s.data() + b * N;
      const T* ub = u.data() + b * M * N;
      const T* vb = vh.data() + b * N * N;
      if (kind == Kind::nan || kind == Kind::inf) {
        EXPECT_EQ(info[b], 0);
        for (int j = 0; j < N; ++j) EXPECT_TRUE(std::isnan(sb[j]));
        if (vectors) {
          EXPECT_TRUE(std::isnan(ub[0]) && std::isnan(vb[0]));
        }
        continue;
      }
      EXPECT_EQ(info[b], 0);
      EXPECT_TRUE(std::is_sorted(sb, sb + N, [](T x, T y) { return x > y; }));
      double scale = 0;
      for (double x : ref[b]) scale = std::max(scale, std::fabs(x));
      const double tol = 20 * eps * M * std::max(scale, 1e-300);
      if (kind == Kind::zero) {
        for (int j = 0; j < N; ++j) EXPECT_EQ(sb[j], T(0));
      }
      if (kind == Kind::repeated) {
        EXPECT_LE(sb[N - 1], tol);  // rank <= N - 2
      }
      if (!vectors) continue;
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double r = 0;
          for (int k = 0; k < N; ++k) r += static_cast<double>(ub[i + k * M]) * sb[k] * vb[k + j * N];
          ASSERT_NEAR(r, ref[b][i + j * M], tol) << "U S Vh = A at " << i << ", " << j;
        }
      for (int p = 0; p < N; ++p)
        for (int q = 0; q < N; ++q) {
          double du = 0, dv = 0;
          for (int k = 0; k < M; ++k) du += static_cast<double>(ub[k + p * M]) * ub[k + q * M];
          for (int k = 0; k < N; ++k) dv += static_cast<double>(vb[p + k * N]) * vb[q + k * N];
          ASSERT_NEAR(du, p == q ? 1.0 : 0.0, 20 * eps * M) << "U^T U = I at " << p << ", " << q;
          ASSERT_NEAR(dv, p == q ? 1.0 : 0.0, 20 * eps * N) << "Vh Vh^T = I at " << p << ", " << q;
        }
    }
  }
}

TEST(LinalgSmallKernelsOnHost, JacobiEighWarp) {
  std::mt19937_64 rng(7);
  for (Kind kind : {Kind::random, Kind::repeated, Kind::ill_conditioned, Kind::zero, Kind::nan, Kind::inf, Kind::huge,
                    Kind::tiny}) {
    check_eigh_kernel<double, 32>(rng, EighKernel::warp, kind, 2, 3);  // a matrix per warp, the last warp idle
    check_eigh_kernel<float, 32>(rng, EighKernel::warp, kind, 1, 1);
    check_eigh_kernel<double, 21>(rng, EighKernel::warp, kind, 1, 2);  // lanes 21-31 hold no column
    check_eigh_kernel<float, 12>(rng, EighKernel::warp, kind, 1, 3);   // two matrices per warp, one idle group
    check_eigh_kernel<double, 9>(rng, EighKernel::warp, kind, 2, 5);   // two per warp, two warps
    check_eigh_kernel<float, 8>(rng, EighKernel::warp, kind, 1, 4);    // four per warp (the table's n 8 rows)
    check_eigh_kernel<double, 7>(rng, EighKernel::warp, kind, 2, 6);   // four per warp, lane 7 of each group idle
    check_eigh_kernel<float, 5>(rng, EighKernel::warp, kind, 1, 3);
  }
  // Many random matrices: no sweep cap, every pair converged (a single unlucky matrix would set info).
  check_eigh_kernel<double, 16>(rng, EighKernel::warp, Kind::random, 4, 64);
  check_eigh_kernel<float, 24>(rng, EighKernel::warp, Kind::random, 4, 32);
}

TEST(LinalgSmallKernelsOnHost, JacobiSvdEveryKind) {
  std::mt19937_64 rng(9);
  for (Kind kind : {Kind::random, Kind::repeated, Kind::ill_conditioned, Kind::zero, Kind::nan, Kind::inf, Kind::huge,
                    Kind::tiny}) {
    check_svd_block<float, 8, 8, 32>(rng, kind, 0, 50);
    check_svd_block<double, 11, 8, 32>(rng, kind, 0, 50);
    check_svd_block<double, 16, 16, 32>(rng, kind, 0, 10);
  }
}

TEST(LinalgSmallKernelsOnHost, JacobiSvdBlock) {
  std::mt19937_64 rng(6);
  // The emulated shuffles switch fibers twice each: few and small matrices.
  for (Kind kind : {Kind::random, Kind::repeated, Kind::ill_conditioned, Kind::zero, Kind::nan, Kind::inf}) {
    check_svd_block<double, 17, 17, 32>(rng, kind, 2, 3);  // a warp per matrix, two per block, uneven
    check_svd_block<float, 40, 33, 64>(rng, kind, 1, 1);   // the block per matrix
  }
  check_svd_block<float, 70, 17, 32>(rng, Kind::repeated, 1, 1);  // three rows per lane
  check_svd_block<double, 33, 33, 64>(rng, Kind::repeated, 1, 1);
}
#endif

}  // namespace
