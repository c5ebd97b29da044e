// The run-time support of kernels compiled from Python (tessel.kernel). The generated source
// includes it; NVRTC compiles it for CUDA (TS_CUDA) and the host C++ compiler for the CPU backend
// (TS_HOST). NVRTC has no standard library, so the CUDA side uses built-in types only.
#pragma once

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define TS_CUDA 1
#define TS_D __device__ __forceinline__
#define TS_HD __host__ __device__ __forceinline__
#else
#define TS_HOST 1
#define TS_D inline __attribute__((always_inline))
#define TS_HD inline __attribute__((always_inline))
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#endif

namespace ts {

typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef float f32;
typedef double f64;

// Type punning between same-size types (a union: NVRTC has no memcpy declaration).
template <class To, class From> TS_HD To bitcast(From v) {
  union { From f; To t; } u;
  u.f = v;
  return u.t;
}
template <class T> TS_HD T bit_cast_u32(u32 v) { return bitcast<T>(v); }
template <class T> TS_HD u32 to_bits32(T v) { return bitcast<u32>(v); }

// ---- float16 / bfloat16: 2-byte storage, arithmetic in float, rounded at each result ----------
struct f16 {
  u16 bits;
  f16() = default;
  TS_HD f16(float f) : bits(from_float(f)) {}  // NOLINT
  TS_HD operator float() const { return to_float(bits); }
  static TS_HD u16 from_float(float f) {
#ifdef TS_CUDA
    // the conversion instructions themselves: no cuda_fp16.h to parse
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    u32 x = to_bits32(f);
    const u32 sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return static_cast<u16>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (x >= 0x477ff000u) return static_cast<u16>(sign | 0x7c00u);  // rounds to inf
    if (x < 0x38800000u) {  // subnormal or zero in half: round to a multiple of 2^-24
      const float a = bit_cast_u32<float>(x);
      const float scaled = a * 16777216.0f;  // 2^24, exact
      const float r = __builtin_nearbyintf(scaled);
      return static_cast<u16>(sign | static_cast<u32>(r));
    }
    const u32 mant_odd = (x >> 13) & 1u;
    x += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<u16>(sign | (x >> 13));
#endif
  }
  // double -> half rounded once (float64 -> float16 casts, hfma on the CPU)
  static TS_HD u16 from_double(double d) {
#ifdef TS_CUDA
    u16 h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d));
    return h;
#else
    float f = static_cast<float>(d);
    if (d == d && static_cast<double>(f) != d) {
      // round to odd at float's precision; rounding that to half is rounding d to half
      u32 b = to_bits32(f);
      if (std::fabs(static_cast<double>(f)) > std::fabs(d)) b -= 1u;
      f = bit_cast_u32<float>(b | 1u);
    }
    return from_float(f);
#endif
  }
  static TS_HD float to_float(u16 h) {
#ifdef TS_CUDA
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#else
    const u32 sign = static_cast<u32>(h & 0x8000u) << 16;
    const u32 exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
      const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
      return sign ? -v : v;
    }
    if (exp == 31) return bit_cast_u32<float>(sign | 0x7f800000u | (mant << 13));
    return bit_cast_u32<float>(sign | ((exp + 112) << 23) | (mant << 13));
#endif
  }
};

struct bf16 {
  u16 bits;
  bf16() = default;
  TS_HD bf16(float f) : bits(from_float(f)) {}  // NOLINT
  TS_HD operator float() const { return bit_cast_u32<float>(static_cast<u32>(bits) << 16); }
  static TS_HD u16 from_float(float f) {
    const u32 x = to_bits32(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<u16>((x >> 16) | 0x40u);  // quiet NaN
    return static_cast<u16>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
};

#define TS_HALF_OPS(H)                                                                   \
  TS_HD H operator+(H a, H b) { return H(float(a) + float(b)); }                        \
  TS_HD H operator-(H a, H b) { return H(float(a) - float(b)); }                        \
  TS_HD H operator*(H a, H b) { return H(float(a) * float(b)); }                        \
  TS_HD H operator/(H a, H b) { return H(float(a) / float(b)); }                        \
  TS_HD H operator-(H a) { H r; r.bits = static_cast<u16>(a.bits ^ 0x8000u); return r; } \
  TS_HD bool operator<(H a, H b) { return float(a) < float(b); }                        \
  TS_HD bool operator<=(H a, H b) { return float(a) <= float(b); }                      \
  TS_HD bool operator>(H a, H b) { return float(a) > float(b); }                        \
  TS_HD bool operator>=(H a, H b) { return float(a) >= float(b); }                      \
  TS_HD bool operator==(H a, H b) { return float(a) == float(b); }                      \
  TS_HD bool operator!=(H a, H b) { return float(a) != float(b); }
TS_HALF_OPS(f16)
TS_HALF_OPS(bf16)
#undef TS_HALF_OPS

// ---- complex ---------------------------------------------------------------------------------
template <class T>
struct complex {
  T re, im;
  complex() = default;
  TS_HD complex(T r) : re(r), im(0) {}  // NOLINT
  TS_HD complex(T r, T i) : re(r), im(i) {}
  template <class U>
  TS_HD explicit complex(const complex<U>& o) : re(static_cast<T>(o.re)), im(static_cast<T>(o.im)) {}
};
typedef complex<float> c64;
typedef complex<double> c128;
template <class T> TS_HD complex<T> operator+(complex<T> a, complex<T> b) { return complex<T>(a.re + b.re, a.im + b.im); }
template <class T> TS_HD complex<T> operator-(complex<T> a, complex<T> b) { return complex<T>(a.re - b.re, a.im - b.im); }
template <class T> TS_HD complex<T> operator-(complex<T> a) { return complex<T>(-a.re, -a.im); }
template <class T> TS_HD complex<T> operator*(complex<T> a, complex<T> b) {
  return complex<T>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
template <class T> TS_HD complex<T> operator/(complex<T> a, complex<T> b) {
  const T abr = b.re < 0 ? -b.re : b.re, abi = b.im < 0 ? -b.im : b.im;
  if (abr >= abi) {
    if (abr == 0 && abi == 0) return complex<T>(a.re / abr, a.im / abi);
    const T r = b.im / b.re, d = b.re + b.im * r;
    return complex<T>((a.re + a.im * r) / d, (a.im - a.re * r) / d);
  }
  const T r = b.re / b.im, d = b.im + b.re * r;
  return complex<T>((a.re * r + a.im) / d, (a.im * r - a.re) / d);
}
template <class T> TS_HD bool operator==(complex<T> a, complex<T> b) { return a.re == b.re && a.im == b.im; }
template <class T> TS_HD bool operator!=(complex<T> a, complex<T> b) { return !(a == b); }

// ---- casts with NumPy's meaning ------------------------------------------------------------------
template <class To> struct Cast {
  template <class From> static TS_HD To from(From v) { return static_cast<To>(v); }
  static TS_HD To from(f16 v) { return static_cast<To>(float(v)); }
  static TS_HD To from(bf16 v) { return static_cast<To>(float(v)); }
  template <class U> static TS_HD To from(complex<U> v) { return static_cast<To>(v.re); }
};
template <> struct Cast<bool> {
  template <class From> static TS_HD bool from(From v) { return v != From(0); }
  static TS_HD bool from(bool v) { return v; }
  static TS_HD bool from(f16 v) { return float(v) != 0.0f; }
  static TS_HD bool from(bf16 v) { return float(v) != 0.0f; }
  template <class U> static TS_HD bool from(complex<U> v) { return v.re != 0 || v.im != 0; }
};
TS_HD f16 hraw(u16 b) { f16 r; r.bits = b; return r; }
template <> struct Cast<f16> {
  template <class From> static TS_HD f16 from(From v) { return f16(static_cast<float>(v)); }
  static TS_HD f16 from(double v) { return hraw(f16::from_double(v)); }
  static TS_HD f16 from(i64 v) { return hraw(f16::from_double(static_cast<double>(v))); }
  static TS_HD f16 from(u64 v) { return hraw(f16::from_double(static_cast<double>(v))); }
  static TS_HD f16 from(f16 v) { return v; }
  static TS_HD f16 from(bf16 v) { return f16(float(v)); }
  template <class U> static TS_HD f16 from(complex<U> v) { return f16(static_cast<float>(v.re)); }
};
template <> struct Cast<bf16> {
  template <class From> static TS_HD bf16 from(From v) { return bf16(static_cast<float>(v)); }
  static TS_HD bf16 from(bf16 v) { return v; }
  static TS_HD bf16 from(f16 v) { return bf16(float(v)); }
  template <class U> static TS_HD bf16 from(complex<U> v) { return bf16(static_cast<float>(v.re)); }
};
template <class T> struct Cast<complex<T>> {
  template <class From> static TS_HD complex<T> from(From v) { return complex<T>(Cast<T>::from(v)); }
  template <class U> static TS_HD complex<T> from(complex<U> v) { return complex<T>(static_cast<T>(v.re), static_cast<T>(v.im)); }
};
template <class To, class From> TS_HD To cast(From v) { return Cast<To>::from(v); }

// ---- arrays ------------------------------------------------------------------------------------
// A view of an array argument: data, shape and strides in elements (the kernel's parameters are
// flattened: data, shape[0..n), strides[0..n)).
template <class T, int N> struct Arr {
  T* data;
  i64 shape[N];
  i64 strides[N];
};
template <class T> struct Arr<T, 0> {
  T* data;
};

TS_HD i64 wrap(i64 i, i64 n) { return i < 0 ? i + n : i; }
// The number of iterations of range(start, stop, step) as Python counts them, in unsigned
// arithmetic so that no difference overflows; 0 for a zero step.
template <class T> TS_HD u64 range_count(T start, T stop, T step) {
  if (step > 0) return start < stop ? (u64(stop) - u64(start) - 1) / u64(step) + 1 : 0;
  if (step != 0 && start > stop) return (u64(start) - u64(stop) - 1) / (u64(0) - u64(step)) + 1;
  return 0;
}
// A record field that is not aligned for its type: read and written byte by byte.
template <class T> TS_HD T ldu(const unsigned char* p) {
  union { T v; unsigned char b[sizeof(T)]; } u;
  for (unsigned k = 0; k < sizeof(T); ++k) u.b[k] = p[k];
  return u.v;
}
template <class T> TS_HD void stu(unsigned char* p, T v) {
  union { T v; unsigned char b[sizeof(T)]; } u;
  u.v = v;
  for (unsigned k = 0; k < sizeof(T); ++k) p[k] = u.b[k];
}
// len(range(start, stop, step)) as Python computes it (a step of 0 gives 0 here).
TS_HD i64 range_len(i64 start, i64 stop, i64 step) {
  if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
  if (step < 0) return start > stop ? (start - stop - step - 1) / (-step) : 0;
  return 0;
}

// ---- integer helpers with Python's meaning -----------------------------------------------------
template <class T> TS_HD T floordiv(T a, T b) {
  if (b == 0) return T(0);  // NumPy: 0 (with a warning)
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q = q - T(1);
  return q;
}
template <class T> TS_HD T pymod(T a, T b) {
  if (b == 0) return T(0);
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r = r + b;
  return r;
}
TS_HD u8 floordiv(u8 a, u8 b) { return b ? u8(a / b) : u8(0); }
TS_HD u16 floordiv(u16 a, u16 b) { return b ? u16(a / b) : u16(0); }
TS_HD u32 floordiv(u32 a, u32 b) { return b ? a / b : 0u; }
TS_HD u64 floordiv(u64 a, u64 b) { return b ? a / b : 0ull; }
TS_HD u8 pymod(u8 a, u8 b) { return b ? u8(a % b) : u8(0); }
TS_HD u16 pymod(u16 a, u16 b) { return b ? u16(a % b) : u16(0); }
TS_HD u32 pymod(u32 a, u32 b) { return b ? a % b : 0u; }
TS_HD u64 pymod(u64 a, u64 b) { return b ? a % b : 0ull; }

template <class T> struct WrapMul { static TS_HD T mul(T a, T b) { return static_cast<T>(a * b); } };
template <> struct WrapMul<i32> {  // int32 wraps around (a signed overflow is undefined in C++)
  static TS_HD i32 mul(i32 a, i32 b) { return static_cast<i32>(static_cast<u32>(a) * static_cast<u32>(b)); }
};
template <class T> TS_HD T ipow(T base, T exp) {
  if (exp < 0) return base == T(1) ? T(1) : (base == T(-1) ? ((exp & 1) ? T(-1) : T(1)) : T(0));
  T r = 1;
  while (exp) {
    if (exp & 1) r = WrapMul<T>::mul(r, base);
    base = WrapMul<T>::mul(base, base);
    exp = static_cast<T>(exp >> 1);
  }
  return r;
}

// A float to an integer power by repeated squaring (Numba's int_power): x ** 2 == x * x exactly.
template <class T> TS_HD T fpowi(T base, i64 exp) {
  const bool invert = exp < 0;
  u64 e = invert ? u64(0) - u64(exp) : u64(exp);
  T r = T(1);
  while (e) {
    if (e & 1u) r *= base;
    base *= base;
    e >>= 1;
  }
  return invert ? T(1) / r : r;
}

// ---- float math --------------------------------------------------------------------------------
#ifdef TS_CUDA
#define TS_M1(name) TS_HD float name(float x) { return ::name##f(x); } TS_HD double name(double x) { return ::name(x); }
#else
#define TS_M1(name) TS_HD float name(float x) { return std::name(x); } TS_HD double name(double x) { return std::name(x); }
#endif
TS_M1(sqrt) TS_M1(exp) TS_M1(exp2) TS_M1(expm1) TS_M1(log) TS_M1(log2) TS_M1(log10) TS_M1(log1p)
TS_M1(sin) TS_M1(cos) TS_M1(tan) TS_M1(asin) TS_M1(acos) TS_M1(atan) TS_M1(sinh) TS_M1(cosh)
TS_M1(tanh) TS_M1(asinh) TS_M1(acosh) TS_M1(atanh) TS_M1(floor) TS_M1(ceil) TS_M1(trunc)
TS_M1(fabs) TS_M1(erf) TS_M1(erfc) TS_M1(lgamma) TS_M1(tgamma) TS_M1(cbrt)
#undef TS_M1
#ifdef TS_CUDA
TS_HD float atan2(float y, float x) { return ::atan2f(y, x); } TS_HD double atan2(double y, double x) { return ::atan2(y, x); }
TS_HD float pow(float a, float b) { return ::powf(a, b); } TS_HD double pow(double a, double b) { return ::pow(a, b); }
TS_HD float fmod(float a, float b) { return ::fmodf(a, b); } TS_HD double fmod(double a, double b) { return ::fmod(a, b); }
TS_HD float hypot(float a, float b) { return ::hypotf(a, b); } TS_HD double hypot(double a, double b) { return ::hypot(a, b); }
TS_HD float copysign(float a, float b) { return ::copysignf(a, b); } TS_HD double copysign(double a, double b) { return ::copysign(a, b); }
TS_HD float fma(float a, float b, float c) { return ::fmaf(a, b, c); } TS_HD double fma(double a, double b, double c) { return ::fma(a, b, c); }
TS_HD float ldexp(float a, int e) { return ::ldexpf(a, e); } TS_HD double ldexp(double a, int e) { return ::ldexp(a, e); }
TS_HD float rint(float x) { return ::rintf(x); } TS_HD double rint(double x) { return ::rint(x); }
TS_HD bool isnan(float x) { return ::isnan(x); } TS_HD bool isnan(double x) { return ::isnan(x); }
TS_HD bool isinf(float x) { return ::isinf(x); } TS_HD bool isinf(double x) { return ::isinf(x); }
TS_HD bool isfinite(float x) { return ::isfinite(x); } TS_HD bool isfinite(double x) { return ::isfinite(x); }
TS_HD double inf() { return __longlong_as_double(0x7ff0000000000000ll); }
TS_HD double nan() { return __longlong_as_double(0x7ff8000000000000ll); }
#else
TS_HD float atan2(float y, float x) { return std::atan2(y, x); } TS_HD double atan2(double y, double x) { return std::atan2(y, x); }
TS_HD float pow(float a, float b) { return std::pow(a, b); } TS_HD double pow(double a, double b) { return std::pow(a, b); }
TS_HD float fmod(float a, float b) { return std::fmod(a, b); } TS_HD double fmod(double a, double b) { return std::fmod(a, b); }
TS_HD float hypot(float a, float b) { return std::hypot(a, b); } TS_HD double hypot(double a, double b) { return std::hypot(a, b); }
TS_HD float copysign(float a, float b) { return std::copysign(a, b); } TS_HD double copysign(double a, double b) { return std::copysign(a, b); }
TS_HD float fma(float a, float b, float c) { return std::fma(a, b, c); } TS_HD double fma(double a, double b, double c) { return std::fma(a, b, c); }
TS_HD float ldexp(float a, int e) { return std::ldexp(a, e); } TS_HD double ldexp(double a, int e) { return std::ldexp(a, e); }
TS_HD float rint(float x) { return std::nearbyint(x); } TS_HD double rint(double x) { return std::nearbyint(x); }
TS_HD bool isnan(float x) { return std::isnan(x); } TS_HD bool isnan(double x) { return std::isnan(x); }
TS_HD bool isinf(float x) { return std::isinf(x); } TS_HD bool isinf(double x) { return std::isinf(x); }
TS_HD bool isfinite(float x) { return std::isfinite(x); } TS_HD bool isfinite(double x) { return std::isfinite(x); }
TS_HD double inf() { return __builtin_inf(); }
TS_HD double nan() { return __builtin_nan(""); }
#endif
// Python's float floor division and modulo (sign of the divisor).
template <class T> TS_HD T fpymod(T a, T b) {
  T m = fmod(a, b);
  if (m != 0) { if ((b < 0) != (m < 0)) m += b; } else { m = copysign(T(0), b); }
  return m;
}
template <class T> TS_HD T ffloordiv(T a, T b) {
  if (b == 0) return a / b;
  T m = fmod(a, b);
  T d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= T(1);
  if (d != 0) { T f = floor(d); if (d - f > T(0.5)) f += T(1); d = f; } else { d = copysign(T(0), a / b); }
  return d;
}
// Python's round(): half to even.
template <class T> TS_HD T round_even(T x) { return rint(x); }
template <class T> TS_HD T fmin_nan(T a, T b) { return (a != a) ? a : ((b != b) ? b : (b < a ? b : a)); }
template <class T> TS_HD T fmax_nan(T a, T b) { return (a != a) ? a : ((b != b) ? b : (b > a ? b : a)); }
template <class T> TS_HD T vmin(T a, T b) { return b < a ? b : a; }
template <class T> TS_HD T vmax(T a, T b) { return b > a ? b : a; }
TS_HD float vmin(float a, float b) { return fmin_nan(a, b); }
TS_HD double vmin(double a, double b) { return fmin_nan(a, b); }
TS_HD float vmax(float a, float b) { return fmax_nan(a, b); }
TS_HD double vmax(double a, double b) { return fmax_nan(a, b); }
template <class T> TS_HD T iabs(T a) { return a < 0 ? T(-a) : a; }

// ---- complex math --------------------------------------------------------------------------------
template <class T> TS_HD T cabs(complex<T> z) { return hypot(z.re, z.im); }
template <class T> TS_HD T phase(complex<T> z) { return atan2(z.im, z.re); }
template <class T> TS_HD complex<T> cexp(complex<T> z) { T e = exp(z.re); return complex<T>(e * cos(z.im), e * sin(z.im)); }
template <class T> TS_HD complex<T> clog(complex<T> z) { return complex<T>(log(cabs(z)), phase(z)); }
template <class T> TS_HD complex<T> clog10(complex<T> z) { complex<T> l = clog(z); const T k = T(0.43429448190325182765); return complex<T>(l.re * k, l.im * k); }
template <class T> TS_HD complex<T> csqrt(complex<T> z) {
  if (z.re == 0 && z.im == 0) return complex<T>(0, z.im);
  T r = cabs(z);
  T a = sqrt((r + fabs(z.re)) / 2);
  if (z.re >= 0) return complex<T>(a, z.im / (2 * a));
  return complex<T>(fabs(z.im) / (2 * a), copysign(a, z.im));
}
template <class T> TS_HD complex<T> csin(complex<T> z) { return complex<T>(sin(z.re) * cosh(z.im), cos(z.re) * sinh(z.im)); }
template <class T> TS_HD complex<T> ccos(complex<T> z) { return complex<T>(cos(z.re) * cosh(z.im), -sin(z.re) * sinh(z.im)); }
template <class T> TS_HD complex<T> csinh(complex<T> z) { return complex<T>(sinh(z.re) * cos(z.im), cosh(z.re) * sin(z.im)); }
template <class T> TS_HD complex<T> ccosh(complex<T> z) { return complex<T>(cosh(z.re) * cos(z.im), sinh(z.re) * sin(z.im)); }
template <class T> TS_HD complex<T> ctan(complex<T> z) { return csin(z) / ccos(z); }
template <class T> TS_HD complex<T> ctanh(complex<T> z) { return csinh(z) / ccosh(z); }
// The inverse functions by Kahan's formulas ("Branch Cuts for Complex Elementary Functions"), without special
// cases for huge arguments.
template <class T> TS_HD complex<T> casinh(complex<T> z) {
  complex<T> s1 = csqrt(complex<T>(1 + z.im, -z.re)), s2 = csqrt(complex<T>(1 - z.im, z.re));
  return complex<T>(asinh(s1.re * s2.im - s2.re * s1.im), atan2(z.im, s1.re * s2.re - s1.im * s2.im));
}
template <class T> TS_HD complex<T> casin(complex<T> z) { complex<T> s = casinh(complex<T>(-z.im, z.re)); return complex<T>(s.im, -s.re); }
template <class T> TS_HD complex<T> cacos(complex<T> z) {
  complex<T> s1 = csqrt(complex<T>(1 - z.re, -z.im)), s2 = csqrt(complex<T>(1 + z.re, z.im));
  return complex<T>(2 * atan2(s1.re, s2.re), asinh(s2.re * s1.im - s2.im * s1.re));
}
template <class T> TS_HD complex<T> cacosh(complex<T> z) {
  complex<T> s1 = csqrt(complex<T>(z.re - 1, z.im)), s2 = csqrt(complex<T>(z.re + 1, z.im));
  return complex<T>(asinh(s1.re * s2.re + s1.im * s2.im), 2 * atan2(s1.im, s2.re));
}
template <class T> TS_HD complex<T> catanh(complex<T> z) {
  const T s = z.re < 0 ? T(-1) : T(1), x = s * z.re, y = s * z.im, ay = fabs(y), d = 1 - x;   // atanh(-z) = -atanh(z)
  return complex<T>(s * log1p(4 * x / (d * d + ay * ay)) / 4, -s * atan2(-2 * y, d * (1 + x) - ay * ay) / 2);
}
template <class T> TS_HD complex<T> catan(complex<T> z) { complex<T> s = catanh(complex<T>(-z.im, z.re)); return complex<T>(s.im, -s.re); }
template <class T> TS_HD complex<T> cpow(complex<T> a, complex<T> b) {
  if (b.re == 0 && b.im == 0) return complex<T>(1, 0);
  if (a.re == 0 && a.im == 0) return complex<T>(0, 0);
  return cexp(b * clog(a));
}
template <class T> TS_HD complex<T> crect(T r, T phi) { return complex<T>(r * cos(phi), r * sin(phi)); }
template <class T> TS_HD bool cisnan(complex<T> z) { return isnan(z.re) || isnan(z.im); }
template <class T> TS_HD bool cisinf(complex<T> z) { return isinf(z.re) || isinf(z.im); }
template <class T> TS_HD bool cisfinite(complex<T> z) { return isfinite(z.re) && isfinite(z.im); }

// ---- more float math (Numba's libdevice functions) --------------------------------------------------
#ifdef TS_CUDA
#define TS_M1C(name) TS_HD float name(float x) { return ::name##f(x); } TS_HD double name(double x) { return ::name(x); }
TS_M1C(rsqrt) TS_M1C(rcbrt) TS_M1C(exp10) TS_M1C(cospi) TS_M1C(sinpi) TS_M1C(erfinv) TS_M1C(erfcinv)
TS_M1C(erfcx) TS_M1C(normcdf) TS_M1C(normcdfinv) TS_M1C(logb) TS_M1C(nearbyint) TS_M1C(round) TS_M1C(j0)
TS_M1C(j1) TS_M1C(y0) TS_M1C(y1)
#undef TS_M1C
#define TS_M2C(name) TS_HD float name(float a, float b) { return ::name##f(a, b); } \
  TS_HD double name(double a, double b) { return ::name(a, b); }
TS_M2C(fdim) TS_M2C(fmax) TS_M2C(fmin) TS_M2C(nextafter) TS_M2C(remainder)
#undef TS_M2C
TS_HD int ilogb(float x) { return ::ilogbf(x); } TS_HD int ilogb(double x) { return ::ilogb(x); }
TS_HD float scalbn(float x, int n) { return ::scalbnf(x, n); } TS_HD double scalbn(double x, int n) { return ::scalbn(x, n); }
TS_HD float frexp(float x, int* e) { return ::frexpf(x, e); } TS_HD double frexp(double x, int* e) { return ::frexp(x, e); }
TS_HD float modf(float x, float* i) { return ::modff(x, i); } TS_HD double modf(double x, double* i) { return ::modf(x, i); }
TS_HD float remquo(float a, float b, int* q) { return ::remquof(a, b, q); }
TS_HD double remquo(double a, double b, int* q) { return ::remquo(a, b, q); }
TS_HD void sincos(float x, float* s, float* c) { ::sincosf(x, s, c); }
TS_HD void sincos(double x, double* s, double* c) { ::sincos(x, s, c); }
TS_HD void sincospi(float x, float* s, float* c) { ::sincospif(x, s, c); }
TS_HD void sincospi(double x, double* s, double* c) { ::sincospi(x, s, c); }
TS_HD float jn(int n, float x) { return ::jnf(n, x); } TS_HD double jn(int n, double x) { return ::jn(n, x); }
TS_HD float yn(int n, float x) { return ::ynf(n, x); } TS_HD double yn(int n, double x) { return ::yn(n, x); }
TS_HD bool signbit(float x) { return ::signbit(x); } TS_HD bool signbit(double x) { return ::signbit(x); }
TS_HD float saturate(float x) { return __saturatef(x); }
#else
TS_HD float rsqrt(float x) { return 1.0f / std::sqrt(x); } TS_HD double rsqrt(double x) { return 1.0 / std::sqrt(x); }
TS_HD float rcbrt(float x) { return 1.0f / std::cbrt(x); } TS_HD double rcbrt(double x) { return 1.0 / std::cbrt(x); }
#if defined(__GLIBC__)
TS_HD float exp10(float x) { return ::exp10f(x); } TS_HD double exp10(double x) { return ::exp10(x); }
#else
TS_HD float exp10(float x) { return static_cast<float>(std::pow(10.0, static_cast<double>(x))); }
TS_HD double exp10(double x) { return std::pow(10.0, x); }
#endif
// sin(pi x) and cos(pi x) with the argument reduced exactly (remainder by 2 is exact)
template <class T> TS_HD T sinpi_t(T x) {
  if (!std::isfinite(x)) return x - x;
  const T r = std::remainder(x, T(2)), a = std::fabs(r), pi = T(3.14159265358979323846);
  T s;
  if (a <= T(0.25)) s = std::sin(pi * a);
  else if (a <= T(0.75)) s = std::cos(pi * (a - T(0.5)));
  else s = std::sin(pi * (T(1) - a));
  if (s == T(0)) return x > T(0) ? T(0) : (x < T(0) ? -T(0) : x);
  return r < T(0) ? -s : s;
}
template <class T> TS_HD T cospi_t(T x) {
  if (!std::isfinite(x)) return x - x;
  const T a = std::fabs(std::remainder(x, T(2))), pi = T(3.14159265358979323846);
  if (a == T(0.5)) return T(0);
  if (a <= T(0.25)) return std::cos(pi * a);
  if (a < T(0.75)) return -std::sin(pi * (a - T(0.5)));
  return -std::cos(pi * (T(1) - a));
}
TS_HD float sinpi(float x) { return sinpi_t(x); } TS_HD double sinpi(double x) { return sinpi_t(x); }
TS_HD float cospi(float x) { return cospi_t(x); } TS_HD double cospi(double x) { return cospi_t(x); }
TS_HD void sincos(float x, float* s, float* c) { *s = std::sin(x); *c = std::cos(x); }
TS_HD void sincos(double x, double* s, double* c) { *s = std::sin(x); *c = std::cos(x); }
TS_HD void sincospi(float x, float* s, float* c) { *s = sinpi_t(x); *c = cospi_t(x); }
TS_HD void sincospi(double x, double* s, double* c) { *s = sinpi_t(x); *c = cospi_t(x); }
// erfcx(x) = exp(x^2) erfc(x): x^2 split exactly (hi + lo); for large x the asymptotic series
inline double erfcx_d(double x) {
  if (x != x) return x;
  if (x < 25.0) {
    const double hi = x * x, lo = std::fma(x, x, -hi);
    return std::exp(hi) * (1.0 + lo) * std::erfc(x);
  }
  if (x > 1e8) return 0.5641895835477563 / x;
  const double t = 1.0 / (2.0 * x * x);
  double term = 1.0, sum = 1.0;
  for (int k = 1; k <= 12; ++k) {
    term *= -(2.0 * k - 1.0) * t;
    sum += term;
  }
  return 0.5641895835477563 / x * sum;
}
// erfinv/erfcinv: an initial guess (Giles' approximation), refined by Newton's method on erf
// (|y| <= 0.5) or erfc (the tails, where 1 - |y| is exact); in the far tail of erfcinv, on
// log(erfc) through erfcx.
inline double erfinv_guess(double w, double x) {
  double p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w; p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w; p = 2.83297682 + p * w;
  }
  return p * x;
}
// x >= 0 with erfc(x) = z, 0 < z <= 1
inline double erfc_solve(double z) {
  const double k = 1.1283791670955126;  // 2 / sqrt(pi)
  if (z < 1e-12) {
    double x = std::sqrt(-std::log(z));
    x = std::sqrt(-std::log(z) - std::log(x * 1.772453850905516));
    for (int i = 0; i < 10; ++i) {  // on log(erfc(x)) = log(erfcx(x)) - x^2
      const double e = erfcx_d(x), step = (std::log(e) - x * x - std::log(z)) / (k / e);
      x += step;
      if (std::fabs(step) <= 1e-17 * x) break;
    }
    return x;
  }
  double x = erfinv_guess(-std::log(z * (2.0 - z)), 1.0 - z);
  for (int i = 0; i < 12; ++i) {
    const double step = (std::erfc(x) - z) / (k * std::exp(-x * x));
    x += step;
    if (std::fabs(step) <= 1e-17 * std::fabs(x)) break;
  }
  return x;
}
inline double erfinv_d(double y) {
  if (y != y || y < -1.0 || y > 1.0) return nan();
  if (y == 1.0) return inf();
  if (y == -1.0) return -inf();
  const double a = std::fabs(y);
  double x;
  if (a <= 0.5) {
    x = erfinv_guess(-std::log((1.0 - a) * (1.0 + a)), a);
    for (int i = 0; i < 8; ++i) {
      const double step = (std::erf(x) - a) / (1.1283791670955126 * std::exp(-x * x));
      x -= step;
      if (std::fabs(step) <= 1e-17 * std::fabs(x)) break;
    }
  } else {
    x = erfc_solve(1.0 - a);
  }
  return y < 0 ? -x : x;
}
inline double erfcinv_d(double z) {
  if (z != z || z < 0.0 || z > 2.0) return nan();
  if (z == 0.0) return inf();
  if (z == 2.0) return -inf();
  if (z <= 1.0) return erfc_solve(z);
  if (z >= 1.5) return -erfc_solve(2.0 - z);
  return -erfinv_d(z - 1.0);
}
TS_HD float erfinv(float x) { return static_cast<float>(erfinv_d(x)); } TS_HD double erfinv(double x) { return erfinv_d(x); }
TS_HD float erfcinv(float x) { return static_cast<float>(erfcinv_d(x)); } TS_HD double erfcinv(double x) { return erfcinv_d(x); }
TS_HD float erfcx(float x) { return static_cast<float>(erfcx_d(x)); } TS_HD double erfcx(double x) { return erfcx_d(x); }
TS_HD float normcdf(float x) { return static_cast<float>(0.5 * std::erfc(-static_cast<double>(x) * 0.7071067811865476)); }
TS_HD double normcdf(double x) { return 0.5 * std::erfc(-x * 0.7071067811865476); }
TS_HD float normcdfinv(float p) { return static_cast<float>(-1.4142135623730951 * erfcinv_d(2.0 * p)); }
TS_HD double normcdfinv(double p) { return -1.4142135623730951 * erfcinv_d(2.0 * p); }
#define TS_M1H(name) TS_HD float name(float x) { return std::name(x); } TS_HD double name(double x) { return std::name(x); }
TS_M1H(logb) TS_M1H(nearbyint) TS_M1H(round)
#undef TS_M1H
TS_HD float j0(float x) { return ::j0f(x); } TS_HD double j0(double x) { return ::j0(x); }
TS_HD float j1(float x) { return ::j1f(x); } TS_HD double j1(double x) { return ::j1(x); }
TS_HD float y0(float x) { return ::y0f(x); } TS_HD double y0(double x) { return ::y0(x); }
TS_HD float y1(float x) { return ::y1f(x); } TS_HD double y1(double x) { return ::y1(x); }
TS_HD float jn(int n, float x) { return ::jnf(n, x); } TS_HD double jn(int n, double x) { return ::jn(n, x); }
TS_HD float yn(int n, float x) { return ::ynf(n, x); } TS_HD double yn(int n, double x) { return ::yn(n, x); }
#define TS_M2H(name) TS_HD float name(float a, float b) { return std::name(a, b); } \
  TS_HD double name(double a, double b) { return std::name(a, b); }
TS_M2H(fdim) TS_M2H(fmax) TS_M2H(fmin) TS_M2H(nextafter) TS_M2H(remainder)
#undef TS_M2H
TS_HD int ilogb(float x) { return std::ilogb(x); } TS_HD int ilogb(double x) { return std::ilogb(x); }
TS_HD float scalbn(float x, int n) { return std::scalbn(x, n); } TS_HD double scalbn(double x, int n) { return std::scalbn(x, n); }
TS_HD float frexp(float x, int* e) { return std::frexp(x, e); } TS_HD double frexp(double x, int* e) { return std::frexp(x, e); }
TS_HD float modf(float x, float* i) { return std::modf(x, i); } TS_HD double modf(double x, double* i) { return std::modf(x, i); }
TS_HD float remquo(float a, float b, int* q) { return std::remquo(a, b, q); }
TS_HD double remquo(double a, double b, int* q) { return std::remquo(a, b, q); }
TS_HD bool signbit(float x) { return std::signbit(x); } TS_HD bool signbit(double x) { return std::signbit(x); }
TS_HD float saturate(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0, as CUDA's
// Directed rounding (libdevice's _rd, _ru, _rz): the operation runs with the FPU's rounding mode
// set (volatile operands keep it inside), then the mode is restored.
struct RoundingMode {
  int old;
  explicit RoundingMode(int m) : old(std::fegetround()) {
    std::fesetround(m == 1 ? FE_DOWNWARD : (m == 2 ? FE_UPWARD : (m == 3 ? FE_TOWARDZERO : FE_TONEAREST)));
  }
  ~RoundingMode() { std::fesetround(old); }
};
template <int M, class T> inline T radd(T a, T b) { volatile T x = a, y = b; RoundingMode g(M); volatile T r = x + y; return r; }
template <int M, class T> inline T rsub(T a, T b) { volatile T x = a, y = b; RoundingMode g(M); volatile T r = x - y; return r; }
template <int M, class T> inline T rmul(T a, T b) { volatile T x = a, y = b; RoundingMode g(M); volatile T r = x * y; return r; }
template <int M, class T> inline T rdiv(T a, T b) { volatile T x = a, y = b; RoundingMode g(M); volatile T r = x / y; return r; }
template <int M, class T> inline T rsqrt_r(T a) { volatile T x = a; RoundingMode g(M); volatile T r = std::sqrt(static_cast<T>(x)); return r; }
template <int M, class T> inline T rfma(T a, T b, T c) {
  volatile T x = a, y = b, z = c; RoundingMode g(M); volatile T r = std::fma(static_cast<T>(x), static_cast<T>(y), static_cast<T>(z)); return r;
}
template <class To, int M, class From> inline To rconv(From a) { volatile From x = a; RoundingMode g(M); volatile To r = static_cast<To>(x); return r; }
#endif
// a float (already rounded to an integer value) to an integer type as CUDA's cvt does: NaN -> 0,
// saturated at the type's limits
template <class To> struct IntRange;
template <> struct IntRange<i32> {
  static TS_HD double lo() { return -2147483648.0; }
  static TS_HD double hi() { return 2147483647.0; }
  static TS_HD i32 min() { return -2147483647 - 1; }
  static TS_HD i32 max() { return 2147483647; }
};
template <> struct IntRange<u32> {
  static TS_HD double lo() { return 0.0; }
  static TS_HD double hi() { return 4294967295.0; }
  static TS_HD u32 min() { return 0u; }
  static TS_HD u32 max() { return 4294967295u; }
};
template <> struct IntRange<i64> {
  static TS_HD double lo() { return -9223372036854775808.0; }
  static TS_HD double hi() { return 9223372036854775808.0; }
  static TS_HD i64 min() { return -9223372036854775807ll - 1; }
  static TS_HD i64 max() { return 9223372036854775807ll; }
};
template <> struct IntRange<u64> {
  static TS_HD double lo() { return 0.0; }
  static TS_HD double hi() { return 18446744073709551616.0; }
  static TS_HD u64 min() { return 0ull; }
  static TS_HD u64 max() { return 18446744073709551615ull; }
};
template <class To, class From> TS_HD To f2i(From x) {
  const double v = static_cast<double>(x);
  if (v != v) return To(0);
  if (v <= IntRange<To>::lo()) return IntRange<To>::min();
  if (v >= IntRange<To>::hi()) return IntRange<To>::max();
  return static_cast<To>(v);
}
template <class T> TS_HD T powi(T x, int n) {
  unsigned m = n < 0 ? 0u - static_cast<unsigned>(n) : static_cast<unsigned>(n);
  T r = T(1);
  while (m) {
    if (m & 1u) r *= x;
    x *= x;
    m >>= 1;
  }
  return n < 0 ? T(1) / r : r;
}
// integer helpers (wrap-around as the hardware's)
TS_HD i32 wabs(i32 a) { return a < 0 ? static_cast<i32>(0u - static_cast<u32>(a)) : a; }
TS_HD i64 wabs(i64 a) { return a < 0 ? static_cast<i64>(0ull - static_cast<u64>(a)) : a; }
TS_HD i32 ihadd(i32 a, i32 b) { return static_cast<i32>((static_cast<i64>(a) + b) >> 1); }
TS_HD i32 irhadd(i32 a, i32 b) { return static_cast<i32>((static_cast<i64>(a) + b + 1) >> 1); }
TS_HD u32 uhadd(u32 a, u32 b) { return static_cast<u32>((static_cast<u64>(a) + b) >> 1); }
TS_HD u32 urhadd(u32 a, u32 b) { return static_cast<u32>((static_cast<u64>(a) + b + 1) >> 1); }
TS_HD i32 mul24(i32 a, i32 b) {
  const i64 x = static_cast<i64>(static_cast<u32>(a) << 8) >> 8, y = static_cast<i64>(static_cast<u32>(b) << 8) >> 8;
  return static_cast<i32>(static_cast<u32>(static_cast<u64>(x * y)));
}
TS_HD u32 umul24(u32 a, u32 b) { return static_cast<u32>(static_cast<u64>(a & 0xffffffu) * (b & 0xffffffu)); }
TS_HD i32 mulhi(i32 a, i32 b) { return static_cast<i32>((static_cast<i64>(a) * b) >> 32); }
TS_HD u32 umulhi(u32 a, u32 b) { return static_cast<u32>((static_cast<u64>(a) * b) >> 32); }
#ifdef TS_CUDA
TS_HD i64 mul64hi(i64 a, i64 b) { return __mul64hi(a, b); }
TS_HD u64 umul64hi(u64 a, u64 b) { return __umul64hi(a, b); }
TS_HD u32 byte_perm(u32 x, u32 y, u32 s) { return __byte_perm(x, y, s); }
#else
TS_HD i64 mul64hi(i64 a, i64 b) { return static_cast<i64>((static_cast<__int128>(a) * b) >> 64); }
TS_HD u64 umul64hi(u64 a, u64 b) { return static_cast<u64>((static_cast<unsigned __int128>(a) * b) >> 64); }
TS_HD u32 byte_perm(u32 x, u32 y, u32 s) {
  const u64 v = (static_cast<u64>(y) << 32) | x;
  u32 r = 0;
  for (int k = 0; k < 4; ++k) r |= static_cast<u32>((v >> (8 * ((s >> (4 * k)) & 7u))) & 0xffu) << (8 * k);
  return r;
}
#endif
TS_HD u32 usad(u32 x, u32 y, u32 z) { return (x > y ? x - y : y - x) + z; }
TS_HD u32 sad(i32 x, i32 y, u32 z) {
  const i64 d = static_cast<i64>(x) - y;
  return static_cast<u32>(d < 0 ? -d : d) + z;
}

// ---- half precision (Numba's cuda.fp16) ------------------------------------------------------------
TS_HD bool hisnan(f16 a) { return (a.bits & 0x7fffu) > 0x7c00u; }
TS_HD f16 habs(f16 a) { return hraw(static_cast<u16>(a.bits & 0x7fffu)); }
TS_HD bool hne(f16 a, f16 b) { return !hisnan(a) && !hisnan(b) && float(a) != float(b); }
// as CUDA's __hmax/__hmin: a NaN gives the other operand; +0 is above -0
TS_HD f16 hmax(f16 a, f16 b) {
  if (hisnan(a)) return hisnan(b) ? hraw(0x7fffu) : b;
  if (hisnan(b)) return a;
  const float x = float(a), y = float(b);
  if (x != y) return x > y ? a : b;
  return (a.bits & 0x8000u) ? b : a;
}
TS_HD f16 hmin(f16 a, f16 b) {
  if (hisnan(a)) return hisnan(b) ? hraw(0x7fffu) : b;
  if (hisnan(b)) return a;
  const float x = float(a), y = float(b);
  if (x != y) return x < y ? a : b;
  return (a.bits & 0x8000u) ? a : b;
}
// fma rounded once
#ifdef TS_CUDA
TS_D f16 hfma(f16 a, f16 b, f16 c) {
  f16 r;
  asm("fma.rn.f16 %0, %1, %2, %3;" : "=h"(r.bits) : "h"(a.bits), "h"(b.bits), "h"(c.bits));
  return r;
}
#else
// a*b is exact in double and a*b + c is rounded once to double, then once to half: the double's
// rounding never makes a tie at half's precision that was not one
TS_HD f16 hfma(f16 a, f16 b, f16 c) {
  return hraw(f16::from_double(std::fma(static_cast<double>(float(a)), static_cast<double>(float(b)),
                                        static_cast<double>(float(c)))));
}
#endif

// ---- bit intrinsics ------------------------------------------------------------------------------
#ifdef TS_CUDA
TS_HD int popc(u32 x) { return __popc(x); }
TS_HD int popc(u64 x) { return __popcll(x); }
TS_HD int clz(u32 x) { return __clz(x); }
TS_HD int clz(u64 x) { return __clzll(x); }
TS_HD int ffs(u32 x) { return __ffs(x); }
TS_HD int ffs(u64 x) { return __ffsll(x); }
TS_HD u32 brev(u32 x) { return __brev(x); }
TS_HD u64 brev(u64 x) { return __brevll(x); }
#else
TS_HD int popc(u32 x) { return __builtin_popcount(x); }
TS_HD int popc(u64 x) { return __builtin_popcountll(x); }
TS_HD int clz(u32 x) { return x ? __builtin_clz(x) : 32; }
TS_HD int clz(u64 x) { return x ? __builtin_clzll(x) : 64; }
TS_HD int ffs(u32 x) { return __builtin_ffs(static_cast<int>(x)); }
TS_HD int ffs(u64 x) { return __builtin_ffsll(static_cast<long long>(x)); }
TS_HD u32 brev(u32 x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
TS_HD u64 brev(u64 x) { return (static_cast<u64>(brev(static_cast<u32>(x))) << 32) | brev(static_cast<u32>(x >> 32)); }
#endif

// ---- atomics: return the old value -----------------------------------------------------------------
#ifdef TS_CUDA
template <class T> struct AtomicWord;  // the unsigned word a CAS loop works on
template <> struct AtomicWord<float> { typedef unsigned int type; };
template <> struct AtomicWord<double> { typedef unsigned long long type; };
template <> struct AtomicWord<i64> { typedef unsigned long long type; };
template <> struct AtomicWord<u64> { typedef unsigned long long type; };
template <> struct AtomicWord<i32> { typedef unsigned int type; };
template <> struct AtomicWord<u32> { typedef unsigned int type; };
template <class T, class F> TS_D T atomic_cas_loop(T* p, F f) {
  typedef typename AtomicWord<T>::type W;
  W* w = reinterpret_cast<W*>(p);
  W old = *w, assumed;
  do {
    assumed = old;
    old = atomicCAS(w, assumed, bitcast<W>(f(bitcast<T>(assumed))));
  } while (old != assumed);
  return bitcast<T>(old);
}
TS_D i32 atomic_add(i32* p, i32 v) { return atomicAdd(p, v); }
TS_D u32 atomic_add(u32* p, u32 v) { return atomicAdd(p, v); }
TS_D u64 atomic_add(u64* p, u64 v) { return atomicAdd(reinterpret_cast<unsigned long long*>(p), v); }
TS_D i64 atomic_add(i64* p, i64 v) { return static_cast<i64>(atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<u64>(v))); }
TS_D float atomic_add(float* p, float v) { return atomicAdd(p, v); }
TS_D double atomic_add(double* p, double v) { return atomicAdd(p, v); }
template <class T> TS_D T atomic_sub(T* p, T v) { return atomic_add(p, T(-v)); }
TS_D u32 atomic_sub(u32* p, u32 v) { return atomicSub(p, v); }
TS_D u64 atomic_sub(u64* p, u64 v) { return atomicAdd(reinterpret_cast<unsigned long long*>(p), 0ull - v); }
TS_D i32 atomic_min(i32* p, i32 v) { return atomicMin(p, v); }
TS_D u32 atomic_min(u32* p, u32 v) { return atomicMin(p, v); }
TS_D i64 atomic_min(i64* p, i64 v) { return atomicMin(reinterpret_cast<long long*>(p), v); }
TS_D u64 atomic_min(u64* p, u64 v) { return atomicMin(reinterpret_cast<unsigned long long*>(p), v); }
TS_D i32 atomic_max(i32* p, i32 v) { return atomicMax(p, v); }
TS_D u32 atomic_max(u32* p, u32 v) { return atomicMax(p, v); }
TS_D i64 atomic_max(i64* p, i64 v) { return atomicMax(reinterpret_cast<long long*>(p), v); }
TS_D u64 atomic_max(u64* p, u64 v) { return atomicMax(reinterpret_cast<unsigned long long*>(p), v); }
// Floats, as Numba: atomic.min/max propagate a NaN (stored or given); nanmin/nanmax treat NaN as
// missing (fmin/fmax).
template <class T> struct FNanMin { T v; TS_D T operator()(T c) const { return (v < c || c != c) ? v : c; } };
template <class T> struct FNanMax { T v; TS_D T operator()(T c) const { return (v > c || c != c) ? v : c; } };
template <class T> struct FMin { T v; TS_D T operator()(T c) const { return (c != c || v != v) ? c : (v < c ? v : c); } };
template <class T> struct FMax { T v; TS_D T operator()(T c) const { return (c != c || v != v) ? c : (v > c ? v : c); } };
TS_D float atomic_min(float* p, float v) { return atomic_cas_loop(p, FMin<float>{v}); }
TS_D double atomic_min(double* p, double v) { return atomic_cas_loop(p, FMin<double>{v}); }
TS_D float atomic_max(float* p, float v) { return atomic_cas_loop(p, FMax<float>{v}); }
TS_D double atomic_max(double* p, double v) { return atomic_cas_loop(p, FMax<double>{v}); }
template <class T> TS_D T atomic_nanmin(T* p, T v) { return atomic_cas_loop(p, FNanMin<T>{v}); }
template <class T> TS_D T atomic_nanmax(T* p, T v) { return atomic_cas_loop(p, FNanMax<T>{v}); }
TS_D i32 atomic_nanmin(i32* p, i32 v) { return atomic_min(p, v); }
TS_D u32 atomic_nanmin(u32* p, u32 v) { return atomic_min(p, v); }
TS_D i64 atomic_nanmin(i64* p, i64 v) { return atomic_min(p, v); }
TS_D u64 atomic_nanmin(u64* p, u64 v) { return atomic_min(p, v); }
TS_D i32 atomic_nanmax(i32* p, i32 v) { return atomic_max(p, v); }
TS_D u32 atomic_nanmax(u32* p, u32 v) { return atomic_max(p, v); }
TS_D i64 atomic_nanmax(i64* p, i64 v) { return atomic_max(p, v); }
TS_D u64 atomic_nanmax(u64* p, u64 v) { return atomic_max(p, v); }
template <class T> TS_D T atomic_exch(T* p, T v) {
  typedef typename AtomicWord<T>::type W;
  return bitcast<T>(atomicExch(reinterpret_cast<W*>(p), bitcast<W>(v)));
}
template <class T> TS_D T atomic_cas(T* p, T cmp, T v) {
  typedef typename AtomicWord<T>::type W;
  return bitcast<T>(atomicCAS(reinterpret_cast<W*>(p), bitcast<W>(cmp), bitcast<W>(v)));
}
TS_D i32 atomic_and(i32* p, i32 v) { return atomicAnd(p, v); }
TS_D u32 atomic_and(u32* p, u32 v) { return atomicAnd(p, v); }
TS_D i64 atomic_and(i64* p, i64 v) { return static_cast<i64>(atomicAnd(reinterpret_cast<unsigned long long*>(p), static_cast<u64>(v))); }
TS_D u64 atomic_and(u64* p, u64 v) { return atomicAnd(reinterpret_cast<unsigned long long*>(p), v); }
TS_D i32 atomic_or(i32* p, i32 v) { return atomicOr(p, v); }
TS_D u32 atomic_or(u32* p, u32 v) { return atomicOr(p, v); }
TS_D i64 atomic_or(i64* p, i64 v) { return static_cast<i64>(atomicOr(reinterpret_cast<unsigned long long*>(p), static_cast<u64>(v))); }
TS_D u64 atomic_or(u64* p, u64 v) { return atomicOr(reinterpret_cast<unsigned long long*>(p), v); }
TS_D i32 atomic_xor(i32* p, i32 v) { return atomicXor(p, v); }
TS_D u32 atomic_xor(u32* p, u32 v) { return atomicXor(p, v); }
TS_D i64 atomic_xor(i64* p, i64 v) { return static_cast<i64>(atomicXor(reinterpret_cast<unsigned long long*>(p), static_cast<u64>(v))); }
TS_D u64 atomic_xor(u64* p, u64 v) { return atomicXor(reinterpret_cast<unsigned long long*>(p), v); }
TS_D u32 atomic_inc(u32* p, u32 v) { return atomicInc(p, v); }
TS_D u32 atomic_dec(u32* p, u32 v) { return atomicDec(p, v); }
template <class T> struct IncOp { T v; TS_D T operator()(T c) const { return c >= v ? T(0) : T(c + 1); } };
template <class T> struct DecOp { T v; TS_D T operator()(T c) const { return (c == 0 || c > v) ? v : T(c - 1); } };
TS_D u64 atomic_inc(u64* p, u64 v) { return atomic_cas_loop(p, IncOp<u64>{v}); }
TS_D u64 atomic_dec(u64* p, u64 v) { return atomic_cas_loop(p, DecOp<u64>{v}); }
#else
template <class T> struct AtomicWord { typedef T type; };
template <> struct AtomicWord<float> { typedef u32 type; };
template <> struct AtomicWord<double> { typedef u64 type; };
template <class T, class F> inline T atomic_cas_loop(T* p, F f) {
  typedef typename AtomicWord<T>::type W;
  W* w = reinterpret_cast<W*>(p);
  W old = __atomic_load_n(w, __ATOMIC_RELAXED);
  for (;;) {
    T cur; std::memcpy(&cur, &old, sizeof(T));
    T next = f(cur);
    W nw; std::memcpy(&nw, &next, sizeof(T));
    if (__atomic_compare_exchange_n(w, &old, nw, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return cur;
  }
}
template <class T> struct AddOp { T v; T operator()(T c) const { return static_cast<T>(c + v); } };
template <class T> struct MinOp { T v; T operator()(T c) const { return v < c ? v : c; } };
template <class T> struct MaxOp { T v; T operator()(T c) const { return v > c ? v : c; } };
template <class T> struct FNanMin { T v; T operator()(T c) const { return (v < c || c != c) ? v : c; } };
template <class T> struct FNanMax { T v; T operator()(T c) const { return (v > c || c != c) ? v : c; } };
template <class T> struct FMin { T v; T operator()(T c) const { return (c != c || v != v) ? c : (v < c ? v : c); } };
template <class T> struct FMax { T v; T operator()(T c) const { return (c != c || v != v) ? c : (v > c ? v : c); } };
template <class T> struct IncOp { T v; T operator()(T c) const { return c >= v ? T(0) : T(c + 1); } };
template <class T> struct DecOp { T v; T operator()(T c) const { return (c == 0 || c > v) ? v : T(c - 1); } };
template <class T> inline T atomic_add(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline float atomic_add(float* p, float v) { return atomic_cas_loop(p, AddOp<float>{v}); }
inline double atomic_add(double* p, double v) { return atomic_cas_loop(p, AddOp<double>{v}); }
template <class T> inline T atomic_sub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
inline float atomic_sub(float* p, float v) { return atomic_cas_loop(p, AddOp<float>{-v}); }
inline double atomic_sub(double* p, double v) { return atomic_cas_loop(p, AddOp<double>{-v}); }
template <class T> inline T atomic_min(T* p, T v) { return atomic_cas_loop(p, MinOp<T>{v}); }
template <class T> inline T atomic_max(T* p, T v) { return atomic_cas_loop(p, MaxOp<T>{v}); }
inline float atomic_min(float* p, float v) { return atomic_cas_loop(p, FMin<float>{v}); }
inline double atomic_min(double* p, double v) { return atomic_cas_loop(p, FMin<double>{v}); }
inline float atomic_max(float* p, float v) { return atomic_cas_loop(p, FMax<float>{v}); }
inline double atomic_max(double* p, double v) { return atomic_cas_loop(p, FMax<double>{v}); }
template <class T> inline T atomic_nanmin(T* p, T v) { return atomic_min(p, v); }
template <class T> inline T atomic_nanmax(T* p, T v) { return atomic_max(p, v); }
inline float atomic_nanmin(float* p, float v) { return atomic_cas_loop(p, FNanMin<float>{v}); }
inline double atomic_nanmin(double* p, double v) { return atomic_cas_loop(p, FNanMin<double>{v}); }
inline float atomic_nanmax(float* p, float v) { return atomic_cas_loop(p, FNanMax<float>{v}); }
inline double atomic_nanmax(double* p, double v) { return atomic_cas_loop(p, FNanMax<double>{v}); }
template <class T> inline T atomic_exch(T* p, T v) {
  typedef typename AtomicWord<T>::type W;
  W nw; std::memcpy(&nw, &v, sizeof(T));
  W old = __atomic_exchange_n(reinterpret_cast<W*>(p), nw, __ATOMIC_SEQ_CST);
  T r; std::memcpy(&r, &old, sizeof(T)); return r;
}
template <class T> inline T atomic_cas(T* p, T cmp, T v) {
  typedef typename AtomicWord<T>::type W;
  W c, nw; std::memcpy(&c, &cmp, sizeof(T)); std::memcpy(&nw, &v, sizeof(T));
  __atomic_compare_exchange_n(reinterpret_cast<W*>(p), &c, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  T r; std::memcpy(&r, &c, sizeof(T)); return r;  // c holds the old value either way
}
template <class T> inline T atomic_and(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomic_or(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomic_xor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomic_inc(T* p, T v) { return atomic_cas_loop(p, IncOp<T>{v}); }
template <class T> inline T atomic_dec(T* p, T v) { return atomic_cas_loop(p, DecOp<T>{v}); }
#endif

// ---- print -------------------------------------------------------------------------------------
#ifdef TS_HOST
#define TS_PRINTF(...) std::printf(__VA_ARGS__)
#else
#define TS_PRINTF(...) printf(__VA_ARGS__)
#endif

// ---- debug-mode bounds checks ----------------------------------------------------------------------
// One record per launch: the first failing access wins.
struct DebugRecord {
  int failed;
  int line;
  int array;   // index into the kernel's table of array names
  int dim;
  i64 index;
  i64 extent;
  i64 thread[3];
  i64 block[3];
};

}  // namespace ts

// Must match tessel::jit::TsHostLaunch (include/tessel/jit/host_compiler.hpp) byte for byte.
struct TsHostLaunch {
  ts::u32 grid[3];
  ts::u32 block[3];
  ts::u64 shared_bytes;
  ts::i32 num_threads;
  ts::i32 error_code;
  char error[1024];
};

namespace ts {

// ---- views ---------------------------------------------------------------------------------------
template <class T, int N> TS_HD Arr<T, N> mkarr(T* p, const i64 (&shape)[N], const i64 (&strides)[N]) {
  Arr<T, N> a;
  a.data = p;
  for (int d = 0; d < N; ++d) {
    a.shape[d] = shape[d];
    a.strides[d] = strides[d];
  }
  return a;
}
template <class T> TS_HD Arr<T, 0> mkarr0(T* p) {
  Arr<T, 0> a;
  a.data = p;
  return a;
}
// A Python slice over an axis of n elements: start, step and length after clamping.
struct Slice {
  i64 start, step, len;
};
TS_HD Slice slice(i64 lo, i64 hi, i64 step, i64 n) {
  const i64 kMin = -9223372036854775807ll - 1, kMax = 9223372036854775807ll;
  Slice s;
  s.step = step == 0 ? 1 : step;
  if (s.step > 0) {
    lo = lo == kMin ? 0 : (lo < 0 ? (lo + n < 0 ? 0 : lo + n) : (lo > n ? n : lo));
    hi = hi == kMax ? n : (hi < 0 ? (hi + n < 0 ? 0 : hi + n) : (hi > n ? n : hi));
    s.len = hi > lo ? (hi - lo + s.step - 1) / s.step : 0;
  } else {
    lo = lo == kMin ? n - 1 : (lo < 0 ? (lo + n < 0 ? -1 : lo + n) : (lo >= n ? n - 1 : lo));
    hi = hi == kMax ? -1 : (hi < 0 ? (hi + n < 0 ? -1 : hi + n) : (hi >= n ? n - 1 : hi));
    s.len = lo > hi ? (lo - hi - s.step - 1) / (-s.step) : 0;
  }
  s.start = lo;
  return s;
}

// round(x, nd) in double: x scaled by 10**nd (past 1e22 in two factors, so that the power itself
// stays finite), rounded half to even, scaled back; x itself where the scaled value overflows.
template <class T> TS_HD T round_digits(T value, int nd) {
  const double x = static_cast<double>(value);
  if (!isfinite(x)) return value;
  if (nd < 0) {
    const double scale = pow(10.0, static_cast<double>(-nd));
    return static_cast<T>(rint(x / scale) * scale);
  }
  const double extra = nd > 22 ? 1e22 : 1.0, scale = pow(10.0, static_cast<double>(nd > 22 ? nd - 22 : nd));
  const double scaled = x * scale * extra;
  if (isinf(scaled)) return value;
  return static_cast<T>(rint(scaled) / extra / scale);
}

// ---- reduction operators -------------------------------------------------------------------------
struct OpSum {
  template <class T> TS_HD T operator()(T a, T b) const { return static_cast<T>(a + b); }
  TS_HD bool operator()(bool a, bool b) const { return a || b; }
  template <class T> static TS_HD T identity() { return T(0); }
};
struct OpMin {
  template <class T> TS_HD T operator()(T a, T b) const { return vmin(a, b); }
  template <class T> static TS_HD T identity();
};
struct OpMax {
  template <class T> TS_HD T operator()(T a, T b) const { return vmax(a, b); }
  template <class T> static TS_HD T identity();
};
template <class T> struct Limits;
#define TS_LIMITS(T, LO, HI) template <> struct Limits<T> { static TS_HD T lowest() { return LO; } static TS_HD T highest() { return HI; } };
TS_LIMITS(bool, false, true)
TS_LIMITS(i8, -128, 127)
TS_LIMITS(i16, -32768, 32767)
TS_LIMITS(i32, -2147483647 - 1, 2147483647)
TS_LIMITS(i64, -9223372036854775807ll - 1, 9223372036854775807ll)
TS_LIMITS(u8, 0, 255)
TS_LIMITS(u16, 0, 65535)
TS_LIMITS(u32, 0u, 4294967295u)
TS_LIMITS(u64, 0ull, 18446744073709551615ull)
TS_LIMITS(float, float(-inf()), float(inf()))
TS_LIMITS(double, -inf(), inf())
TS_LIMITS(f16, f16(float(-inf())), f16(float(inf())))
TS_LIMITS(bf16, bf16(float(-inf())), bf16(float(inf())))
#undef TS_LIMITS
template <class T> TS_HD T OpMin::identity() { return Limits<T>::highest(); }
template <class T> TS_HD T OpMax::identity() { return Limits<T>::lowest(); }
template <class Op> struct Identity {
  template <class T> static TS_HD T get() { return T(0); }
};
template <> struct Identity<OpSum> { template <class T> static TS_HD T get() { return OpSum::identity<T>(); } };
template <> struct Identity<OpMin> { template <class T> static TS_HD T get() { return OpMin::identity<T>(); } };
template <> struct Identity<OpMax> { template <class T> static TS_HD T get() { return OpMax::identity<T>(); } };

#ifdef TS_CUDA
// ---- warp and block collectives (CUDA) -----------------------------------------------------------
TS_D int shfl_down_any(unsigned m, int v, int o) { return __shfl_down_sync(m, v, o); }
TS_D unsigned shfl_down_any(unsigned m, unsigned v, int o) { return __shfl_down_sync(m, v, o); }
TS_D long long shfl_down_any(unsigned m, long long v, int o) { return __shfl_down_sync(m, v, o); }
TS_D unsigned long long shfl_down_any(unsigned m, unsigned long long v, int o) { return __shfl_down_sync(m, v, o); }
TS_D float shfl_down_any(unsigned m, float v, int o) { return __shfl_down_sync(m, v, o); }
TS_D double shfl_down_any(unsigned m, double v, int o) { return __shfl_down_sync(m, v, o); }
TS_D int shfl_up_any(unsigned m, int v, int o) { return __shfl_up_sync(m, v, o); }
TS_D unsigned shfl_up_any(unsigned m, unsigned v, int o) { return __shfl_up_sync(m, v, o); }
TS_D long long shfl_up_any(unsigned m, long long v, int o) { return __shfl_up_sync(m, v, o); }
TS_D unsigned long long shfl_up_any(unsigned m, unsigned long long v, int o) { return __shfl_up_sync(m, v, o); }
TS_D float shfl_up_any(unsigned m, float v, int o) { return __shfl_up_sync(m, v, o); }
TS_D double shfl_up_any(unsigned m, double v, int o) { return __shfl_up_sync(m, v, o); }
TS_D int shfl_idx_any(unsigned m, int v, int o) { return __shfl_sync(m, v, o); }
TS_D unsigned shfl_idx_any(unsigned m, unsigned v, int o) { return __shfl_sync(m, v, o); }
TS_D long long shfl_idx_any(unsigned m, long long v, int o) { return __shfl_sync(m, v, o); }
TS_D unsigned long long shfl_idx_any(unsigned m, unsigned long long v, int o) { return __shfl_sync(m, v, o); }
TS_D float shfl_idx_any(unsigned m, float v, int o) { return __shfl_sync(m, v, o); }
TS_D double shfl_idx_any(unsigned m, double v, int o) { return __shfl_sync(m, v, o); }
// Types without a shuffle of their own travel as the int or the pair they are made of.
template <class T> struct ShflAs { typedef T type; };
template <> struct ShflAs<bool> { typedef int type; };
template <> struct ShflAs<i8> { typedef int type; };
template <> struct ShflAs<i16> { typedef int type; };
template <> struct ShflAs<u8> { typedef unsigned type; };
template <> struct ShflAs<u16> { typedef unsigned type; };
template <class T> TS_D T shfl_down_t(unsigned m, T v, int o) { return static_cast<T>(shfl_down_any(m, static_cast<typename ShflAs<T>::type>(v), o)); }
template <class T> TS_D T shfl_up_t(unsigned m, T v, int o) { return static_cast<T>(shfl_up_any(m, static_cast<typename ShflAs<T>::type>(v), o)); }
template <class T> TS_D T shfl_idx_t(unsigned m, T v, int o) { return static_cast<T>(shfl_idx_any(m, static_cast<typename ShflAs<T>::type>(v), o)); }
TS_D f16 shfl_down_t(unsigned m, f16 v, int o) { f16 r; r.bits = (u16)__shfl_down_sync(m, (unsigned)v.bits, o); return r; }
TS_D f16 shfl_up_t(unsigned m, f16 v, int o) { f16 r; r.bits = (u16)__shfl_up_sync(m, (unsigned)v.bits, o); return r; }
TS_D f16 shfl_idx_t(unsigned m, f16 v, int o) { f16 r; r.bits = (u16)__shfl_sync(m, (unsigned)v.bits, o); return r; }
TS_D bf16 shfl_down_t(unsigned m, bf16 v, int o) { bf16 r; r.bits = (u16)__shfl_down_sync(m, (unsigned)v.bits, o); return r; }
TS_D bf16 shfl_up_t(unsigned m, bf16 v, int o) { bf16 r; r.bits = (u16)__shfl_up_sync(m, (unsigned)v.bits, o); return r; }
TS_D bf16 shfl_idx_t(unsigned m, bf16 v, int o) { bf16 r; r.bits = (u16)__shfl_sync(m, (unsigned)v.bits, o); return r; }
template <class U> TS_D complex<U> shfl_down_t(unsigned m, complex<U> v, int o) { return complex<U>(shfl_down_any(m, v.re, o), shfl_down_any(m, v.im, o)); }
template <class U> TS_D complex<U> shfl_up_t(unsigned m, complex<U> v, int o) { return complex<U>(shfl_up_any(m, v.re, o), shfl_up_any(m, v.im, o)); }
template <class U> TS_D complex<U> shfl_idx_t(unsigned m, complex<U> v, int o) { return complex<U>(shfl_idx_any(m, v.re, o), shfl_idx_any(m, v.im, o)); }

TS_D int linear_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
TS_D int block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
// Lanes of this thread's warp that exist in the block (the last warp may be partial).
TS_D int warp_lanes() {
  const int rest = block_threads() - (linear_tid() & ~31);
  return rest < 32 ? rest : 32;
}
TS_D unsigned lanes_mask(int n) { return n >= 32 ? 0xffffffffu : ((1u << n) - 1u); }

// Every lane gets the reduction over the warp's lanes.
template <class T, class Op> TS_D T warp_reduce(T v) {
  Op op;
  const int n = warp_lanes(), lane = linear_tid() & 31;
  const unsigned m = lanes_mask(n);
  for (int o = 1; o < 32; o <<= 1) {
    T other = shfl_down_t(m, v, o);
    if (lane + o < n) v = op(v, other);
  }
  return shfl_idx_t(m, v, 0);
}
template <class T, class Op> TS_D T warp_inclusive_scan(T v) {
  Op op;
  const int n = warp_lanes(), lane = linear_tid() & 31;
  const unsigned m = lanes_mask(n);
  for (int o = 1; o < 32; o <<= 1) {
    T other = shfl_up_t(m, v, o);
    if (lane >= o) v = op(other, v);
  }
  return v;
}
template <class T, class Op> TS_D T warp_exclusive_scan(T v) {
  const int n = warp_lanes(), lane = linear_tid() & 31;
  T inc = warp_inclusive_scan<T, Op>(v);
  T prev = shfl_up_t(lanes_mask(n), inc, 1);
  return lane == 0 ? Identity<Op>::template get<T>() : prev;
}
template <class T, class Op> TS_D T block_reduce(T v) {
  __shared__ T partial[32];
  __shared__ T result;
  Op op;
  const int tid = linear_tid(), lane = tid & 31, warp = tid >> 5, nwarps = (block_threads() + 31) >> 5;
  T w = warp_reduce<T, Op>(v);
  __syncthreads();  // an earlier call's readers are done with partial/result
  if (lane == 0) partial[warp] = w;
  __syncthreads();
  if (warp == 0) {
    T x = lane < nwarps ? partial[lane] : partial[0];
    const unsigned m = lanes_mask(warp_lanes());
    for (int o = 1; o < 32; o <<= 1) {
      T other = shfl_down_t(m, x, o);
      if (lane + o < nwarps) x = op(x, other);
    }
    if (lane == 0) result = x;
  }
  __syncthreads();
  return result;
}
template <class T, class Op> TS_D T block_scan(T v, bool inclusive) {
  __shared__ T partial[32];
  Op op;
  const int tid = linear_tid(), lane = tid & 31, warp = tid >> 5, nwarps = (block_threads() + 31) >> 5;
  T inc = warp_inclusive_scan<T, Op>(v);
  __syncthreads();
  if (lane == warp_lanes() - 1) partial[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    T x = lane < nwarps ? partial[lane] : partial[0];
    const unsigned m = lanes_mask(warp_lanes());
    for (int o = 1; o < 32; o <<= 1) {
      T other = shfl_up_t(m, x, o);
      if (lane >= o) x = op(other, x);
    }
    if (lane < nwarps) partial[lane] = x;  // inclusive prefix over warps
  }
  __syncthreads();
  T prev_lane = shfl_up_t(lanes_mask(warp_lanes()), inc, 1);
  T r;
  if (inclusive) {
    r = warp > 0 ? op(partial[warp - 1], inc) : inc;
  } else if (lane == 0) {
    r = warp > 0 ? partial[warp - 1] : Identity<Op>::template get<T>();
  } else {
    r = warp > 0 ? op(partial[warp - 1], prev_lane) : prev_lane;
  }
  return r;
}
template <class T, class Op> TS_D T block_inclusive_scan(T v) { return block_scan<T, Op>(v, true); }
template <class T, class Op> TS_D T block_exclusive_scan(T v) { return block_scan<T, Op>(v, false); }

// cg.this_grid().sync(): bar[0] counts the blocks that arrived, bar[1] the barriers passed. Every
// block of the grid must be resident at once (the launcher checks the occupancy).
TS_D void grid_sync(unsigned int* bar) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    volatile unsigned int* generation = bar + 1;
    const unsigned int seen = *generation;
    __threadfence();
    if (atomicAdd(bar, 1u) == blocks - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*generation == seen) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

extern "C" __shared__ __align__(16) unsigned char ts_dynamic_shared_memory[];
TS_D unsigned char* ts_dyn_shared_ptr() { return ts_dynamic_shared_memory; }
TS_D unsigned dyn_shared_bytes() {
  unsigned r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}
#endif

}  // namespace ts
