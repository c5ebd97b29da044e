// CPU matrix products: OpenBLAS gemm per batch. float16/bfloat16 go through float32 (converted
// per batch), int8 x int8 -> int32 is a plain loop (exact). The bias and activation are applied
// after the gemm, in the accumulation type.
//
// Threads: one large product runs on the BLAS's threads (num_threads() of them, use_blas_threads);
// a batch of small products runs one product per OpenMP thread with the BLAS single-threaded
// (BlasSerialRegion), so the two pools never run at once.
#include "backend/cpu/blas.hpp"

#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <mutex>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "backend/activation.hpp"
#include "backend/cpu/strided_loop.hpp"
#include "backend/cpu/blas_threads.hpp"
#include "backend/cpu/threads.hpp"
#include "backend/matmul.hpp"
#include "tessel/array/half.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

// The BLAS's thread count as tessel last set it (0: not yet), and the BlasSerialRegion nesting.
std::mutex blas_mutex;
std::atomic<int> blas_applied{0};
int blas_serial_depth = 0;

void apply_blas_threads(int threads) {  // blas_mutex held
  if (blas_applied.load(std::memory_order_relaxed) == threads) return;
  openblas_set_num_threads(threads);
  blas_applied.store(threads, std::memory_order_relaxed);
}

}  // namespace

void use_blas_threads() {
  // Inside an OpenMP region the region's owner made the BLAS serial (BlasSerialRegion; OpenBLAS's
  // OpenMP build also runs one thread there by itself): setting it from a worker would race.
  if (omp_in_parallel()) return;
  const int want = tessel::num_threads();
  if (blas_applied.load(std::memory_order_relaxed) == want) return;
  std::lock_guard<std::mutex> lock(blas_mutex);
  if (blas_serial_depth == 0) apply_blas_threads(want);
}

BlasSerialRegion::BlasSerialRegion() {
  std::lock_guard<std::mutex> lock(blas_mutex);
  if (blas_serial_depth++ == 0) apply_blas_threads(1);
}

BlasSerialRegion::~BlasSerialRegion() {
  std::lock_guard<std::mutex> lock(blas_mutex);
  if (--blas_serial_depth == 0) apply_blas_threads(tessel::num_threads());
}

const char* blas_threading() {
  switch (openblas_get_parallel()) {
    case 0: return "sequential";
    case 1: return "pthreads";
    default: return "openmp";
  }
}

int blas_num_threads() { return openblas_get_num_threads(); }

namespace {

template <class T>
T activation(T x, MatmulEpilogue epilogue) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (epilogue) {
      case MatmulEpilogue::relu: return tessel::activation::relu(x);
      case MatmulEpilogue::gelu: return tessel::activation::gelu(x);
      case MatmulEpilogue::gelu_tanh: return tessel::activation::gelu_tanh(x);
      default: return x;  // none, and the *_grad epilogues (activation_grad)
    }
  } else {
    return x;  // complex and integer: ops/matmul.cpp allows no activation
  }
}

// g * act'(z) for the *_grad epilogues, z being the forward's aux.
template <class T>
T activation_grad(T g, T z, MatmulEpilogue epilogue) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (epilogue) {
      case MatmulEpilogue::relu_grad: return tessel::activation::relu_grad(g, z);
      case MatmulEpilogue::gelu_grad: return tessel::activation::gelu_grad(g, z);
      case MatmulEpilogue::gelu_tanh_grad: return tessel::activation::gelu_tanh_grad(g, z);
      default: return g;
    }
  } else {
    return g;
  }
}

// v = D + bias; aux = v; D = act(v) (forward epilogues), or D = v * act'(aux) (the *_grad ones).
// T is the accumulation type, Out the stored type.
template <class T, class Out>
T load(const Out* p) {
  if constexpr (std::is_same_v<Out, float16> || std::is_same_v<Out, bfloat16>) {
    return static_cast<T>(static_cast<float>(*p));
  } else {
    return static_cast<T>(*p);
  }
}
template <class T, class Out>
void store(Out* p, T v) {
  if constexpr (std::is_same_v<Out, float16> || std::is_same_v<Out, bfloat16>) {
    *p = Out(static_cast<float>(v));
  } else {
    *p = static_cast<Out>(v);
  }
}

// Applies bias/activation/aux to batch `bi` of D whose values (alpha*AB+beta*C) are in `acc`
// (m x n row-major with leading dimension ldacc), writing the results to D.
template <class T, class Out>
void finish(const MatmulProblem& p, std::int64_t bi, const T* acc, std::int64_t ldacc) {
  Out* d = static_cast<Out*>(p.d) + bi * p.batch_stride_d;
  Out* aux = p.aux ? static_cast<Out*>(p.aux) + bi * p.batch_stride_aux : nullptr;
  const Out* bias = static_cast<const Out*>(p.bias);
  const bool grad = is_matmul_grad_epilogue(p.epilogue);
  // Rows are independent: the activations (tanh, erf, exp per element) spread over threads.
  const int threads = loop_threads(p.m * p.n, kMinCostlyElementsPerThread);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      T v = acc[i * ldacc + j];
      if (grad) {
        store(d + i * p.ldd + j, activation_grad(v, load<T>(aux + i * p.ldaux + j), p.epilogue));
        continue;
      }
      if (bias) v += load<T>(bias + j);
      if (aux) store(aux + i * p.ldaux + j, v);
      store(d + i * p.ldd + j, activation(v, p.epilogue));
    }
  }
}

CBLAS_TRANSPOSE trans_of(const MatmulOperand& x) { return x.row_major() ? CblasNoTrans : CblasTrans; }
blasint ld_of(const MatmulOperand& x) { return static_cast<blasint>(x.row_major() ? x.row_stride : x.col_stride); }

template <class T>
void blas_gemm(const MatmulProblem& p, const T* a, const MatmulOperand& ao, const T* b, const MatmulOperand& bo,
               T* d, std::int64_t ldd, double beta) {
  const auto m = static_cast<blasint>(p.m), n = static_cast<blasint>(p.n), k = static_cast<blasint>(p.k);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, trans_of(ao), trans_of(bo), m, n, k, static_cast<float>(p.alpha), a, ld_of(ao), b,
                ld_of(bo), static_cast<float>(beta), d, static_cast<blasint>(ldd));
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, trans_of(ao), trans_of(bo), m, n, k, p.alpha, a, ld_of(ao), b, ld_of(bo), beta, d,
                static_cast<blasint>(ldd));
  } else if constexpr (std::is_same_v<T, std::complex<float>>) {
    const std::complex<float> alpha(static_cast<float>(p.alpha)), beta_c(static_cast<float>(beta));
    cblas_cgemm(CblasRowMajor, trans_of(ao), trans_of(bo), m, n, k, &alpha, a, ld_of(ao), b, ld_of(bo), &beta_c, d,
                static_cast<blasint>(ldd));
  } else {
    const std::complex<double> alpha(p.alpha), beta_c(beta);
    cblas_zgemm(CblasRowMajor, trans_of(ao), trans_of(bo), m, n, k, &alpha, a, ld_of(ao), b, ld_of(bo), &beta_c, d,
                static_cast<blasint>(ldd));
  }
}

// Multiply-adds of one product below which a batch runs one product per OpenMP thread (the BLAS
// single-threaded in each) rather than each product on the BLAS's threads: OpenBLAS threads a
// product of 64^3 little, and a batch of them gains the whole thread count this way.
constexpr std::int64_t kBatchParallelMacs = std::int64_t{128} * 128 * 128;

// Calls run(bi) for every batch index: on OpenMP threads with the BLAS serial for a batch of small
// products, else in order with the BLAS on its threads.
template <class Run>
void for_each_batch(const MatmulProblem& p, Run&& run) {
  const std::int64_t macs = p.m * p.n * std::max<std::int64_t>(p.k, 1);
  const int threads = p.batch > 1 && macs <= kBatchParallelMacs ? loop_threads(p.batch * macs, std::int64_t{1} << 18) : 1;
  if (threads <= 1) {
    use_blas_threads();
    for (std::int64_t bi = 0; bi < p.batch; ++bi) run(bi);
    return;
  }
  BlasSerialRegion serial;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t bi = 0; bi < p.batch; ++bi) run(bi);
}

// float32/float64/complex: BLAS writes D directly, then the epilogue runs in place.
template <class T>
void run_native(const MatmulProblem& p) {
  const bool has_epilogue = p.bias || p.aux || p.epilogue != MatmulEpilogue::none;
  for_each_batch(p, [&](std::int64_t bi) {
    const T* a = static_cast<const T*>(p.a.data) + bi * p.a.batch_stride;
    const T* b = static_cast<const T*>(p.b.data) + bi * p.b.batch_stride;
    T* d = static_cast<T*>(p.d) + bi * p.batch_stride_d;
    if (p.k == 0) {
      // BLAS may skip alpha*AB entirely; write beta*D ourselves (beta == 0 ignores NaN in D).
      for (std::int64_t i = 0; i < p.m; ++i) {
        for (std::int64_t j = 0; j < p.n; ++j) {
          T& x = d[i * p.ldd + j];
          x = p.beta == 0.0 ? T(0) : x * static_cast<T>(p.beta);
        }
      }
    } else {
      blas_gemm<T>(p, a, p.a, b, p.b, d, p.ldd, p.beta);
    }
    if (has_epilogue) finish<T, T>(p, bi, d, p.ldd);
  });
}

// float16/bfloat16: operands converted to float32 per batch.
template <class Half>
void run_through_float(const MatmulProblem& p) {
  std::vector<float> a(static_cast<std::size_t>(p.m * p.k)), b(static_cast<std::size_t>(p.k * p.n)),
      d(static_cast<std::size_t>(p.m * p.n));
  MatmulOperand ao{a.data(), p.k, 1, 0}, bo{b.data(), p.n, 1, 0};
  if (p.k == 0) ao.row_stride = 1;
  if (p.n == 0) bo.row_stride = 1;
  use_blas_threads();
  for (std::int64_t bi = 0; bi < p.batch; ++bi) {
    const Half* as = static_cast<const Half*>(p.a.data) + bi * p.a.batch_stride;
    const Half* bs = static_cast<const Half*>(p.b.data) + bi * p.b.batch_stride;
    const Half* ds = static_cast<const Half*>(p.d) + bi * p.batch_stride_d;
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t kk = 0; kk < p.k; ++kk)
        a[static_cast<std::size_t>(i * p.k + kk)] = static_cast<float>(as[i * p.a.row_stride + kk * p.a.col_stride]);
    for (std::int64_t kk = 0; kk < p.k; ++kk)
      for (std::int64_t j = 0; j < p.n; ++j)
        b[static_cast<std::size_t>(kk * p.n + j)] = static_cast<float>(bs[kk * p.b.row_stride + j * p.b.col_stride]);
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j)
        d[static_cast<std::size_t>(i * p.n + j)] = p.beta == 0.0 ? 0.0f : static_cast<float>(ds[i * p.ldd + j]);
    if (p.k == 0) {
      for (float& x : d) x *= static_cast<float>(p.beta);
    } else {
      blas_gemm<float>(p, a.data(), ao, b.data(), bo, d.data(), std::max<std::int64_t>(p.n, 1), p.beta);
    }
    finish<float, Half>(p, bi, d.data(), p.n);
  }
}

void run_int8(const MatmulProblem& p) {
  for (std::int64_t bi = 0; bi < p.batch; ++bi) {
    const auto* a = static_cast<const std::int8_t*>(p.a.data) + bi * p.a.batch_stride;
    const auto* b = static_cast<const std::int8_t*>(p.b.data) + bi * p.b.batch_stride;
    auto* d = static_cast<std::int32_t*>(p.d) + bi * p.batch_stride_d;
    for (std::int64_t i = 0; i < p.m; ++i) {
      for (std::int64_t j = 0; j < p.n; ++j) {
        std::int32_t sum = 0;
        for (std::int64_t kk = 0; kk < p.k; ++kk) {
          sum += static_cast<std::int32_t>(a[i * p.a.row_stride + kk * p.a.col_stride]) *
                 static_cast<std::int32_t>(b[kk * p.b.row_stride + j * p.b.col_stride]);
        }
        d[i * p.ldd + j] = sum;
      }
    }
  }
}

}  // namespace

void matmul(const MatmulProblem& problem, const Stream& /*stream: the CPU runs synchronously*/) {
  if (problem.m == 0 || problem.n == 0 || problem.batch == 0) return;
  // OpenBLAS takes 32-bit sizes and leading dimensions: larger ones would be truncated silently.
  const std::int64_t blas_limit = std::numeric_limits<blasint>::max();
  for (const std::int64_t v : {problem.m, problem.n, problem.k, problem.ldd, problem.a.row_stride, problem.a.col_stride,
                               problem.b.row_stride, problem.b.col_stride}) {
    if (v > blas_limit) {
      throw ValueError(fmt::format("matmul: the CPU backend (OpenBLAS) takes sizes and strides up to {}, got m={} n={} "
                                   "k={} with leading dimensions up to {}",
                                   blas_limit, problem.m, problem.n, problem.k, v));
    }
  }
  switch (problem.dtype) {
    case DType::float32: return run_native<float>(problem);
    case DType::float64: return run_native<double>(problem);
    case DType::complex64: return run_native<std::complex<float>>(problem);
    case DType::complex128: return run_native<std::complex<double>>(problem);
    case DType::float16: return run_through_float<float16>(problem);
    case DType::bfloat16: return run_through_float<bfloat16>(problem);
    case DType::int8: return run_int8(problem);
    default:
      throw DTypeError(fmt::format("matmul: the CPU backend has no kernel for {}", dtype_name(problem.dtype)));
  }
}

}  // namespace tessel::backend::cpu
