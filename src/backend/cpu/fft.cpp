// CPU FFT: a recursive mixed-radix decimation-in-time transform in double precision, for any
// length. Radix 4, 2, 3 and 5 have dedicated butterflies; other prime factors (7, 11, ...) use
// a generic radix-p butterfly, and a length whose largest prime factor exceeds
// kBluesteinPrimeLimit goes through Bluestein's chirp-z algorithm (a convolution by
// power-of-two FFTs), so every length costs O(n log n). float32 data is widened to double,
// transformed and rounded once, so its error is that of one rounding. Batches run in parallel
// (OpenMP), each thread with its own scratch rows.
#include <cmath>
#include <complex>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "backend/fft.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

using cdouble = std::complex<double>;

// Complex product without the C99 Annex G inf/nan recovery that std::complex's operator* calls
// out of line (__muldc3): several times faster, and identical for finite values.
inline cdouble mul(const cdouble& a, const cdouble& b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}

// Above this prime factor a generic butterfly (O(p) work per element) costs more than Bluestein.
constexpr std::int64_t kBluesteinPrimeLimit = 61;

// exp(-2 pi i k / n), with the angle reduced to the first octant's accuracy by symmetry of k.
cdouble unit_root(std::int64_t k, std::int64_t n) {
  k %= n;
  if (k < 0) k += n;
  const long double angle = -2.0L * 3.141592653589793238462643383279502884L * static_cast<long double>(k) /
                            static_cast<long double>(n);
  return {static_cast<double>(std::cos(angle)), static_cast<double>(std::sin(angle))};
}

struct Stage {
  std::int64_t radix;
  std::int64_t m;  // length of each sub-transform at this stage
};

// A plan for one length: stages of the mixed-radix recursion and the twiddles exp(-2 pi i k / n),
// or, for Bluestein, the chirp and the transformed convolution kernel with an inner plan.
struct Plan {
  std::int64_t n = 0;
  std::vector<Stage> stages;
  std::vector<cdouble> twiddles;  // size n
  bool bluestein = false;
  std::vector<cdouble> chirp;           // exp(-pi i k^2 / n), size n
  std::vector<cdouble> kernel_fft;      // FFT of the conjugate chirp, wrapped, size m
  std::shared_ptr<const Plan> inner;    // power-of-two plan of size m
};

std::shared_ptr<const Plan> get_plan(std::int64_t n);
// Forward unnormalized DFT of one contiguous row of plan.n elements (in != out).
void transform_row(const Plan& plan, const cdouble* in, cdouble* out, std::vector<cdouble>& scratch);

std::vector<std::int64_t> factorize(std::int64_t n) {
  std::vector<std::int64_t> radices;
  while (n % 4 == 0) {
    radices.push_back(4);
    n /= 4;
  }
  if (n % 2 == 0) {
    radices.push_back(2);
    n /= 2;
  }
  for (std::int64_t p = 3; p * p <= n; p += 2) {
    while (n % p == 0) {
      radices.push_back(p);
      n /= p;
    }
  }
  if (n > 1) radices.push_back(n);
  return radices;
}

std::shared_ptr<const Plan> make_plan(std::int64_t n) {
  auto plan = std::make_shared<Plan>();
  plan->n = n;
  const std::vector<std::int64_t> radices = factorize(n);
  std::int64_t largest = 1;
  for (std::int64_t r : radices) largest = std::max(largest, r);
  if (largest > kBluesteinPrimeLimit) {
    plan->bluestein = true;
    std::int64_t m = 1;
    while (m < 2 * n - 1) m *= 2;
    plan->inner = get_plan(m);
    plan->chirp.resize(static_cast<std::size_t>(n));
    // k^2 mod 2n keeps the angle small, so the chirp is accurate for large k; it is updated as
    // k^2 = (k-1)^2 + 2k - 1 so nothing overflows.
    std::int64_t k2 = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      if (k > 0) k2 = (k2 + 2 * k - 1) % (2 * n);
      plan->chirp[static_cast<std::size_t>(k)] = unit_root(k2, 2 * n);
    }
    std::vector<cdouble> kernel(static_cast<std::size_t>(m), cdouble(0, 0));
    kernel[0] = std::conj(plan->chirp[0]);
    for (std::int64_t k = 1; k < n; ++k) {
      kernel[static_cast<std::size_t>(k)] = kernel[static_cast<std::size_t>(m - k)] =
          std::conj(plan->chirp[static_cast<std::size_t>(k)]);
    }
    plan->kernel_fft.resize(static_cast<std::size_t>(m));
    std::vector<cdouble> scratch;
    transform_row(*plan->inner, kernel.data(), plan->kernel_fft.data(), scratch);
    return plan;
  }
  std::int64_t rest = n;
  for (std::int64_t r : radices) {
    rest /= r;
    plan->stages.push_back({r, rest});
  }
  plan->twiddles.resize(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) plan->twiddles[static_cast<std::size_t>(k)] = unit_root(k, n);
  return plan;
}

// Plans are cached by length (a few hundred lengths at most in practice; the cache is cleared
// when it grows past that, which only costs replanning).
std::shared_ptr<const Plan> get_plan(std::int64_t n) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::int64_t, std::shared_ptr<const Plan>>();  // leaked on purpose
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache->find(n);
    if (it != cache->end()) return it->second;
  }
  std::shared_ptr<const Plan> plan = make_plan(n);  // outside the lock: Bluestein plans recurse
  std::lock_guard<std::mutex> lock(mutex);
  if (cache->size() >= 512) cache->clear();
  cache->emplace(n, plan);
  return plan;
}

// The recursion: out[0 .. p*m) = DFT of the p*m inputs in[0], in[s], in[2s], ... where
// s = fstride * in_stride; twiddle index steps by fstride (the stage's share of n).
void work(const Plan& plan, std::size_t level, cdouble* out, const cdouble* in, std::int64_t fstride,
          std::vector<cdouble>& scratch) {
  const std::int64_t p = plan.stages[level].radix;
  const std::int64_t m = plan.stages[level].m;
  if (m == 1) {
    for (std::int64_t q = 0; q < p; ++q) out[q] = in[q * fstride];
  } else {
    for (std::int64_t q = 0; q < p; ++q) work(plan, level + 1, out + q * m, in + q * fstride, fstride * p, scratch);
  }
  const cdouble* tw = plan.twiddles.data();
  if (p == 2) {
    for (std::int64_t u = 0; u < m; ++u) {
      const cdouble t = mul(out[u + m], tw[u * fstride]);
      out[u + m] = out[u] - t;
      out[u] += t;
    }
  } else if (p == 4) {
    for (std::int64_t u = 0; u < m; ++u) {
      const cdouble a0 = out[u];
      const cdouble a1 = mul(out[u + m], tw[u * fstride]);
      const cdouble a2 = mul(out[u + 2 * m], tw[2 * u * fstride]);
      const cdouble a3 = mul(out[u + 3 * m], tw[3 * u * fstride]);
      const cdouble s02 = a0 + a2, d02 = a0 - a2, s13 = a1 + a3, d13 = a1 - a3;
      const cdouble d13_times_minus_i(d13.imag(), -d13.real());
      out[u] = s02 + s13;
      out[u + m] = d02 + d13_times_minus_i;
      out[u + 2 * m] = s02 - s13;
      out[u + 3 * m] = d02 - d13_times_minus_i;
    }
  } else if (p == 3) {
    // X1,2 = a0 - (a1 + a2) / 2 -/+ i sin(2 pi / 3) (a1 - a2)
    const double sin60 = std::sqrt(3.0) / 2;
    for (std::int64_t u = 0; u < m; ++u) {
      const cdouble a0 = out[u];
      const cdouble a1 = mul(out[u + m], tw[u * fstride]);
      const cdouble a2 = mul(out[u + 2 * m], tw[2 * u * fstride]);
      const cdouble sum = a1 + a2, diff = a1 - a2;
      const cdouble mid = a0 - 0.5 * sum;
      const cdouble rot(sin60 * diff.imag(), -sin60 * diff.real());  // -i sin60 (a1 - a2)
      out[u] = a0 + sum;
      out[u + m] = mid + rot;
      out[u + 2 * m] = mid - rot;
    }
  } else if (p == 5) {
    // Pairs (a1, a4) and (a2, a3) share cosines; their differences carry the sines.
    static const double c1 = std::cos(2 * 3.14159265358979323846 / 5), c2 = std::cos(4 * 3.14159265358979323846 / 5);
    static const double s1 = std::sin(2 * 3.14159265358979323846 / 5), s2 = std::sin(4 * 3.14159265358979323846 / 5);
    for (std::int64_t u = 0; u < m; ++u) {
      const cdouble a0 = out[u];
      const cdouble a1 = mul(out[u + m], tw[u * fstride]);
      const cdouble a2 = mul(out[u + 2 * m], tw[2 * u * fstride]);
      const cdouble a3 = mul(out[u + 3 * m], tw[3 * u * fstride]);
      const cdouble a4 = mul(out[u + 4 * m], tw[4 * u * fstride]);
      const cdouble s14 = a1 + a4, d14 = a1 - a4, s23 = a2 + a3, d23 = a2 - a3;
      const cdouble m1 = a0 + c1 * s14 + c2 * s23, m2 = a0 + c2 * s14 + c1 * s23;
      const cdouble t1 = s1 * d14 + s2 * d23, t2 = s2 * d14 - s1 * d23;
      const cdouble r1(t1.imag(), -t1.real()), r2(t2.imag(), -t2.real());  // -i t
      out[u] = a0 + s14 + s23;
      out[u + m] = m1 + r1;
      out[u + 4 * m] = m1 - r1;
      out[u + 2 * m] = m2 + r2;
      out[u + 3 * m] = m2 - r2;
    }
  } else {
    // Generic radix p: twiddle the p inputs of each butterfly, then a direct p-point DFT whose
    // roots exp(-2 pi i k / p) are twiddles[k * n / p].
    const std::int64_t n = plan.n;
    const std::int64_t root_step = n / p;
    if (static_cast<std::int64_t>(scratch.size()) < p) scratch.resize(static_cast<std::size_t>(p));
    for (std::int64_t u = 0; u < m; ++u) {
      for (std::int64_t q = 0; q < p; ++q) scratch[static_cast<std::size_t>(q)] = mul(out[u + q * m], tw[(q * u * fstride) % n]);
      for (std::int64_t k = 0; k < p; ++k) {
        cdouble sum = scratch[0];
        std::int64_t index = 0;
        for (std::int64_t q = 1; q < p; ++q) {
          index += k;
          if (index >= p) index -= p;
          sum += mul(scratch[static_cast<std::size_t>(q)], tw[index * root_step]);
        }
        out[u + k * m] = sum;
      }
    }
  }
}

void transform_row(const Plan& plan, const cdouble* in, cdouble* out, std::vector<cdouble>& scratch) {
  if (plan.n == 1) {
    out[0] = in[0];
    return;
  }
  if (!plan.bluestein) {
    work(plan, 0, out, in, 1, scratch);
    return;
  }
  // Bluestein: X_k = chirp_k * sum_j (x_j chirp_j) conj(chirp_{k-j}), a circular convolution of
  // length m computed as IFFT(FFT(a) * FFT(b)); the inverse is conj(FFT(conj(.))) / m.
  const Plan& inner = *plan.inner;
  const std::int64_t n = plan.n, m = inner.n;
  std::vector<cdouble> a(static_cast<std::size_t>(m), cdouble(0, 0)), fa(static_cast<std::size_t>(m));
  for (std::int64_t j = 0; j < n; ++j) a[static_cast<std::size_t>(j)] = mul(in[j], plan.chirp[static_cast<std::size_t>(j)]);
  transform_row(inner, a.data(), fa.data(), scratch);
  for (std::int64_t k = 0; k < m; ++k) {
    fa[static_cast<std::size_t>(k)] = std::conj(mul(fa[static_cast<std::size_t>(k)], plan.kernel_fft[static_cast<std::size_t>(k)]));
  }
  transform_row(inner, fa.data(), a.data(), scratch);
  const double inv_m = 1.0 / static_cast<double>(m);
  for (std::int64_t k = 0; k < n; ++k) {
    out[k] = mul(std::conj(a[static_cast<std::size_t>(k)]) * inv_m, plan.chirp[static_cast<std::size_t>(k)]);
  }
}

template <class Real>
void run(const FFTProblem& p) {
  using Complex = std::complex<Real>;
  const std::int64_t n = p.n;
  const std::shared_ptr<const Plan> plan = get_plan(n);
  const std::int64_t half = n / 2 + 1;
  const double scale = p.scale;
  const bool conjugate = p.kind == FFTKind::c2r || (p.kind == FFTKind::c2c && p.inverse);
#pragma omp parallel if (p.batch > 1 && p.batch * n > 16384)
  {
    std::vector<cdouble> row(static_cast<std::size_t>(n)), result(static_cast<std::size_t>(n)), scratch;
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < p.batch; ++b) {
      // Gather the row in double; an inverse transform is conj(FFT(conj(x))).
      if (p.kind == FFTKind::r2c) {
        const Real* in = static_cast<const Real*>(p.in) + b * p.in_dist;
        for (std::int64_t j = 0; j < n; ++j) row[static_cast<std::size_t>(j)] = cdouble(static_cast<double>(in[j * p.in_stride]), 0.0);
      } else if (p.kind == FFTKind::c2c) {
        const Complex* in = static_cast<const Complex*>(p.in) + b * p.in_dist;
        for (std::int64_t j = 0; j < n; ++j) {
          const Complex v = in[j * p.in_stride];
          row[static_cast<std::size_t>(j)] = cdouble(v.real(), conjugate ? -double(v.imag()) : double(v.imag()));
        }
      } else {
        // c2r: extend the n/2+1 given values to the Hermitian spectrum (conjugated for the inverse).
        const Complex* in = static_cast<const Complex*>(p.in) + b * p.in_dist;
        for (std::int64_t k = 0; k < half; ++k) {
          const Complex v = in[k * p.in_stride];
          row[static_cast<std::size_t>(k)] = cdouble(v.real(), -double(v.imag()));
        }
        for (std::int64_t k = half; k < n; ++k) row[static_cast<std::size_t>(k)] = std::conj(row[static_cast<std::size_t>(n - k)]);
      }
      transform_row(*plan, row.data(), result.data(), scratch);
      if (p.kind == FFTKind::c2r) {
        Real* out = static_cast<Real*>(p.out) + b * p.out_dist;
        for (std::int64_t j = 0; j < n; ++j) out[j * p.out_stride] = static_cast<Real>(result[static_cast<std::size_t>(j)].real() * scale);
      } else {
        Complex* out = static_cast<Complex*>(p.out) + b * p.out_dist;
        const std::int64_t count = p.kind == FFTKind::r2c ? half : n;
        for (std::int64_t k = 0; k < count; ++k) {
          const cdouble v = result[static_cast<std::size_t>(k)];
          out[k * p.out_stride] = Complex(static_cast<Real>(v.real() * scale),
                                          static_cast<Real>((conjugate ? -v.imag() : v.imag()) * scale));
        }
      }
    }
  }
}

}  // namespace

void fft(const FFTProblem& problem, const Stream& /*stream*/) {
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
