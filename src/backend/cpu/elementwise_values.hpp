#pragma once
// The CPU elementwise ops' element functions and their vectorized unit-stride loop, shared by
// elementwise.cpp (every op, the baseline instruction set) and elementwise_isa.cpp (the costly
// float ops again for AVX2 and AVX-512, chosen at run time). Everything here has internal linkage
// (an unnamed namespace): each of those translation units keeps its own copy, compiled for its own
// instruction set, so no AVX-512 copy of an inline function can stand in for the baseline's at
// link time.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cuda/device/tessel_math.cuh"
#include "ops/elementwise_table.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/array/half.hpp"

// glibc's vector math library (libmvec, linked through libm's linker script): these declarations
// are the ones glibc's <bits/math-vector.h> makes under -ffast-math, so that GCC's vectorizer calls
// the SIMD variants (_ZGVbN4v_expf and the like, accurate to a few ulp, special values as the
// scalar functions) from the unit-stride loops below. The float and double functions of
// glibc 2.22 (exp, log, sin, cos, pow) always; the rest from 2.35 (TESSEL_LIBMVEC_2_35, set by
// CMake when a program using them links).
#if defined(__x86_64__) && defined(__GLIBC__)
#define TESSEL_SIMD_MATH(NAME)                  \
  _Pragma("omp declare simd notinbranch") float NAME##f(float); \
  _Pragma("omp declare simd notinbranch") double NAME(double);
extern "C" {
TESSEL_SIMD_MATH(exp)
TESSEL_SIMD_MATH(log)
TESSEL_SIMD_MATH(sin)
TESSEL_SIMD_MATH(cos)
#pragma omp declare simd notinbranch
float powf(float, float);
#pragma omp declare simd notinbranch
double pow(double, double);
#if defined(TESSEL_LIBMVEC_2_35)
TESSEL_SIMD_MATH(exp2)
TESSEL_SIMD_MATH(exp10)
TESSEL_SIMD_MATH(expm1)
TESSEL_SIMD_MATH(log2)
TESSEL_SIMD_MATH(log10)
TESSEL_SIMD_MATH(log1p)
TESSEL_SIMD_MATH(tan)
TESSEL_SIMD_MATH(asin)
TESSEL_SIMD_MATH(acos)
TESSEL_SIMD_MATH(atan)
TESSEL_SIMD_MATH(sinh)
TESSEL_SIMD_MATH(cosh)
TESSEL_SIMD_MATH(tanh)
TESSEL_SIMD_MATH(asinh)
TESSEL_SIMD_MATH(acosh)
TESSEL_SIMD_MATH(atanh)
TESSEL_SIMD_MATH(cbrt)
TESSEL_SIMD_MATH(erf)
#pragma omp declare simd notinbranch
float atan2f(float, float);
#pragma omp declare simd notinbranch
double atan2(double, double);
#pragma omp declare simd notinbranch
float hypotf(float, float);
#pragma omp declare simd notinbranch
double hypot(double, double);
#endif
}
#undef TESSEL_SIMD_MATH
#endif

namespace tessel::backend::cpu {
namespace {

// The math functions that the op list's formulas (TESSEL_UNARY_FORMULAS) call by their plain
// names, as CUDA code does: <cmath>'s overloads for the compute type (std::isnan is false for
// integers), where the name alone would find the tessel::exp(Array) ops.
using std::acos, std::acosh, std::asin, std::asinh, std::atan, std::atan2, std::atanh, std::cbrt, std::ceil,
    std::copysign, std::cos, std::cosh, std::erf, std::erfc, std::exp, std::exp2, std::expm1, std::fabs,
    std::floor, std::fmax, std::fmin, std::hypot, std::isfinite, std::isinf, std::isnan, std::log, std::log10,
    std::log1p, std::log2, std::pow, std::sin, std::sinh, std::sqrt, std::tan, std::tanh, std::trunc;

template <class T> struct Compute { using type = T; };
template <> struct Compute<float16> { using type = float; };
template <> struct Compute<bfloat16> { using type = float; };
template <class T> using compute_t = typename Compute<T>::type;

template <class T> struct IsComplex : std::false_type {};
template <class T> struct IsComplex<std::complex<T>> : std::true_type {};
template <class T> constexpr bool is_complex_v = IsComplex<T>::value;
template <class T> constexpr bool is_bool_v = std::is_same_v<T, bool>;
template <class T> constexpr bool is_int_v = std::is_integral_v<T> && !is_bool_v<T>;
template <class T> constexpr bool is_float_v = std::is_floating_point_v<T>;

// Real storage type of a complex storage type (abs, real, imag, angle of complex).
template <class T> struct RealOf { using type = T; };
template <class T> struct RealOf<std::complex<T>> { using type = T; };

template <class T> constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <class S>
inline compute_t<S> load(const S* p) {
  if constexpr (is_half_v<S>) {
    return static_cast<float>(*p);
  } else {
    return *p;
  }
}
template <class O, class V>
inline void store(O* p, V v) {
  if constexpr (is_half_v<O>) {
    *p = O(static_cast<float>(v));
  } else {
    *p = static_cast<O>(v);
  }
}

// The costly ops' one loop: f over a run of n elements with any strides (0: an input broadcast
// along the run), in chunks of kChunk gathered into aligned buffers. Every element of every layout
// (contiguous, strided, broadcast, a fused block, the last few of a run) goes through the same
// vectorized loop of kChunk iterations, so an element's result depends on its value alone: the
// SIMD variants of the math functions (libmvec) and the scalar ones can differ in the last bit, and
// a loop with a scalar remainder or a strided layout would otherwise give some elements the one and
// some the other (fused and unfused evaluation agree bit for bit, as the tests check).
constexpr int kChunk = 256;

template <int N, class O, class S0, class S1, class F>
inline void chunked_run(O* o, std::int64_t so, const S0* a, std::int64_t sa, const S1* b, std::int64_t sb,
                        std::int64_t n, F& f) {
  using C0 = compute_t<S0>;
  using C1 = compute_t<S1>;
  alignas(64) C0 x[kChunk];
  alignas(64) C1 y[kChunk];
  if constexpr (N == 1) {
    using R = decltype(f(x[0]));
    alignas(64) R r[kChunk];
    for (std::int64_t first = 0; first < n; first += kChunk) {
      const int m = static_cast<int>(std::min<std::int64_t>(kChunk, n - first));
      const S0* pa = a + first * sa;
      if (sa == 1) {
#pragma omp simd
        for (int i = 0; i < m; ++i) x[i] = load(pa + i);
      } else {
#pragma omp simd
        for (int i = 0; i < m; ++i) x[i] = load(pa + i * sa);
      }
#pragma omp simd
      for (int i = m; i < kChunk; ++i) x[i] = x[0];  // padding: any valid input
#pragma omp simd aligned(x, r : 64)
      for (int i = 0; i < kChunk; ++i) r[i] = f(x[i]);
      O* po = o + first * so;
      if (so == 1) {
#pragma omp simd
        for (int i = 0; i < m; ++i) store(po + i, r[i]);
      } else {
#pragma omp simd
        for (int i = 0; i < m; ++i) store(po + i * so, r[i]);
      }
    }
  } else {
    using R = decltype(f(x[0], y[0]));
    alignas(64) R r[kChunk];
    for (std::int64_t first = 0; first < n; first += kChunk) {
      const int m = static_cast<int>(std::min<std::int64_t>(kChunk, n - first));
      const S0* pa = a + first * sa;
      const S1* pb = b + first * sb;
      if (sa == 1) {
#pragma omp simd
        for (int i = 0; i < m; ++i) x[i] = load(pa + i);
      } else {
#pragma omp simd
        for (int i = 0; i < m; ++i) x[i] = load(pa + i * sa);
      }
      if (sb == 1) {
#pragma omp simd
        for (int i = 0; i < m; ++i) y[i] = load(pb + i);
      } else {
#pragma omp simd
        for (int i = 0; i < m; ++i) y[i] = load(pb + i * sb);
      }
#pragma omp simd
      for (int i = m; i < kChunk; ++i) x[i] = x[0], y[i] = y[0];
#pragma omp simd aligned(x, y, r : 64)
      for (int i = 0; i < kChunk; ++i) r[i] = f(x[i], y[i]);
      O* po = o + first * so;
      if (so == 1) {
#pragma omp simd
        for (int i = 0; i < m; ++i) store(po + i, r[i]);
      } else {
#pragma omp simd
        for (int i = 0; i < m; ++i) store(po + i * so, r[i]);
      }
    }
  }
}

// A run of `count` elements whose output and inputs are unit-stride, except the inputs whose bit
// is set in Scalars: those are broadcast along the run (stride 0) and read once. The loop carries
// nothing between elements (the output is a new array or the identical view of an input, never a
// partial overlap: the ops layer's rule), so `omp simd` only states what is true; GCC vectorizes
// it, calling glibc's vector math (libmvec) for the functions declared below.
template <int N, unsigned Scalars, class O, class S0, class S1, class S2, class F>
inline void unit_run(O* o, const S0* a, const S1* b, const S2* c, std::int64_t n, F& f) {
  if constexpr (N == 1) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) store(o + i, f(load(a + i)));
  } else if constexpr (N == 2) {
    if constexpr (Scalars == 1) {
      const auto x = load(a);
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) store(o + i, f(x, load(b + i)));
    } else if constexpr (Scalars == 2) {
      const auto y = load(b);
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) store(o + i, f(load(a + i), y));
    } else {
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) store(o + i, f(load(a + i), load(b + i)));
    }
  } else {
    const auto x = load(a);
    const auto y = load(b);
    const auto z = load(c);
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) {
      store(o + i, f((Scalars & 1u) ? x : load(a + i), (Scalars & 2u) ? y : load(b + i), (Scalars & 4u) ? z : load(c + i)));
    }
  }
}

// One op over n elements with any strides (in elements; 0: broadcast along the run): the body of
// every elementwise kernel (elementwise_kernel, backend/elementwise.hpp). Costly ops take
// chunked_run whatever the layout; the others unit_run when every operand is unit-stride or
// broadcast, else a strided loop (their results do not depend on the loop: exact IEEE operations).
template <int N, class O, class S0, class S1, class S2, bool Costly, class F>
inline void run_kernel(void* out, std::int64_t so, const void* const* in, const std::int64_t* si, std::int64_t n,
                       F f) {
  O* o = static_cast<O*>(out);
  const S0* a = static_cast<const S0*>(in[0]);
  const S1* b = N > 1 ? static_cast<const S1*>(in[1]) : nullptr;
  const S2* c = N > 2 ? static_cast<const S2*>(in[2]) : nullptr;
  const std::int64_t sa = si[0], sb = N > 1 ? si[1] : 0, sc = N > 2 ? si[2] : 0;
  if constexpr (Costly && N <= 2) {
    (void)c, (void)sc;
    chunked_run<N>(o, so, a, sa, b, sb, n, f);
  } else {
    const std::int64_t s[3] = {sa, sb, sc};
    unsigned scalars = 0;
    bool unit = so == 1;
    for (int k = 0; k < N; ++k) {
      if (s[k] == 0) {
        scalars |= 1u << k;
      } else if (s[k] != 1) {
        unit = false;
      }
    }
    if (unit && scalars != (1u << N) - 1u) {
      if constexpr (N == 1) {
        return unit_run<1, 0>(o, a, b, c, n, f);
      } else if constexpr (N == 2) {
        switch (scalars) {
          case 0: return unit_run<2, 0>(o, a, b, c, n, f);
          case 1: return unit_run<2, 1>(o, a, b, c, n, f);
          default: return unit_run<2, 2>(o, a, b, c, n, f);
        }
      } else {
        switch (scalars) {
          case 0: return unit_run<3, 0>(o, a, b, c, n, f);
          case 1: return unit_run<3, 1>(o, a, b, c, n, f);
          case 2: return unit_run<3, 2>(o, a, b, c, n, f);
          case 3: return unit_run<3, 3>(o, a, b, c, n, f);
          case 4: return unit_run<3, 4>(o, a, b, c, n, f);
          case 5: return unit_run<3, 5>(o, a, b, c, n, f);
          default: return unit_run<3, 6>(o, a, b, c, n, f);
        }
      }
    }
    if constexpr (N == 1) {
      for (std::int64_t i = 0; i < n; ++i) store(o + i * so, f(load(a + i * sa)));
    } else if constexpr (N == 2) {
      for (std::int64_t i = 0; i < n; ++i) store(o + i * so, f(load(a + i * sa), load(b + i * sb)));
    } else {
      for (std::int64_t i = 0; i < n; ++i) store(o + i * so, f(load(a + i * sa), load(b + i * sb), load(c + i * sc)));
    }
  }
}

// Integer arithmetic wraps modulo 2^bits as NumPy's does; computing in uint64 avoids C++'s
// signed-overflow UB (and int promotion of uint16 * uint16).
template <class C>
inline C wrap(std::uint64_t v) { return static_cast<C>(v); }
template <class C>
inline std::uint64_t u64(C v) { return static_cast<std::uint64_t>(v); }

template <class C>
inline C floor_divide_value(C a, C b) {
  if constexpr (is_int_v<C>) {
    if (b == C(0)) return C(0);  // NumPy returns 0 (with a warning)
    if constexpr (std::is_signed_v<C>) {
      if (b == C(-1)) return wrap<C>(0 - u64(a));  // MIN // -1 wraps, as NumPy
      const C q = static_cast<C>(a / b);
      return (a % b != C(0) && ((a < C(0)) != (b < C(0)))) ? static_cast<C>(q - 1) : q;
    } else {
      return static_cast<C>(a / b);
    }
  } else {
    // An infinite operand: floor(a / b), as the Array API standard prefers (+-inf // finite is
    // +-inf, finite // +-inf is a signed zero), where Python and NumPy give NaN and -1.
    if (std::isinf(a) || std::isinf(b)) return std::floor(a / b);
    // Otherwise NumPy's npy_divmod: floor of the exact quotient, computed from fmod to stay exact.
    if (b == C(0)) return a / b;
    const C mod = std::fmod(a, b);
    C div = (a - mod) / b;
    if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) div -= C(1);
    if (div == C(0)) return std::copysign(C(0), a / b);
    C floordiv = std::floor(div);
    if (div - floordiv > C(0.5)) floordiv += C(1);
    return floordiv;
  }
}

template <class C>
inline C remainder_value(C a, C b) {
  if constexpr (is_int_v<C>) {
    if (b == C(0)) return C(0);
    if constexpr (std::is_signed_v<C>) {
      if (b == C(-1)) return C(0);
      const C r = static_cast<C>(a % b);
      return (r != C(0) && ((r < C(0)) != (b < C(0)))) ? static_cast<C>(r + b) : r;
    } else {
      return static_cast<C>(a % b);
    }
  } else {
    if (b == C(0)) return std::fmod(a, b);  // NaN
    C mod = std::fmod(a, b);
    if (mod != C(0)) {
      if ((b < C(0)) != (mod < C(0))) mod += b;
    } else {
      mod = std::copysign(C(0), b);
    }
    return mod;
  }
}

template <class C>
inline C power_value(C a, C b) {
  if constexpr (is_int_v<C>) {
    // Exponentiation by squaring, wrapping. A negative exponent (an error in NumPy) gives
    // 1 / a truncated: 1 for a == 1, +-1 for a == -1, else 0.
    if constexpr (std::is_signed_v<C>) {
      if (b < C(0)) {
        if (a == C(1)) return C(1);
        if (a == C(-1)) return (u64(b) & 1u) ? C(-1) : C(1);
        return C(0);
      }
    }
    std::uint64_t result = 1, base = u64(a), e = u64(b);
    while (e) {
      if (e & 1u) result *= base;
      base *= base;
      e >>= 1;
    }
    return wrap<C>(result);
  } else {
    return std::pow(a, b);
  }
}

template <class C>
inline C shift_left(C a, C b) {
  if (b < C(0) || u64(b) >= sizeof(C) * 8) return C(0);
  return wrap<C>(u64(a) << u64(b));
}
template <class C>
inline C shift_right(C a, C b) {
  if (b < C(0) || u64(b) >= sizeof(C) * 8) return (a < C(0)) ? C(-1) : C(0);
  return static_cast<C>(a >> b);
}

template <class C> inline bool isnan_value(C v) {
  if constexpr (is_complex_v<C>) return std::isnan(v.real()) || std::isnan(v.imag());
  else if constexpr (is_float_v<C>) return std::isnan(v);
  else return false;
}
template <class C> inline bool isinf_value(C v) {
  if constexpr (is_complex_v<C>) return std::isinf(v.real()) || std::isinf(v.imag());
  else if constexpr (is_float_v<C>) return std::isinf(v);
  else return false;
}
template <class C> inline bool isfinite_value(C v) {
  if constexpr (is_complex_v<C>) return std::isfinite(v.real()) && std::isfinite(v.imag());
  else if constexpr (is_float_v<C>) return std::isfinite(v);
  else return true;
}
template <class C> inline bool nonzero(C v) { return v != C(0); }

// NaN-propagating extrema, as NumPy's maximum/minimum; fmax/fmin prefer the non-NaN operand.
// NumPy orders complex numbers lexicographically (real part, then imaginary part).
template <class C> inline bool less_value(C a, C b) {
  if constexpr (is_complex_v<C>) return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
  else return a < b;
}
template <class C> inline bool less_equal_value(C a, C b) {
  if constexpr (is_complex_v<C>) return a.real() < b.real() || (a.real() == b.real() && a.imag() <= b.imag());
  else return a <= b;
}
template <class C> inline C max_value(C a, C b) {
  if (isnan_value(a)) return a;
  if (isnan_value(b)) return b;
  return less_value(a, b) ? b : a;
}
template <class C> inline C min_value(C a, C b) {
  if (isnan_value(a)) return a;
  if (isnan_value(b)) return b;
  return less_value(b, a) ? b : a;
}
template <class C> inline C fmax_value(C a, C b) {
  if (isnan_value(b)) return a;
  if (isnan_value(a)) return b;
  return less_value(a, b) ? b : a;
}
template <class C> inline C fmin_value(C a, C b) {
  if (isnan_value(b)) return a;
  if (isnan_value(a)) return b;
  return less_value(b, a) ? b : a;
}

// nextafter in a binary format with M stored mantissa bits, smallest normal exponent EMIN and
// largest exponent EMAX, computed on its values widened to float (exact: the step is one unit in
// the last place of that format). float16 is <10, -14, 15>, bfloat16 <7, -126, 127>.
template <int M, int EMIN, int EMAX> inline float next_toward(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return x + y;
  if (x == y) return y;
  if (x == 0) return std::copysign(std::ldexp(1.0f, EMIN - M), y);
  const bool up = y > x;
  if (std::isinf(x)) return std::copysign(std::ldexp(2.0f - std::ldexp(1.0f, -M), EMAX), x);
  const float a = std::fabs(x);
  int e = 0;
  std::frexp(a, &e);
  int exponent = std::max(e - 1, EMIN);
  // Toward zero from a power of two (above the subnormals) the step is the smaller binade's.
  if (up != (x > 0) && a == std::ldexp(1.0f, exponent) && exponent > EMIN) exponent -= 1;
  const float step = std::ldexp(1.0f, exponent - M);
  const float r = up ? x + step : x - step;
  return r == 0.0f ? std::copysign(0.0f, x) : r;  // from the smallest subnormal to zero of x's sign
}
template <class S, class C> inline C nextafter_value(C x, C y) {
  if constexpr (std::is_same_v<S, float16>) {
    return next_toward<10, -14, 15>(x, y);
  } else if constexpr (std::is_same_v<S, bfloat16>) {
    return next_toward<7, -126, 127>(x, y);
  } else {
    return std::nextafter(x, y);
  }
}

// Elementary functions: the C library's for real values; for complex values the definitions the
// CUDA kernels use (tessel::cmath, tessel_math.cuh), so both backends give the same special
// values (C99 Annex G, as the Array API standard's tables).
#define TESSEL_MATH_FUNCTION(NAME, REAL)                            \
  template <class C> inline C NAME##_value(C x) {                   \
    if constexpr (is_complex_v<C>) return tessel::cmath::c_##NAME(x); \
    else return std::REAL(x);                                       \
  }
TESSEL_MATH_FUNCTION(exp, exp)
TESSEL_MATH_FUNCTION(exp2, exp2)
TESSEL_MATH_FUNCTION(expm1, expm1)
TESSEL_MATH_FUNCTION(log, log)
TESSEL_MATH_FUNCTION(log2, log2)
TESSEL_MATH_FUNCTION(log10, log10)
TESSEL_MATH_FUNCTION(log1p, log1p)
TESSEL_MATH_FUNCTION(sqrt, sqrt)
TESSEL_MATH_FUNCTION(sin, sin)
TESSEL_MATH_FUNCTION(cos, cos)
TESSEL_MATH_FUNCTION(tan, tan)
TESSEL_MATH_FUNCTION(asin, asin)
TESSEL_MATH_FUNCTION(acos, acos)
TESSEL_MATH_FUNCTION(atan, atan)
TESSEL_MATH_FUNCTION(sinh, sinh)
TESSEL_MATH_FUNCTION(cosh, cosh)
TESSEL_MATH_FUNCTION(tanh, tanh)
TESSEL_MATH_FUNCTION(asinh, asinh)
TESSEL_MATH_FUNCTION(acosh, acosh)
TESSEL_MATH_FUNCTION(atanh, atanh)
#undef TESSEL_MATH_FUNCTION

template <class C> inline C add_value(C a, C b) {
  if constexpr (is_bool_v<C>) return a || b;
  else if constexpr (is_int_v<C>) return wrap<C>(u64(a) + u64(b));
  else return a + b;
}
template <class C> inline C subtract_value(C a, C b) {
  if constexpr (is_int_v<C>) return wrap<C>(u64(a) - u64(b));
  else return a - b;
}
template <class T> struct is_std_complex : std::false_type {};
template <class T> struct is_std_complex<std::complex<T>> : std::true_type {};
template <class C> inline C multiply_value(C a, C b) {
  if constexpr (is_bool_v<C>) return a && b;
  else if constexpr (is_int_v<C>) return wrap<C>(u64(a) * u64(b));
  // NumPy multiplies complex numbers by the plain formula; std::complex would recover
  // infinities from NaN parts (C Annex G) and disagree with NumPy and the GPU.
  else if constexpr (is_std_complex<C>::value)
    return C(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
  else return a * b;
}
template <class C> inline C negative_value(C a) {
  if constexpr (is_int_v<C>) return wrap<C>(0 - u64(a));
  else return -a;
}
template <class C> inline auto abs_value(C a) {
  if constexpr (is_complex_v<C>) return std::abs(a);
  else if constexpr (is_float_v<C>) return std::fabs(a);
  else if constexpr (is_int_v<C> && std::is_signed_v<C>) return a < C(0) ? wrap<C>(0 - u64(a)) : a;  // MIN stays MIN
  else return a;
}
template <class C> inline C bitwise_not_value(C a) {
  if constexpr (is_bool_v<C>) return !a;
  else return static_cast<C>(~a);
}
template <class C> inline C power_any(C x, C y) {
  if constexpr (is_complex_v<C>) return tessel::cmath::c_pow(x, y);
  else return power_value(x, y);
}
template <class C> inline C sign_value(C a) {
  if constexpr (is_complex_v<C>) {  // NumPy 2: z / |z|
    if (isnan_value(a)) return C(a.real() + a.imag(), a.real() + a.imag());
    if (a == C(0)) return C(0);
    const auto m = std::hypot(a.real(), a.imag());
    return C(a.real() / m, a.imag() / m);
  } else {
    if constexpr (is_float_v<C>) {
      if (std::isnan(a)) return a;
    }
    return static_cast<C>((C(0) < a) - (a < C(0)));
  }
}
template <class C> inline auto angle_value(C a) {
  if constexpr (is_complex_v<C>) return std::arg(a);
  else return std::atan2(C(0), a);  // pi for negative (and -0.0), 0 otherwise, NaN stays NaN
}
template <class C> inline C round_value(C a, int mode) {
  if constexpr (is_float_v<C>) {
    switch (mode) {
      case 0: return std::floor(a);
      case 1: return std::ceil(a);
      case 2: return std::trunc(a);
      default: return std::nearbyint(a);  // half to even in the default rounding mode, as NumPy
    }
  } else if constexpr (is_complex_v<C>) {
    return C(std::nearbyint(a.real()), std::nearbyint(a.imag()));  // each part, half to even
  } else {
    return a;  // NumPy 2: integers stay integers
  }
}

// real, imag and conj of real numbers: the number, zero and the number.
template <class C> inline auto real_value(C a) {
  if constexpr (is_complex_v<C>) return a.real();
  else return a;
}
template <class C> inline auto imag_value(C a) {
  if constexpr (is_complex_v<C>) return a.imag();
  else return C(0);
}
template <class C> inline C conj_value(C a) {
  if constexpr (is_complex_v<C>) return std::conj(a);
  else return a;
}

// The op list's kind bit of a compute type.
template <class C> constexpr unsigned kind_bit() {
  if constexpr (is_complex_v<C>) return detail::kC;
  else if constexpr (is_float_v<C>) return detail::kF;
  else if constexpr (is_bool_v<C>) return detail::kB;
  else return detail::kI;
}
template <class C> constexpr bool accepts(ElementwiseOp op) { return (detail::op_kinds(op) & kind_bit<C>()) != 0; }

// Ops whose elements each cost a library function (or a division loop, or a complex formula):
// worth a second thread from fewer elements (threads.hpp), and computed by chunked_run only.
constexpr bool costly(ElementwiseOp op) {
  switch (op) {
    case ElementwiseOp::add: case ElementwiseOp::subtract: case ElementwiseOp::multiply:
    case ElementwiseOp::equal: case ElementwiseOp::not_equal: case ElementwiseOp::less:
    case ElementwiseOp::less_equal: case ElementwiseOp::greater: case ElementwiseOp::greater_equal:
    case ElementwiseOp::logical_and: case ElementwiseOp::logical_or: case ElementwiseOp::logical_xor:
    case ElementwiseOp::bitwise_and: case ElementwiseOp::bitwise_or: case ElementwiseOp::bitwise_xor:
    case ElementwiseOp::left_shift: case ElementwiseOp::right_shift: case ElementwiseOp::minimum:
    case ElementwiseOp::maximum: case ElementwiseOp::fmin: case ElementwiseOp::fmax: case ElementwiseOp::copysign:
    case ElementwiseOp::negative: case ElementwiseOp::positive: case ElementwiseOp::abs:
    case ElementwiseOp::logical_not: case ElementwiseOp::bitwise_not: case ElementwiseOp::square:
    case ElementwiseOp::sign: case ElementwiseOp::relu: case ElementwiseOp::floor: case ElementwiseOp::ceil:
    case ElementwiseOp::trunc: case ElementwiseOp::round: case ElementwiseOp::isnan: case ElementwiseOp::isinf:
    case ElementwiseOp::isfinite: case ElementwiseOp::real: case ElementwiseOp::imag: case ElementwiseOp::conj:
    case ElementwiseOp::signbit: case ElementwiseOp::where:
      return false;
    default:
      return true;
  }
}

}  // namespace
}  // namespace tessel::backend::cpu
