// CPU elementwise loops. The dtype is dispatched once, at this type-erased boundary; the op is
// chosen once per call (outside the loops), so every loop body is a plain inlined functor over
// pointers that the compiler can vectorize. float16/bfloat16 are computed in float32 and
// rounded once at the store. Work is split into blocks of kBlock elements along the innermost
// collapsed axis, spread over OpenMP threads.
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cuda/device/tessel_math.cuh"
#include "backend/elementwise.hpp"
#include "ops/elementwise_table.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/array/shape.hpp"

namespace tessel::backend::cpu {
namespace {

// Enough work per block to amortize the OpenMP scheduling, small enough to balance threads.
constexpr std::int64_t kBlock = 4096;

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

// out = f(in0, ..., in{N-1}) over views of one shape. S0..S2 are the input storage types.
template <int N, class O, class S0, class S1, class S2, class F>
void loop(const Array& out, const std::vector<Array>& in, F f) {
  std::vector<Strides> strides{out.strides()};
  for (int i = 0; i < N; ++i) strides.push_back(in[static_cast<std::size_t>(i)].strides());
  const CollapsedDims dims = collapse_dims(out.shape(), strides);
  const std::int64_t nd = dims.ndim();
  const std::int64_t inner = dims.shape.back();
  std::int64_t rows = 1;
  for (std::int64_t d = 0; d + 1 < nd; ++d) rows *= dims.shape[static_cast<std::size_t>(d)];
  if (inner == 0 || rows == 0) return;
  const std::int64_t blocks_per_row = (inner + kBlock - 1) / kBlock;
  const std::int64_t tasks = rows * blocks_per_row;

  O* const po = out.data_as<O>();
  const S0* const p0 = static_cast<const S0*>(in[0].data());
  const S1* const p1 = N > 1 ? static_cast<const S1*>(in[1].data()) : nullptr;
  const S2* const p2 = N > 2 ? static_cast<const S2*>(in[2].data()) : nullptr;
  auto inner_stride = [&](std::size_t k) { return dims.strides[k][static_cast<std::size_t>(nd - 1)]; };
  const std::int64_t so = inner_stride(0), s0 = inner_stride(1);
  const std::int64_t s1 = N > 1 ? inner_stride(2) : 0, s2 = N > 2 ? inner_stride(3) : 0;
  // Unit strides on every operand: the vectorizable case.
  const bool unit = so == 1 && s0 == 1 && (N < 2 || s1 == 1) && (N < 3 || s2 == 1);

#pragma omp parallel for schedule(static) if (tasks > 1)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const std::int64_t row = t / blocks_per_row;
    const std::int64_t lo = (t % blocks_per_row) * kBlock;
    const std::int64_t hi = std::min(inner, lo + kBlock);
    // Element offsets of this row: unravel the row index over the outer collapsed axes.
    std::int64_t off[4] = {0, 0, 0, 0};
    std::int64_t r = row;
    for (std::int64_t d = nd - 2; d >= 0; --d) {
      const std::int64_t extent = dims.shape[static_cast<std::size_t>(d)];
      const std::int64_t idx = r % extent;
      r /= extent;
      for (int k = 0; k <= N; ++k) off[k] += idx * dims.strides[static_cast<std::size_t>(k)][static_cast<std::size_t>(d)];
    }
    O* o = po + off[0];
    const S0* a = p0 + off[1];
    if constexpr (N == 1) {
      if (unit) {
        for (std::int64_t i = lo; i < hi; ++i) store(o + i, f(load(a + i)));
      } else {
        for (std::int64_t i = lo; i < hi; ++i) store(o + i * so, f(load(a + i * s0)));
      }
    } else if constexpr (N == 2) {
      const S1* b = p1 + off[2];
      if (unit) {
        for (std::int64_t i = lo; i < hi; ++i) store(o + i, f(load(a + i), load(b + i)));
      } else {
        for (std::int64_t i = lo; i < hi; ++i) store(o + i * so, f(load(a + i * s0), load(b + i * s1)));
      }
    } else {
      const S1* b = p1 + off[2];
      const S2* c = p2 + off[3];
      for (std::int64_t i = lo; i < hi; ++i) store(o + i * so, f(load(a + i * s0), load(b + i * s1), load(c + i * s2)));
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

[[noreturn]] void unsupported(ElementwiseOp op, DType dtype) {
  // The ops layer checks the dtype table first; reaching this is a bug in the table.
  throw DTypeError(std::string("elementwise (cpu): ") + op_name(op) + " has no loop for " + dtype_name(dtype));
}

template <class S>
void run(ElementwiseOp op, const std::vector<Array>& in, const Array& out) {
  using C = compute_t<S>;
  using R = typename RealOf<S>::type;
  const DType dt = dtype_of<S>;

// Each case compiles for exactly the kinds of the op's row in the op list; the ops layer has
// already rejected the others, so falling through is an internal error.
#define TESSEL_UNARY(NAME, OUT, EXPR)                                 \
  case ElementwiseOp::NAME:                                           \
    if constexpr (accepts<C>(ElementwiseOp::NAME)) {                  \
      loop<1, OUT, S, bool, bool>(out, in, [](C x) { return EXPR; }); \
      return;                                                         \
    }                                                                 \
    break;
#define TESSEL_BINARY(NAME, OUT, EXPR)                                      \
  case ElementwiseOp::NAME:                                                 \
    if constexpr (accepts<C>(ElementwiseOp::NAME)) {                        \
      loop<2, OUT, S, S, bool>(out, in, [](C x, C y) { return EXPR; });     \
      return;                                                               \
    }                                                                       \
    break;

  switch (op) {
    TESSEL_BINARY(add, S, add_value(x, y))
    TESSEL_BINARY(subtract, S, subtract_value(x, y))
    TESSEL_BINARY(multiply, S, multiply_value(x, y))
    TESSEL_BINARY(divide, S, x / y)
    TESSEL_BINARY(floor_divide, S, floor_divide_value(x, y))
    TESSEL_BINARY(remainder, S, remainder_value(x, y))
    TESSEL_BINARY(power, S, power_any(x, y))
    TESSEL_BINARY(equal, bool, x == y)
    TESSEL_BINARY(not_equal, bool, x != y)
    TESSEL_BINARY(less, bool, less_value(x, y))
    TESSEL_BINARY(less_equal, bool, less_equal_value(x, y))
    TESSEL_BINARY(greater, bool, less_value(y, x))
    TESSEL_BINARY(greater_equal, bool, less_equal_value(y, x))
    TESSEL_BINARY(logical_and, bool, nonzero(x) && nonzero(y))
    TESSEL_BINARY(logical_or, bool, nonzero(x) || nonzero(y))
    TESSEL_BINARY(logical_xor, bool, nonzero(x) != nonzero(y))
    TESSEL_BINARY(bitwise_and, S, static_cast<C>(x & y))
    TESSEL_BINARY(bitwise_or, S, static_cast<C>(x | y))
    TESSEL_BINARY(bitwise_xor, S, static_cast<C>(x ^ y))
    TESSEL_BINARY(left_shift, S, shift_left(x, y))
    TESSEL_BINARY(right_shift, S, shift_right(x, y))
    TESSEL_BINARY(minimum, S, min_value(x, y))
    TESSEL_BINARY(maximum, S, max_value(x, y))
    TESSEL_BINARY(fmin, S, fmin_value(x, y))
    TESSEL_BINARY(nextafter, S, (nextafter_value<S, C>(x, y)))
    TESSEL_BINARY(fmax, S, fmax_value(x, y))
    TESSEL_BINARY(hypot, S, std::hypot(x, y))
    TESSEL_BINARY(copysign, S, std::copysign(x, y))
    TESSEL_BINARY(logaddexp, S, tessel::cmath::logaddexp(x, y))
    TESSEL_BINARY(arctan2, S, std::atan2(x, y))

    TESSEL_UNARY(negative, S, negative_value(x))
    TESSEL_UNARY(positive, S, x)
    TESSEL_UNARY(abs, R, abs_value(x))
    TESSEL_UNARY(logical_not, bool, !nonzero(x))
    TESSEL_UNARY(bitwise_not, S, bitwise_not_value(x))
    TESSEL_UNARY(square, S, multiply_value(x, x))
    TESSEL_UNARY(reciprocal, S, C(1) / x)
    TESSEL_UNARY(sign, S, sign_value(x))
    TESSEL_UNARY(exp, S, exp_value(x))
    TESSEL_UNARY(exp2, S, exp2_value(x))
    TESSEL_UNARY(expm1, S, expm1_value(x))
    TESSEL_UNARY(log, S, log_value(x))
    TESSEL_UNARY(log2, S, log2_value(x))
    TESSEL_UNARY(log10, S, log10_value(x))
    TESSEL_UNARY(log1p, S, log1p_value(x))
    TESSEL_UNARY(sqrt, S, sqrt_value(x))
    TESSEL_UNARY(rsqrt, S, C(1) / std::sqrt(x))
    TESSEL_UNARY(cbrt, S, std::cbrt(x))
    TESSEL_UNARY(sin, S, sin_value(x))
    TESSEL_UNARY(cos, S, cos_value(x))
    TESSEL_UNARY(tan, S, tan_value(x))
    TESSEL_UNARY(arcsin, S, asin_value(x))
    TESSEL_UNARY(arccos, S, acos_value(x))
    TESSEL_UNARY(arctan, S, atan_value(x))
    TESSEL_UNARY(sinh, S, sinh_value(x))
    TESSEL_UNARY(cosh, S, cosh_value(x))
    TESSEL_UNARY(tanh, S, tanh_value(x))
    TESSEL_UNARY(arcsinh, S, asinh_value(x))
    TESSEL_UNARY(arccosh, S, acosh_value(x))
    TESSEL_UNARY(arctanh, S, atanh_value(x))
    TESSEL_UNARY(sigmoid, S, C(1) / (C(1) + std::exp(-x)))
    TESSEL_UNARY(relu, S, (isnan_value(x) ? x : (x > C(0) ? x : C(0))))
    // erf form; 0.7071... = 1/sqrt(2)
    TESSEL_UNARY(gelu, S, C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440))))
    TESSEL_UNARY(erf, S, std::erf(x))
    // max(x, 0) + log1p(exp(-|x|)): no overflow for large x, NaN propagates.
    TESSEL_UNARY(softplus, S, (isnan_value(x) ? x : (x > C(0) ? x : C(0)) + std::log1p(std::exp(-std::fabs(x)))))
    TESSEL_UNARY(floor, S, round_value(x, 0))
    TESSEL_UNARY(ceil, S, round_value(x, 1))
    TESSEL_UNARY(trunc, S, round_value(x, 2))
    TESSEL_UNARY(round, S, round_value(x, 3))
    TESSEL_UNARY(isnan, bool, isnan_value(x))
    TESSEL_UNARY(isinf, bool, isinf_value(x))
    TESSEL_UNARY(isfinite, bool, isfinite_value(x))
    TESSEL_UNARY(real, R, real_value(x))
    TESSEL_UNARY(imag, R, imag_value(x))
    TESSEL_UNARY(conj, S, conj_value(x))
    TESSEL_UNARY(angle, R, angle_value(x))
    // copysign, not std::signbit: GCC 12 fails (an internal error) vectorizing signbit over float.
    TESSEL_UNARY(signbit, bool, std::copysign(C(1), x) < C(0))
    case ElementwiseOp::where:
      loop<3, S, bool, S, S>(out, in, [](bool c, C x, C y) { return c ? x : y; });
      return;
    default:
      break;
  }
#undef TESSEL_UNARY
#undef TESSEL_BINARY
  unsupported(op, dt);
}

}  // namespace

void elementwise(ElementwiseOp op, const std::vector<Array>& inputs, const Array& out) {
  // where: dispatch on the value dtype (input 0 is the bool condition).
  const DType dtype = op == ElementwiseOp::where ? inputs[1].dtype() : inputs[0].dtype();
  dispatch_dtype(dtype, [&](auto tag) { run<typename decltype(tag)::type>(op, inputs, out); });
}

}  // namespace tessel::backend::cpu
