#pragma once
// The prelude of generated host C++ kernels (the CPU backend's ElementwiseKernel). It is embedded
// as a string at build time (src/jit/embed_headers.cmake) and pasted at the top of each generated
// source, so a host kernel compiles without tessel's headers at run time. It gives host code the
// spellings that CUDA bodies use: __half and __nv_bfloat16 with the conversion intrinsics,
// tessel::complex64/complex128, tessel::cast and tessel::widen (the casts of
// src/backend/cuda/device/tessel_device.cuh: NaN -> 0 and saturation for float to integer), the
// float overloads of the <cmath> functions, and CUDA's min/max.
//
// float16/bfloat16 arithmetic: a __half op __half is computed in float and rounded to __half, the
// correctly rounded result that CUDA's native half arithmetic gives (float has more than twice
// the precision plus two bits, so the double rounding is exact). A __half with a built-in
// arithmetic type computes in float (or double), where CUDA's headers make that call ambiguous.
// Conversions round to nearest even, as tessel::float16 / tessel::bfloat16 (array/half.hpp).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

// Must match tessel::jit::TsHostLaunch (include/tessel/jit/host_compiler.hpp) byte for byte.
struct TsHostLaunch {
  std::uint32_t grid[3];
  std::uint32_t block[3];
  std::uint64_t shared_bytes;
  std::int32_t num_threads;
  std::int32_t error_code;
  char error[1024];
};

// CUDA qualifiers in preambles written for the GPU.
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif

namespace tessel_host {

inline std::uint64_t double_bits(double value) {
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float float_from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Rounds a double to a binary format of kExponentBits and kMantissaBits in 16 bits, once (so
// float64 -> float16 matches NumPy): nearest even, overflow to infinity, NaN stays a quiet NaN.
template <int kExponentBits, int kMantissaBits>
inline std::uint16_t round_to_small_float(double value) {
  constexpr int bias = (1 << (kExponentBits - 1)) - 1;
  constexpr std::uint64_t infinity_bits = ((std::uint64_t{1} << kExponentBits) - 1) << kMantissaBits;
  constexpr int double_mantissa_bits = 52;
  const std::uint64_t bits = double_bits(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 63) << (kExponentBits + kMantissaBits));
  const std::uint64_t magnitude = bits & 0x7fffffffffffffffULL;
  if (magnitude >= 0x7ff0000000000000ULL) {
    if (magnitude == 0x7ff0000000000000ULL) return static_cast<std::uint16_t>(sign | infinity_bits);
    const std::uint64_t payload = (magnitude >> (double_mantissa_bits - kMantissaBits)) &
                                  ((std::uint64_t{1} << kMantissaBits) - 1);
    return static_cast<std::uint16_t>(sign | infinity_bits | payload | (std::uint64_t{1} << (kMantissaBits - 1)));
  }
  if (magnitude < 0x0010000000000000ULL) return sign;
  const int biased_exponent = static_cast<int>(magnitude >> double_mantissa_bits) - 1023 + bias;
  const std::uint64_t significand =
      (magnitude & ((std::uint64_t{1} << double_mantissa_bits) - 1)) | (std::uint64_t{1} << double_mantissa_bits);
  int dropped = double_mantissa_bits - kMantissaBits;
  if (biased_exponent < 1) dropped += 1 - biased_exponent;
  if (dropped > double_mantissa_bits + 1) return sign;
  std::uint64_t kept = significand >> dropped;
  const std::uint64_t remainder = significand & ((std::uint64_t{1} << dropped) - 1);
  const std::uint64_t halfway = std::uint64_t{1} << (dropped - 1);
  if (remainder > halfway || (remainder == halfway && (kept & 1))) ++kept;
  const std::uint64_t result =
      biased_exponent >= 1 ? (static_cast<std::uint64_t>(biased_exponent - 1) << kMantissaBits) + kept : kept;
  if (result >= infinity_bits) return static_cast<std::uint16_t>(sign | infinity_bits);
  return static_cast<std::uint16_t>(sign | result);
}

inline float half_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
  }
  return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline float bfloat16_bits_to_float(std::uint16_t bits) {
  return float_from_bits(static_cast<std::uint32_t>(bits) << 16);
}

template <class T>
using if_arithmetic = typename std::enable_if<std::is_arithmetic<T>::value, int>::type;
template <class T>
using if_integral = typename std::enable_if<std::is_integral<T>::value, int>::type;

}  // namespace tessel_host

// The 16-bit float types, as CUDA names them. Layout: the 16 bits only.
#define TESSEL_HOST_SMALL_FLOAT(T, E, M, TO_FLOAT)                                                        \
  struct T {                                                                                            \
    unsigned short __x;                                                                                 \
    T() = default;                                                                                      \
    T(float f) : __x(tessel_host::round_to_small_float<E, M>(static_cast<double>(f))) {}                \
    T(double d) : __x(tessel_host::round_to_small_float<E, M>(d)) {}                                    \
    template <class I, tessel_host::if_integral<I> = 0>                                                 \
    T(I i) : __x(tessel_host::round_to_small_float<E, M>(static_cast<double>(i))) {}                    \
    operator float() const { return TO_FLOAT(__x); }                                                    \
  };                                                                                                    \
  inline T operator+(T a, T b) { return T(static_cast<float>(a) + static_cast<float>(b)); }           \
  inline T operator-(T a, T b) { return T(static_cast<float>(a) - static_cast<float>(b)); }           \
  inline T operator*(T a, T b) { return T(static_cast<float>(a) * static_cast<float>(b)); }           \
  inline T operator/(T a, T b) { return T(static_cast<float>(a) / static_cast<float>(b)); }           \
  inline T operator-(T a) {                                                                             \
    T r;                                                                                                \
    r.__x = static_cast<unsigned short>(a.__x ^ 0x8000u);                                               \
    return r;                                                                                           \
  }                                                                                                     \
  inline T operator+(T a) { return a; }                                                                 \
  inline bool operator==(T a, T b) { return static_cast<float>(a) == static_cast<float>(b); }         \
  inline bool operator!=(T a, T b) { return static_cast<float>(a) != static_cast<float>(b); }         \
  inline bool operator<(T a, T b) { return static_cast<float>(a) < static_cast<float>(b); }           \
  inline bool operator>(T a, T b) { return static_cast<float>(a) > static_cast<float>(b); }           \
  inline bool operator<=(T a, T b) { return static_cast<float>(a) <= static_cast<float>(b); }         \
  inline bool operator>=(T a, T b) { return static_cast<float>(a) >= static_cast<float>(b); }         \
  /* With a built-in type: computed in float (double with a double). */                               \
  TESSEL_HOST_MIXED(T, +) TESSEL_HOST_MIXED(T, -) TESSEL_HOST_MIXED(T, *) TESSEL_HOST_MIXED(T, /)      \
  TESSEL_HOST_MIXED(T, ==) TESSEL_HOST_MIXED(T, !=) TESSEL_HOST_MIXED(T, <) TESSEL_HOST_MIXED(T, >)    \
  TESSEL_HOST_MIXED(T, <=) TESSEL_HOST_MIXED(T, >=)                                                     \
  /* Compound assignment converts the right side to T first, as CUDA's does. */                        \
  template <class U> inline T& operator+=(T& a, U b) { return a = a + T(b); }                          \
  template <class U> inline T& operator-=(T& a, U b) { return a = a - T(b); }                          \
  template <class U> inline T& operator*=(T& a, U b) { return a = a * T(b); }                          \
  template <class U> inline T& operator/=(T& a, U b) { return a = a / T(b); }                          \
  inline T& operator++(T& a) { return a = a + T(1.0f); }                                               \
  inline T& operator--(T& a) { return a = a - T(1.0f); }                                               \
  inline T operator++(T& a, int) { T old = a; ++a; return old; }                                      \
  inline T operator--(T& a, int) { T old = a; --a; return old; }

#define TESSEL_HOST_MIXED(T, OP)                                                         \
  template <class U, tessel_host::if_arithmetic<U> = 0>                                  \
  inline auto operator OP(T a, U b) { return static_cast<float>(a) OP b; }               \
  template <class U, tessel_host::if_arithmetic<U> = 0>                                  \
  inline auto operator OP(U a, T b) { return a OP static_cast<float>(b); }

TESSEL_HOST_SMALL_FLOAT(__half, 5, 10, tessel_host::half_bits_to_float)
TESSEL_HOST_SMALL_FLOAT(__nv_bfloat16, 8, 7, tessel_host::bfloat16_bits_to_float)
#undef TESSEL_HOST_SMALL_FLOAT
#undef TESSEL_HOST_MIXED
static_assert(sizeof(__half) == 2 && sizeof(__nv_bfloat16) == 2, "16-bit floats are 2 bytes");

// CUDA's conversion and arithmetic intrinsics for them.
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half(d); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __half __ushort_as_half(unsigned short x) { __half h; h.__x = x; return h; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline float __bfloat162float(__nv_bfloat16 h) { return static_cast<float>(h); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { __nv_bfloat16 h; h.__x = x; return h; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
#define TESSEL_HOST_INTRINSICS(T)                                                                   \
  inline T __hadd(T a, T b) { return a + b; }                                                       \
  inline T __hsub(T a, T b) { return a - b; }                                                       \
  inline T __hmul(T a, T b) { return a * b; }                                                       \
  inline T __hdiv(T a, T b) { return a / b; }                                                       \
  inline T __hneg(T a) { return -a; }                                                               \
  inline T __habs(T a) { T r = a; r.__x = static_cast<unsigned short>(a.__x & 0x7fffu); return r; } \
  /* One rounding: a * b + c is exact in double for 16-bit floats. */                              \
  inline T __hfma(T a, T b, T c) {                                                                  \
    return T(static_cast<double>(static_cast<float>(a)) * static_cast<float>(b) + static_cast<float>(c)); \
  }                                                                                                 \
  inline bool __heq(T a, T b) { return a == b; }                                                    \
  inline bool __hne(T a, T b) { return a != b; }                                                    \
  inline bool __hlt(T a, T b) { return a < b; }                                                     \
  inline bool __hle(T a, T b) { return a <= b; }                                                    \
  inline bool __hgt(T a, T b) { return a > b; }                                                     \
  inline bool __hge(T a, T b) { return a >= b; }                                                    \
  inline bool __hisnan(T a) { return std::isnan(static_cast<float>(a)); }                           \
  inline T __hmax(T a, T b) { return T(std::fmax(static_cast<float>(a), static_cast<float>(b))); }  \
  inline T __hmin(T a, T b) { return T(std::fmin(static_cast<float>(a), static_cast<float>(b))); }
TESSEL_HOST_INTRINSICS(__half)
TESSEL_HOST_INTRINSICS(__nv_bfloat16)
#undef TESSEL_HOST_INTRINSICS

// The float (and long double, and integer) overloads of the math functions, as CUDA declares them
// in the global namespace.
using std::abs;
using std::acos;
using std::acosh;
using std::asin;
using std::asinh;
using std::atan;
using std::atan2;
using std::atanh;
using std::cbrt;
using std::ceil;
using std::copysign;
using std::cos;
using std::cosh;
using std::erf;
using std::erfc;
using std::exp;
using std::exp2;
using std::expm1;
using std::fabs;
using std::floor;
using std::fma;
using std::fmax;
using std::fmin;
using std::fmod;
using std::hypot;
using std::isfinite;
using std::isinf;
using std::isnan;
using std::lgamma;
using std::log;
using std::log10;
using std::log1p;
using std::log2;
using std::nearbyint;
using std::nextafter;
using std::pow;
using std::remainder;
using std::rint;
using std::round;
using std::signbit;
using std::sin;
using std::sinh;
using std::sqrt;
using std::tan;
using std::tanh;
using std::tgamma;
using std::trunc;

// CUDA's min and max: the usual arithmetic conversions, and fmin/fmax (a NaN operand gives the
// other one) for floating types.
template <class A, class B, tessel_host::if_arithmetic<A> = 0, tessel_host::if_arithmetic<B> = 0>
inline typename std::common_type<A, B>::type min(A a, B b) {
  using C = typename std::common_type<A, B>::type;
  if constexpr (std::is_floating_point<C>::value) {
    return std::fmin(static_cast<C>(a), static_cast<C>(b));
  } else {
    return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
  }
}
template <class A, class B, tessel_host::if_arithmetic<A> = 0, tessel_host::if_arithmetic<B> = 0>
inline typename std::common_type<A, B>::type max(A a, B b) {
  using C = typename std::common_type<A, B>::type;
  if constexpr (std::is_floating_point<C>::value) {
    return std::fmax(static_cast<C>(a), static_cast<C>(b));
  } else {
    return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
  }
}

namespace tessel {

// ---- complex: as tessel_device.cuh (layout-compatible with std::complex and NumPy's) ---------
template <class T>
struct alignas(2 * sizeof(T)) complex {
  using value_type = T;
  T re, im;
  complex() : re(0), im(0) {}
  complex(T r) : re(r), im(0) {}  // NOLINT: implicit, like std::complex
  complex(T r, T i) : re(r), im(i) {}
  template <class U>
  explicit complex(const complex<U>& o) : re(static_cast<T>(o.re)), im(static_cast<T>(o.im)) {}
  T real() const { return re; }
  T imag() const { return im; }
  complex& operator+=(const complex& o) { re += o.re; im += o.im; return *this; }
  complex& operator-=(const complex& o) { re -= o.re; im -= o.im; return *this; }
  complex& operator*=(const complex& o) { *this = *this * o; return *this; }
  complex& operator/=(const complex& o) { *this = *this / o; return *this; }
  friend complex operator+(const complex& a, const complex& b) { return {a.re + b.re, a.im + b.im}; }
  friend complex operator-(const complex& a, const complex& b) { return {a.re - b.re, a.im - b.im}; }
  friend complex operator-(const complex& a) { return {-a.re, -a.im}; }
  friend complex operator+(const complex& a) { return a; }
  friend complex operator*(const complex& a, const complex& b) {
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  }
  friend complex operator/(const complex& a, const complex& b) {
    const T abr = b.re < 0 ? -b.re : b.re, abi = b.im < 0 ? -b.im : b.im;
    if (abr >= abi) {
      if (abr == 0 && abi == 0) return {a.re / abr, a.im / abi};
      const T r = b.im / b.re, d = b.re + b.im * r;
      return {(a.re + a.im * r) / d, (a.im - a.re * r) / d};
    }
    const T r = b.re / b.im, d = b.im + b.re * r;
    return {(a.re * r + a.im) / d, (a.im * r - a.re) / d};
  }
  friend bool operator==(const complex& a, const complex& b) { return a.re == b.re && a.im == b.im; }
  friend bool operator!=(const complex& a, const complex& b) { return !(a == b); }
};
using complex64 = complex<float>;
using complex128 = complex<double>;

// ---- widening and casts, as tessel_device.cuh ------------------------------------------------
template <class T> inline T widen(T v) { return v; }
inline float widen(__half v) { return static_cast<float>(v); }
inline float widen(__nv_bfloat16 v) { return static_cast<float>(v); }

template <class T> struct cast_tag {};
template <class T> struct int_limits { static constexpr bool is_int = false; };
#define TESSEL_INT_LIMITS(T, LO, HI) \
  template <> struct int_limits<T> { static constexpr bool is_int = true; static constexpr T lo = LO, hi = HI; };
TESSEL_INT_LIMITS(signed char, -128, 127)
TESSEL_INT_LIMITS(short, -32768, 32767)
TESSEL_INT_LIMITS(int, -2147483647 - 1, 2147483647)
TESSEL_INT_LIMITS(long long, -9223372036854775807LL - 1, 9223372036854775807LL)
TESSEL_INT_LIMITS(unsigned char, 0, 255)
TESSEL_INT_LIMITS(unsigned short, 0, 65535)
TESSEL_INT_LIMITS(unsigned int, 0, 4294967295u)
TESSEL_INT_LIMITS(unsigned long long, 0, 18446744073709551615ull)
#undef TESSEL_INT_LIMITS
template <class T> struct is_float_type { static constexpr bool value = false; };
template <> struct is_float_type<float> { static constexpr bool value = true; };
template <> struct is_float_type<double> { static constexpr bool value = true; };

// Float to integer: NaN -> 0, out-of-range values saturate (tessel's definition on both backends).
template <class To, class From> inline To cast_real(cast_tag<To>, From v) {
  if constexpr (int_limits<To>::is_int && is_float_type<From>::value) {
    if (v != v) return To(0);
    if (v <= static_cast<From>(int_limits<To>::lo)) return int_limits<To>::lo;
    if (v >= static_cast<From>(int_limits<To>::hi)) return int_limits<To>::hi;
  }
  return static_cast<To>(v);
}
template <class From> inline bool cast_real(cast_tag<bool>, From v) { return v != From(0); }
template <class From> inline __half cast_real(cast_tag<__half>, From v) { return __half(static_cast<float>(v)); }
inline __half cast_real(cast_tag<__half>, double v) { return __half(v); }
template <class From> inline __nv_bfloat16 cast_real(cast_tag<__nv_bfloat16>, From v) {
  return __nv_bfloat16(static_cast<float>(v));
}
inline __nv_bfloat16 cast_real(cast_tag<__nv_bfloat16>, double v) { return __nv_bfloat16(v); }

template <class To, class From> inline To cast_any(cast_tag<To> t, From v) { return cast_real(t, widen(v)); }
template <class R, class From> inline complex<R> cast_any(cast_tag<complex<R>>, From v) {
  return complex<R>(cast_real(cast_tag<R>{}, widen(v)), R(0));
}
template <class R, class S> inline complex<R> cast_any(cast_tag<complex<R>>, complex<S> v) {
  return complex<R>(static_cast<R>(v.re), static_cast<R>(v.im));
}
template <class To, class S> inline To cast_any(cast_tag<To> t, complex<S> v) { return cast_real(t, v.re); }
template <class S> inline bool cast_any(cast_tag<bool>, complex<S> v) { return v.re != S(0) || v.im != S(0); }

template <class To, class From> inline To cast(From v) { return cast_any(cast_tag<To>{}, v); }

}  // namespace tessel
