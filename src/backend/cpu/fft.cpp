// CPU FFT on pocketfft, the C++ header-only FFT of NumPy and SciPy (pocketfft_hdronly.h,
// BSD-3-Clause; Debian ships it in gemmi-dev as gemmi/third_party/pocketfft_hdronly.h, which
// scripts/install-deps.sh installs). complex64 data is transformed in float, complex128 in
// double; pocketfft handles every length (radix 2, 3, 4, 5, 7, 8, 11 passes, generic radices and
// Bluestein for large prime factors) and vectorizes across the rows of a batch.
//
// Threads are tessel's (OpenMP, TESSEL_NUM_THREADS): pocketfft's own pool only splits the rows of one call, which the
// loops below do as well, so it is compiled out (POCKETFFT_NO_MULTITHREADING) and each thread
// makes one pocketfft call over its share of rows.
//  - A batch: rows cut into one contiguous block per thread, each block one pocketfft call over a
//    (rows, n) view with the caller's strides.
//  - One long complex row (n >= kFourStepMin with a divisor n1 of n, n1 <= sqrt(n), of at least
//    kFourStepMinFactor): Bailey's four-step split, so that pocketfft's batched, vectorized
//    transforms and every thread apply. With j = j1 + n1 j2 and k = k2 + n2 k1 (n = n1 n2):
//      1. B[k2, j1] = DFT_n2 over j2 of x[j1 + n1 j2]       (pocketfft, n1 columns, axis 0)
//      2. B[k2, j1] *= w^(j1 k2), w = exp(-+2 pi i / n)      (the twiddles of the split)
//      3. X[k2 + n2 k1] = DFT_n1 over j1 of B[k2, j1]        (pocketfft, n2 rows, axis 1, written
//                                                             transposed through its strides)
//    The twiddles w^(j1 k2) are the product of two cached tables, w^(j1 r) and w^(j1 q s) for
//    k2 = q s + r, each entry computed in long double and rounded once.
//
// Plans: pocketfft keeps its per-length plans in its own LRU cache (POCKETFFT_CACHE_SIZE
// lengths per transform type and precision); tessel's cache below keeps the four-step tables per
// length and precision.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#define POCKETFFT_NO_MULTITHREADING
#define POCKETFFT_CACHE_SIZE 32
#include <pocketfft_hdronly.h>

#include "backend/cpu/threads.hpp"
#include "backend/fft.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

// One complex row at least this long is split (four-step) when it would run alone: with one thread
// the split is already faster from 2^14 up (pocketfft's 1-D transforms are scalar; its batched ones
// are vectorized).
constexpr std::int64_t kFourStepMin = std::int64_t{1} << 14;
constexpr std::int64_t kFourStepMinFactor = 16;
// Elements of transforms per thread, at least (a 2^14-point transform is a fraction of a millisecond).
constexpr std::int64_t kMinElementsPerThread = std::int64_t{1} << 14;


// The four-step tables of one length and precision: w^(j1 r) for r < s and w^(j1 q s) for
// q < ceil(n2 / s), row-major with n1 entries a row, w = exp(-2 pi i / n).
template <class Real>
struct FourStep {
  std::int64_t n = 0, n1 = 0, n2 = 0, s = 0;
  std::vector<std::complex<Real>> low, high;
};

// exp(-2 pi i e / n) for 0 <= e < n, in long double and rounded once.
template <class Real>
std::complex<Real> root(std::int64_t e, std::int64_t n) {
  const long double angle = -2.0L * 3.141592653589793238462643383279502884L * static_cast<long double>(e) /
                            static_cast<long double>(n);
  return {static_cast<Real>(std::cos(angle)), static_cast<Real>(std::sin(angle))};
}

// The largest divisor of n that is at most sqrt(n).
std::int64_t balanced_factor(std::int64_t n) {
  std::int64_t best = 1;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d == 0) best = d;
  }
  return best;
}

template <class Real>
std::shared_ptr<const FourStep<Real>> make_four_step(std::int64_t n) {
  auto plan = std::make_shared<FourStep<Real>>();
  plan->n = n;
  plan->n1 = balanced_factor(n);
  plan->n2 = n / plan->n1;
  if (plan->n1 < kFourStepMinFactor) return plan;  // no useful split: n1 stays below the factor
  const std::int64_t n1 = plan->n1, n2 = plan->n2;
  plan->s = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(n2))));
  const std::int64_t s = plan->s, highs = (n2 + s - 1) / s;
  plan->low.resize(static_cast<std::size_t>(s * n1));
  plan->high.resize(static_cast<std::size_t>(highs * n1));
  // Exponents modulo n, in 64 bits: j1 * r < n1 * s <= n, j1 * q * s < n1 * n2 = n.
  for (std::int64_t r = 0; r < s; ++r) {
    for (std::int64_t j = 0; j < n1; ++j) plan->low[static_cast<std::size_t>(r * n1 + j)] = root<Real>((j * r) % n, n);
  }
  for (std::int64_t q = 0; q < highs; ++q) {
    for (std::int64_t j = 0; j < n1; ++j) {
      plan->high[static_cast<std::size_t>(q * n1 + j)] = root<Real>((j * q * s) % n, n);
    }
  }
  return plan;
}

// Tessel's CPU plan cache: four-step tables by (length, precision); bounded (cleared when full,
// which only costs replanning).
template <class Real>
std::shared_ptr<const FourStep<Real>> get_four_step(std::int64_t n) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::int64_t, std::shared_ptr<const FourStep<Real>>>();  // leaked on purpose
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache->find(n);
    if (it != cache->end()) return it->second;
  }
  std::shared_ptr<const FourStep<Real>> plan = make_four_step<Real>(n);  // outside the lock
  std::lock_guard<std::mutex> lock(mutex);
  if (cache->size() >= 64) cache->clear();
  cache->emplace(n, plan);
  return plan;
}

// Scratch for the four-step's middle matrix, kept per calling thread up to kKeptScratch bytes
// (a fresh multi-megabyte allocation would cost its page faults on every call).
constexpr std::size_t kKeptScratch = std::size_t{64} << 20;

template <class Real>
struct Scratch {
  std::unique_ptr<std::complex<Real>[]> data;
  std::size_t size = 0;
};

template <class Real>
std::complex<Real>* scratch_for(std::size_t n, std::unique_ptr<std::complex<Real>[]>& owned) {
  thread_local Scratch<Real> kept;
  if (n * sizeof(std::complex<Real>) > kKeptScratch) {
    owned.reset(new std::complex<Real>[n]);
    return owned.get();
  }
  if (kept.size < n) {
    kept.data.reset(new std::complex<Real>[n]);
    kept.size = n;
  }
  return kept.data.get();
}

// One complex row by the four-step split, on `threads` threads.
template <class Real>
void four_step_row(const FourStep<Real>& plan, const std::complex<Real>* in, std::int64_t in_stride,
                   std::complex<Real>* out, std::int64_t out_stride, bool forward, Real scale, int threads) {
  using Complex = std::complex<Real>;
  const std::size_t n1 = static_cast<std::size_t>(plan.n1), n2 = static_cast<std::size_t>(plan.n2);
  const std::size_t s = static_cast<std::size_t>(plan.s);
  const std::ptrdiff_t es = sizeof(Complex);
  std::unique_ptr<Complex[]> owned;
  Complex* mid = scratch_for<Real>(n1 * n2, owned);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::size_t t = static_cast<std::size_t>(omp_get_thread_num()), count = static_cast<std::size_t>(omp_get_num_threads());
    // 1. Columns j1 in [c0, c1): DFT over j2 (stride n1 in x).
    const std::size_t c0 = n1 * t / count, c1 = n1 * (t + 1) / count;
    if (c1 > c0) {
      pocketfft::c2c<Real>({n2, c1 - c0}, {static_cast<std::ptrdiff_t>(n1) * in_stride * es, in_stride * es},
                           {static_cast<std::ptrdiff_t>(n1) * es, es}, {0}, forward, in + c0 * in_stride, mid + c0,
                           Real(1), 1);
    }
#pragma omp barrier
    // 2 and 3. Rows k2 in [r0, r1): twiddle, then DFT over j1 into X[k2 + n2 k1].
    const std::size_t r0 = n2 * t / count, r1 = n2 * (t + 1) / count;
    for (std::size_t k2 = r0; k2 < r1; ++k2) {
      const Complex* low = plan.low.data() + (k2 % s) * n1;
      const Complex* high = plan.high.data() + (k2 / s) * n1;
      Complex* row = mid + k2 * n1;
      for (std::size_t j = 0; j < n1; ++j) {
        // (a b) or conj(a b), written out so that it vectorizes (no inf/nan recovery calls).
        const Real ar = low[j].real(), ai = low[j].imag(), br = high[j].real(), bi = high[j].imag();
        const Real wr = ar * br - ai * bi, wi = forward ? ar * bi + ai * br : -(ar * bi + ai * br);
        const Real xr = row[j].real(), xi = row[j].imag();
        row[j] = Complex(xr * wr - xi * wi, xr * wi + xi * wr);
      }
    }
    if (r1 > r0) {
      pocketfft::c2c<Real>({r1 - r0, n1}, {static_cast<std::ptrdiff_t>(n1) * es, es},
                           {out_stride * es, static_cast<std::ptrdiff_t>(n2) * out_stride * es}, {1}, forward,
                           mid + r0 * n1, out + r0 * out_stride, scale, 1);
    }
  }
}

template <class Real>
void run(const FFTProblem& p) {
  using Complex = std::complex<Real>;
  const std::size_t n = static_cast<std::size_t>(p.n);
  const Real scale = static_cast<Real>(p.scale);
  const int max_threads = loop_threads(p.batch * p.n, kMinElementsPerThread);  // tessel's setting

  if (p.kind == FFTKind::c2c && p.n >= kFourStepMin && p.batch < max_threads * 2) {
    // Few long rows: one after the other, each split over every thread.
    const std::shared_ptr<const FourStep<Real>> plan = get_four_step<Real>(p.n);
    if (plan->s > 0) {
      const bool forward = !p.inverse;
      for (std::int64_t b = 0; b < p.batch; ++b) {
        four_step_row(*plan, static_cast<const Complex*>(p.in) + b * p.in_dist, p.in_stride,
                      static_cast<Complex*>(p.out) + b * p.out_dist, p.out_stride, forward, scale, max_threads);
      }
      return;
    }
  }

  // Rows in one contiguous block per thread; strides in bytes.
  const std::ptrdiff_t in_size = p.kind == FFTKind::r2c ? sizeof(Real) : sizeof(Complex);
  const std::ptrdiff_t out_size = p.kind == FFTKind::c2r ? sizeof(Real) : sizeof(Complex);
  const std::ptrdiff_t in_dist = p.in_dist * in_size, in_stride = p.in_stride * in_size;
  const std::ptrdiff_t out_dist = p.out_dist * out_size, out_stride = p.out_stride * out_size;
  const int threads = static_cast<int>(std::min<std::int64_t>(max_threads, p.batch));
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
    const std::int64_t b0 = p.batch * t / count, b1 = p.batch * (t + 1) / count;
    if (b1 > b0) {
      const pocketfft::shape_t shape{static_cast<std::size_t>(b1 - b0), n};
      const char* in = static_cast<const char*>(p.in) + b0 * in_dist;
      char* out = static_cast<char*>(p.out) + b0 * out_dist;
      if (p.kind == FFTKind::c2c) {
        pocketfft::c2c<Real>(shape, {in_dist, in_stride}, {out_dist, out_stride}, {1}, !p.inverse,
                             reinterpret_cast<const Complex*>(in), reinterpret_cast<Complex*>(out), scale, 1);
      } else if (p.kind == FFTKind::r2c) {
        pocketfft::r2c<Real>(shape, {in_dist, in_stride}, {out_dist, out_stride}, 1, pocketfft::FORWARD,
                             reinterpret_cast<const Real*>(in), reinterpret_cast<Complex*>(out), scale, 1);
      } else {
        // c2r reads the real parts of the zero and (even n) Nyquist frequencies only, as NumPy.
        pocketfft::c2r<Real>(shape, {in_dist, in_stride}, {out_dist, out_stride}, 1, pocketfft::BACKWARD,
                             reinterpret_cast<const Complex*>(in), reinterpret_cast<Real*>(out), scale, 1);
      }
    }
  }
}

}  // namespace

void fft(const FFTProblem& problem, const std::shared_ptr<void>& /*plan*/, const Stream& /*stream*/) {
  if (problem.n < 1) throw ValueError(fmt::format("fft (cpu): invalid transform length {}", problem.n));
  if (problem.batch == 0) return;
  if (problem.dtype == DType::complex64) {
    run<float>(problem);
  } else if (problem.dtype == DType::complex128) {
    run<double>(problem);
  } else {
    throw DTypeError(fmt::format("fft (cpu): unsupported transform dtype {}", dtype_name(problem.dtype)));
  }
}

}  // namespace tessel::backend::cpu
