#pragma once
// Device helpers shared by nvcc and by NVRTC-generated kernels (embedded as a string at build
// time): complex types, float16/bfloat16 conversion, casts with NumPy meaning, NumPy-NaN math,
// 16-byte vectors and N-d strided index math. NVRTC has no standard library, so this header
// uses only built-in types.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "tessel_math.cuh"

#define TESSEL_DEV __device__ __forceinline__
#define TESSEL_HDEV __host__ __device__ __forceinline__

namespace tessel {

// ---- complex -------------------------------------------------------------------------------
// Layout-compatible with std::complex<T> (and NumPy's complex64/complex128).
template <class T>
struct alignas(2 * sizeof(T)) complex {
  using value_type = T;
  T re, im;
  TESSEL_HDEV complex() : re(0), im(0) {}
  TESSEL_HDEV complex(T r) : re(r), im(0) {}  // NOLINT: implicit, like std::complex
  TESSEL_HDEV complex(T r, T i) : re(r), im(i) {}
  template <class U>
  TESSEL_HDEV explicit complex(const complex<U>& o) : re(static_cast<T>(o.re)), im(static_cast<T>(o.im)) {}
  TESSEL_HDEV T real() const { return re; }
  TESSEL_HDEV T imag() const { return im; }
  TESSEL_HDEV complex& operator+=(const complex& o) { re += o.re; im += o.im; return *this; }
  TESSEL_HDEV complex& operator-=(const complex& o) { re -= o.re; im -= o.im; return *this; }
  TESSEL_HDEV complex& operator*=(const complex& o) { *this = *this * o; return *this; }
  TESSEL_HDEV complex& operator/=(const complex& o) { *this = *this / o; return *this; }
  friend TESSEL_HDEV complex operator+(const complex& a, const complex& b) { return {a.re + b.re, a.im + b.im}; }
  friend TESSEL_HDEV complex operator-(const complex& a, const complex& b) { return {a.re - b.re, a.im - b.im}; }
  friend TESSEL_HDEV complex operator-(const complex& a) { return {-a.re, -a.im}; }
  friend TESSEL_HDEV complex operator+(const complex& a) { return a; }
  friend TESSEL_HDEV complex operator*(const complex& a, const complex& b) {
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  }
  // Smith's algorithm: avoids overflow of |b|^2 for large b.
  friend TESSEL_HDEV complex operator/(const complex& a, const complex& b) {
    const T abr = b.re < 0 ? -b.re : b.re, abi = b.im < 0 ? -b.im : b.im;
    if (abr >= abi) {
      if (abr == 0 && abi == 0) return {a.re / abr, a.im / abi};  // inf/nan as NumPy
      const T r = b.im / b.re, d = b.re + b.im * r;
      return {(a.re + a.im * r) / d, (a.im - a.re * r) / d};
    }
    const T r = b.re / b.im, d = b.im + b.re * r;
    return {(a.re * r + a.im) / d, (a.im * r - a.re) / d};
  }
  friend TESSEL_HDEV bool operator==(const complex& a, const complex& b) { return a.re == b.re && a.im == b.im; }
  friend TESSEL_HDEV bool operator!=(const complex& a, const complex& b) { return !(a == b); }
};
using complex64 = complex<float>;
using complex128 = complex<double>;

template <class T> struct is_complex { static constexpr bool value = false; };
template <class T> struct is_complex<complex<T>> { static constexpr bool value = true; };
template <class T> struct is_half { static constexpr bool value = false; };
template <> struct is_half<__half> { static constexpr bool value = true; };
template <> struct is_half<__nv_bfloat16> { static constexpr bool value = true; };

// ---- widening and casts ------------------------------------------------------------------------
// Generated elementwise code computes float16/bfloat16 in float ("opmath") and rounds once at
// the store; a single op rounds exactly as NumPy's float16 op.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<__half> { using type = float; };
template <> struct compute_type<__nv_bfloat16> { using type = float; };

template <class T> TESSEL_DEV T widen(T v) { return v; }
// A NaN keeps its sign and payload, as NumPy widens it (CUDA's conversion gives one NaN).
TESSEL_DEV float widen(__half v) {
  const unsigned int b = __half_as_ushort(v);
  if ((b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0u) {
    return __uint_as_float(((b & 0x8000u) << 16) | 0x7F800000u | ((b & 0x3FFu) << 13));
  }
  return __half2float(v);
}
TESSEL_DEV float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T> struct cast_tag {};

// Float to integer is undefined in C++ (and NumPy) for NaN and out-of-range values; tessel defines
// it, on both backends, as NaN -> 0 and saturation at the integer's limits. The hardware
// conversion saturates only at 32 or 64 bits, so narrower targets are clamped here.
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

// Any widened real value (bool, integers, float, double) to a real type.
template <class To, class From> TESSEL_DEV To cast_real(cast_tag<To>, From v) {
  if constexpr (int_limits<To>::is_int && is_float_type<From>::value) {
    if (v != v) return To(0);
    // lo and hi convert to From exactly or round outward (2^63 - 1 -> 2^63), so the clamp is exact.
    if (v <= static_cast<From>(int_limits<To>::lo)) return int_limits<To>::lo;
    if (v >= static_cast<From>(int_limits<To>::hi)) return int_limits<To>::hi;
  }
  return static_cast<To>(v);
}
template <class From> TESSEL_DEV bool cast_real(cast_tag<bool>, From v) { return v != From(0); }
// A NaN narrowed to a 16-bit float (exp_bits 5: half, 8: bfloat16) as NumPy narrows it: its sign
// and the top bits of its payload (at least one set) kept; CUDA's conversions give one NaN.
template <class From> TESSEL_DEV unsigned short narrow_nan_bits(From v, int exp_bits) {
  const int mantissa = 15 - exp_bits;
  unsigned int sign, payload;
  if constexpr (sizeof(From) == 8) {
    const unsigned long long b = static_cast<unsigned long long>(__double_as_longlong(v));
    sign = static_cast<unsigned int>(b >> 48) & 0x8000u;
    payload = static_cast<unsigned int>((b & 0xFFFFFFFFFFFFFull) >> (52 - mantissa));
  } else {
    const unsigned int b = __float_as_uint(v);
    sign = (b >> 16) & 0x8000u;
    payload = (b & 0x7FFFFFu) >> (23 - mantissa);
  }
  if (payload == 0) payload = 1;
  return static_cast<unsigned short>(sign | (((1u << exp_bits) - 1u) << mantissa) | payload);
}
template <class From> TESSEL_DEV __half cast_real(cast_tag<__half>, From v) {
  if constexpr (is_float_type<From>::value) {
    if (v != v) return __ushort_as_half(narrow_nan_bits(v, 5));
  }
  return __float2half_rn(static_cast<float>(v));
}
TESSEL_DEV __half cast_real(cast_tag<__half>, double v) {
  return v != v ? __ushort_as_half(narrow_nan_bits(v, 5)) : __double2half(v);
}
template <class From> TESSEL_DEV __nv_bfloat16 cast_real(cast_tag<__nv_bfloat16>, From v) {
  if constexpr (is_float_type<From>::value) {
    if (v != v) return __ushort_as_bfloat16(narrow_nan_bits(v, 8));
  }
  return __float2bfloat16_rn(static_cast<float>(v));
}
TESSEL_DEV __nv_bfloat16 cast_real(cast_tag<__nv_bfloat16>, double v) {
  return v != v ? __ushort_as_bfloat16(narrow_nan_bits(v, 8)) : __double2bfloat16(v);
}

template <class To, class From> TESSEL_DEV To cast_any(cast_tag<To> t, From v) { return cast_real(t, widen(v)); }
// real -> complex: imaginary part 0; complex -> real: the real part (NumPy warns and does this);
// complex -> bool: nonzero in either part.
template <class R, class From> TESSEL_DEV complex<R> cast_any(cast_tag<complex<R>>, From v) {
  return complex<R>(cast_real(cast_tag<R>{}, widen(v)), R(0));
}
template <class R, class S> TESSEL_DEV complex<R> cast_any(cast_tag<complex<R>>, complex<S> v) {
  return complex<R>(static_cast<R>(v.re), static_cast<R>(v.im));
}
template <class To, class S> TESSEL_DEV To cast_any(cast_tag<To> t, complex<S> v) { return cast_real(t, v.re); }
template <class S> TESSEL_DEV bool cast_any(cast_tag<bool>, complex<S> v) { return v.re != S(0) || v.im != S(0); }

template <class To, class From> TESSEL_DEV To cast(From v) { return cast_any(cast_tag<To>{}, v); }

// ---- math with NumPy NaN semantics -----------------------------------------------------------
template <class T> TESSEL_DEV bool isnan(T v) { return v != v; }  // false for integers
template <class T> TESSEL_DEV bool isnan(complex<T> v) { return v.re != v.re || v.im != v.im; }
template <class T> TESSEL_DEV bool isinf(T v) { return v - v != v - v && v == v; }  // inf - inf is nan
template <class T> TESSEL_DEV bool isinf(complex<T> v) { return isinf(v.re) || isinf(v.im); }
template <class T> TESSEL_DEV bool isfinite(T v) { return v - v == v - v; }
template <class T> TESSEL_DEV bool isfinite(complex<T> v) { return isfinite(v.re) && isfinite(v.im); }

// maximum/minimum propagate NaN; fmax/fmin ignore it (NumPy).
template <class T> TESSEL_DEV T maximum(T a, T b) { return isnan(a) ? a : (isnan(b) ? b : (a < b ? b : a)); }
template <class T> TESSEL_DEV T minimum(T a, T b) { return isnan(a) ? a : (isnan(b) ? b : (b < a ? b : a)); }
template <class T> TESSEL_DEV T fmax(T a, T b) { return isnan(b) ? a : (isnan(a) ? b : (a < b ? b : a)); }
template <class T> TESSEL_DEV T fmin(T a, T b) { return isnan(b) ? a : (isnan(a) ? b : (b < a ? b : a)); }
template <class T> TESSEL_DEV T sign(T v) { return isnan(v) ? v : T((T(0) < v) - (v < T(0))); }

// ---- complex ordering and math (NumPy semantics) ----------------------------------------------
// NumPy orders complex numbers lexicographically (real part, then imaginary part); a NaN in
// either compares false, and maximum/minimum above propagate it.
template <class T> TESSEL_HDEV bool operator<(const complex<T>& a, const complex<T>& b) {
  return a.re < b.re || (a.re == b.re && a.im < b.im);
}
template <class T> TESSEL_HDEV bool operator<=(const complex<T>& a, const complex<T>& b) {
  return a.re < b.re || (a.re == b.re && a.im <= b.im);
}
template <class T> TESSEL_HDEV bool operator>(const complex<T>& a, const complex<T>& b) { return b < a; }
template <class T> TESSEL_HDEV bool operator>=(const complex<T>& a, const complex<T>& b) { return b <= a; }
// NumPy 2: sign(z) = z / |z| (0 for 0).
template <class T> TESSEL_DEV complex<T> sign(complex<T> z) {
  if (isnan(z)) return {z.re + z.im, z.re + z.im};
  if (z.re == T(0) && z.im == T(0)) return {T(0), T(0)};
  const T m = ::hypot(z.re, z.im);
  return {z.re / m, z.im / m};
}

// Elementary functions of complex arguments: generated code calls tessel::cx::f; the one
// definition of each, special values included, is tessel::cmath::c_f (tessel_math.cuh),
// which the CPU backend runs too. A namespace of their own, so that no real-valued code in
// namespace tessel sees these names.
namespace cx {
#define TESSEL_CX_UNARY(f) \
  template <class T> TESSEL_DEV complex<T> f(complex<T> z) { return tessel::cmath::c_##f(z); }
TESSEL_CX_UNARY(exp)
TESSEL_CX_UNARY(expm1)
TESSEL_CX_UNARY(exp2)
TESSEL_CX_UNARY(log)
TESSEL_CX_UNARY(log1p)
TESSEL_CX_UNARY(log2)
TESSEL_CX_UNARY(log10)
TESSEL_CX_UNARY(sqrt)
TESSEL_CX_UNARY(sin)
TESSEL_CX_UNARY(cos)
TESSEL_CX_UNARY(tan)
TESSEL_CX_UNARY(sinh)
TESSEL_CX_UNARY(cosh)
TESSEL_CX_UNARY(tanh)
TESSEL_CX_UNARY(asin)
TESSEL_CX_UNARY(acos)
TESSEL_CX_UNARY(atan)
TESSEL_CX_UNARY(asinh)
TESSEL_CX_UNARY(acosh)
TESSEL_CX_UNARY(atanh)
#undef TESSEL_CX_UNARY
template <class T> TESSEL_DEV complex<T> pow(complex<T> z, complex<T> w) { return tessel::cmath::c_pow(z, w); }
// Rounds each part to the nearest integer, ties to even (the standard's round of complex).
template <class T> TESSEL_DEV complex<T> rint(complex<T> z) { return {::rint(z.re), ::rint(z.im)}; }
}  // namespace cx

// Python floor division and modulo (result takes the divisor's sign). Integer division by zero
// gives 0 as NumPy does.
template <class T> TESSEL_DEV T floor_divide_int(T a, T b) {
  if (b == T(0)) return T(0);
  const T q = a / b;
  return (a % b != T(0) && ((a < T(0)) != (b < T(0)))) ? T(q - 1) : q;
}
template <class T> TESSEL_DEV T remainder_int(T a, T b) {
  if (b == T(0)) return T(0);
  const T r = a % b;
  return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
}
TESSEL_DEV float remainder_float(float a, float b) {
  const float r = fmodf(a, b);
  return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : (r == 0.0f ? copysignf(0.0f, b) : r);
}
TESSEL_DEV double remainder_float(double a, double b) {
  const double r = ::fmod(a, b);
  return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : (r == 0.0 ? ::copysign(0.0, b) : r);
}

// ---- 16-byte vectors --------------------------------------------------------------------------
template <class T, int N>
struct alignas(sizeof(T) * N) vec {
  T v[N];
};
template <int N, class T> TESSEL_DEV vec<T, N> load_vec(const T* p) { return *reinterpret_cast<const vec<T, N>*>(p); }
template <int N, class T> TESSEL_DEV void store_vec(T* p, const vec<T, N>& x) { *reinterpret_cast<vec<T, N>*>(p) = x; }

// The unsigned word of `Bytes` bytes that the cache-operator intrinsics (__ldcs, __stcs, __ldg)
// take (`exists` false where there is none).
template <int Bytes> struct word_of { typedef unsigned char type; static constexpr bool exists = false; };
template <> struct word_of<1> { typedef unsigned char type; static constexpr bool exists = true; };
template <> struct word_of<2> { typedef unsigned short type; static constexpr bool exists = true; };
template <> struct word_of<4> { typedef unsigned int type; static constexpr bool exists = true; };
template <> struct word_of<8> { typedef uint2 type; static constexpr bool exists = true; };
template <> struct word_of<16> { typedef uint4 type; static constexpr bool exists = true; };

// Streaming (evict-first) global accesses of a vector: ld.global.cs / st.global.cs. A vector of
// no word size is accessed plainly.
template <int N, class T> TESSEL_DEV vec<T, N> load_vec_stream(const T* p) {
  typedef typename word_of<sizeof(T) * N>::type W;
  if constexpr (word_of<sizeof(T) * N>::exists) {
    vec<T, N> r;
    *reinterpret_cast<W*>(&r) = __ldcs(reinterpret_cast<const W*>(p));
    return r;
  } else {
    return load_vec<N>(p);
  }
}
template <int N, class T> TESSEL_DEV void store_vec_stream(T* p, const vec<T, N>& x) {
  typedef typename word_of<sizeof(T) * N>::type W;
  if constexpr (word_of<sizeof(T) * N>::exists) {
    __stcs(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
  } else {
    store_vec<N>(p, x);
  }
}
// ---- N-d strided index math --------------------------------------------------------------------
// Sizes and strides of collapsed dimensions, innermost last, passed by value as kernel params.
template <int R>
struct Dims {
  long long size[R];
};
template <int R>
struct Strides {
  long long stride[R];
};

}  // namespace tessel
