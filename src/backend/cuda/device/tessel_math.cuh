#pragma once
// Elementwise math whose special values the C library does not give as the Array API standard
// specifies: the elementary functions of complex arguments and logaddexp. Shared by the CPU
// backend (std::complex) and the generated CUDA kernels (tessel::complex, through tessel::cx in
// tessel_device.cuh): one definition of every special value, so the CPU tests check the code the
// GPU runs.
//
// Special values follow C99 Annex G, which the Array API standard's special-case tables restate
// (NaN and infinite parts, signed zeros, the branch cuts of C99); finite arguments use the usual
// formulas. `Z` is any complex type with real(), imag(), value_type and a (re, im) constructor.
// The real math is the C library's (std:: on the host, CUDA's math library on the device), whose
// real special values are those of C99 Annex F.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define TESSEL_CMATH __host__ __device__ __forceinline__
#else
#include <cmath>
#define TESSEL_CMATH inline
#endif

namespace tessel::cmath {

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
using ::acos;
using ::acosh;
using ::asin;
using ::asinh;
using ::atan2;
using ::atanh;
using ::copysign;
using ::cos;
using ::cosh;
using ::exp;
using ::expm1;
using ::fabs;
using ::hypot;
using ::log;
using ::log1p;
using ::sin;
using ::sinh;
using ::sqrt;
using ::tan;
using ::tanh;
using ::trunc;
#else
using std::acos;
using std::acosh;
using std::asin;
using std::asinh;
using std::atan2;
using std::atanh;
using std::copysign;
using std::cos;
using std::cosh;
using std::exp;
using std::expm1;
using std::fabs;
using std::hypot;
using std::log;
using std::log1p;
using std::sin;
using std::sinh;
using std::sqrt;
using std::tan;
using std::tanh;
using std::trunc;
#endif

template <class T> TESSEL_CMATH bool nan_(T v) { return v != v; }
template <class T> TESSEL_CMATH bool inf_(T v) { return v == v && v - v != v - v; }
template <class T> TESSEL_CMATH bool finite_(T v) { return v - v == v - v; }
template <class T> TESSEL_CMATH T quiet_nan() { return T(0) * (T(1) / T(0)); }  // 0 * inf, no library call
template <class T> TESSEL_CMATH T infinity() { return T(1) / T(0); }
template <class T> TESSEL_CMATH T pi() { return T(3.14159265358979323846); }
template <class T> TESSEL_CMATH T half_pi() { return T(1.57079632679489661923); }
template <class T> TESSEL_CMATH T quarter_pi() { return T(0.78539816339744830962); }
// 1 / sqrt(epsilon): above it, z^2 + 1 rounds to z^2 (and below the square's overflow).
template <class T> TESSEL_CMATH T big_argument() { return sizeof(T) == 4 ? T(4096) : T(6.7e7); }

// log(exp(x) + exp(y)) without overflow; equal arguments (infinities included) give x + log 2, an
// infinite argument +inf (unless the other is NaN).
template <class T> TESSEL_CMATH T logaddexp(T x, T y) {
  if (nan_(x) || nan_(y)) return x + y;
  if (x == y) return x + T(0.69314718055994530942);
  const T m = x > y ? x : y, d = x > y ? y - x : x - y;  // d < 0
  return m + log1p(exp(d));
}

// exp(x + iy). y = +-0 stays exact (the real exponential); an infinite real part times cis(y).
template <class Z> TESSEL_CMATH Z c_exp(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  if (y == T(0)) return Z(exp(x), y);  // also (NaN, +-0) -> (NaN, +-0)
  if (inf_(x)) {
    if (finite_(y)) {
      const T m = x > T(0) ? x : T(0);  // +inf * cis(y) or +0 * cis(y)
      return Z(m * cos(y), m * sin(y));
    }
    if (x > T(0)) return Z(x, y - y);  // (+inf, NaN)
    return Z(T(0), T(0));              // +0 + 0j (signs unspecified)
  }
  if (nan_(x) || !finite_(y)) return Z(quiet_nan<T>(), quiet_nan<T>());
  const T e = exp(x);
  return Z(e * cos(y), e * sin(y));
}

// exp(z) - 1, accurate near 0: the real part as expm1(x) cos(y) - 2 sin^2(y / 2).
template <class Z> TESSEL_CMATH Z c_expm1(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  // On the real axis expm1(x) + 0j, but +0 + 0j at either zero (the standard's 0 + 0j).
  if (y == T(0)) return Z(x == T(0) ? T(0) : expm1(x), y);
  if (inf_(x)) {
    if (x > T(0)) return finite_(y) ? Z(x * cos(y), x * sin(y)) : Z(x, y - y);
    return finite_(y) ? Z(T(0) * cos(y) - T(1), T(0) * sin(y)) : Z(T(-1), T(0));
  }
  if (nan_(x) || !finite_(y)) return Z(quiet_nan<T>(), quiet_nan<T>());
  const T h = sin(y * T(0.5));
  return Z(expm1(x) * cos(y) - T(2) * h * h, exp(x) * sin(y));
}

// log|z| + i arg(z); a NaN part gives NaN except where the modulus is infinite.
template <class Z> TESSEL_CMATH Z c_log(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  if (nan_(x) || nan_(y)) {
    if (inf_(x) || inf_(y)) return Z(infinity<T>(), quiet_nan<T>());
    return Z(quiet_nan<T>(), quiet_nan<T>());
  }
  return Z(log(hypot(x, y)), atan2(y, x));
}

// log(1 + z): log1p on the real axis, 0.5 log1p(2x + x^2 + y^2) for small |z|.
template <class Z> TESSEL_CMATH Z c_log1p(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  if (!finite_(x) || !finite_(y)) return c_log(Z(x + T(1), y));
  if (y == T(0) && x >= T(-1)) return Z(log1p(x), y);
  if (fabs(x) < T(0.5) && fabs(y) < T(0.5)) {
    return Z(T(0.5) * log1p(x * (T(2) + x) + y * y), atan2(y, x + T(1)));
  }
  return Z(log(hypot(x + T(1), y)), atan2(y, x + T(1)));
}

// Principal square root: the right half-plane; the sign of a zero imaginary part picks the side of
// the cut on the negative real axis.
template <class Z> TESSEL_CMATH Z c_sqrt(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  if (inf_(y)) return Z(infinity<T>(), y);
  if (nan_(x)) return Z(x, x);
  if (inf_(x)) {
    if (x > T(0)) return Z(x, nan_(y) ? y : copysign(T(0), y));
    return Z(nan_(y) ? y : T(0), copysign(infinity<T>(), y));
  }
  if (nan_(y)) return Z(y, y);
  if (x == T(0) && y == T(0)) return Z(T(0), y);
  // |z| / 4 keeps (|x| + |z|) / 2 from overflowing for huge parts.
  const bool huge = fabs(x) > T(1e30) || fabs(y) > T(1e30);
  const T s = huge ? T(2) : T(1);
  const T ax = fabs(x) / (s * s), m = hypot(x, y) / (s * s);
  const T t = sqrt((ax + m) * T(0.5)) * s;
  if (x >= T(0)) return Z(t, y / (T(2) * t));
  return Z(fabs(y) / (T(2) * t), copysign(t, y));
}

template <class Z> TESSEL_CMATH Z c_sinh(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  if (finite_(x) && finite_(y)) {
    if (y == T(0)) return Z(sinh(x), y);
    return Z(sinh(x) * cos(y), cosh(x) * sin(y));
  }
  if (x == T(0)) return Z(x, y - y);  // (+-0, inf or NaN) -> (+-0, NaN)
  if (inf_(x)) {
    if (y == T(0)) return Z(x, y);
    if (finite_(y)) return Z(x * cos(y), fabs(x) * sin(y));
    return Z(x, y - y);
  }
  if (nan_(x) && y == T(0)) return Z(x, y);
  return Z(quiet_nan<T>(), quiet_nan<T>());
}

template <class Z> TESSEL_CMATH Z c_cosh(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  if (finite_(x) && finite_(y)) {
    if (y == T(0)) return Z(cosh(x), y * copysign(T(1), x));
    return Z(cosh(x) * cos(y), sinh(x) * sin(y));
  }
  if (x == T(0)) return Z(y - y, T(0));  // (+-0, inf or NaN) -> (NaN, 0)
  if (inf_(x)) {
    if (y == T(0)) return Z(infinity<T>(), y * copysign(T(1), x));
    if (finite_(y)) return Z(infinity<T>() * cos(y), x * sin(y));
    return Z(infinity<T>(), y - y);
  }
  if (nan_(x) && y == T(0)) return Z(x, y);
  return Z(quiet_nan<T>(), quiet_nan<T>());
}

template <class Z> TESSEL_CMATH Z c_tanh(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  if (inf_(x)) return Z(copysign(T(1), x), finite_(y) ? copysign(T(0), y) : T(0));
  if (nan_(x)) return y == T(0) ? Z(x, y) : Z(quiet_nan<T>(), quiet_nan<T>());
  if (!finite_(y)) return x == T(0) ? Z(x, y - y) : Z(quiet_nan<T>(), quiet_nan<T>());
  if (y == T(0)) return Z(tanh(x), y);
  if (fabs(x) > T(20)) {  // tanh(x) rounds to +-1; the imaginary part decays as exp(-2|x|)
    return Z(copysign(T(1), x), T(4) * sin(y) * cos(y) * exp(T(-2) * fabs(x)));
  }
  // Kahan's form, over t = tan(y): (sinh 2x + i sin 2y) / (cosh 2x + cos 2y) cancels near the poles
  // of tan, where cos 2y is close to -1.
  const T t = tan(y), beta = T(1) + t * t, s = sinh(x), rho = sqrt(T(1) + s * s);
  const T d = T(1) + beta * s * s;
  return Z(beta * rho * s / d, t / d);
}

// a / b by Smith's algorithm (no overflow of |b|^2), for finite operands.
template <class Z> TESSEL_CMATH Z c_div(Z a, Z b) {
  using T = typename Z::value_type;
  const T c = b.real(), d = b.imag();
  if (fabs(c) >= fabs(d)) {
    const T r = d / c, den = c + d * r;
    return Z((a.real() + a.imag() * r) / den, (a.imag() - a.real() * r) / den);
  }
  const T r = c / d, den = d + c * r;
  return Z((a.real() * r + a.imag()) / den, (a.imag() * r - a.real()) / den);
}

// asinh is odd and conj-symmetric: computed for the first quadrant, the signs put back.
template <class Z> TESSEL_CMATH Z c_asinh(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  const T ax = fabs(x), ay = fabs(y);
  if (nan_(x) || nan_(y)) {
    if (nan_(x) && y == T(0)) return Z(x, y);
    if (inf_(y)) return Z(infinity<T>(), quiet_nan<T>());
    if (inf_(x)) return Z(x, quiet_nan<T>());
    return Z(quiet_nan<T>(), quiet_nan<T>());
  }
  T re, im;
  if (inf_(ax) || inf_(ay)) {
    re = infinity<T>();
    im = inf_(ax) ? (inf_(ay) ? quarter_pi<T>() : T(0)) : half_pi<T>();
  } else if (ay == T(0)) {
    re = asinh(ax);
    im = T(0);
  } else if (ax == T(0) && ay <= T(1)) {
    re = T(0);
    im = asin(ay);
  } else if (ax == T(0)) {  // on the cut: from the right half-plane
    re = acosh(ay);
    im = half_pi<T>();
  } else if (ax > big_argument<T>() || ay > big_argument<T>()) {  // log(2z)
    const Z l = c_log(Z(ax, ay));
    re = l.real() + T(0.69314718055994530942);
    im = l.imag();
  } else {
    // log(z + sqrt(z^2 + 1)) as log1p(z + z^2 / (sqrt(z^2 + 1) + 1)): no cancellation near 0.
    const Z zz((ax - ay) * (ax + ay), T(2) * ax * ay);
    const Z w = c_sqrt(Z(zz.real() + T(1), zz.imag()));
    const Z q = c_div(zz, Z(w.real() + T(1), w.imag()));
    const Z l = c_log1p(Z(ax + q.real(), ay + q.imag()));
    re = l.real();
    im = l.imag();
  }
  return Z(copysign(re, x), copysign(im, y));
}

// atanh is odd and conj-symmetric, like asinh.
template <class Z> TESSEL_CMATH Z c_atanh(Z z) {
  using T = typename Z::value_type;
  const T x = z.real(), y = z.imag();
  const T ax = fabs(x), ay = fabs(y);
  if (nan_(x) || nan_(y)) {
    if (inf_(y)) return Z(copysign(T(0), x), copysign(half_pi<T>(), y));
    if (inf_(x)) return Z(copysign(T(0), x), quiet_nan<T>());
    if (x == T(0)) return Z(x, quiet_nan<T>());
    return Z(quiet_nan<T>(), quiet_nan<T>());
  }
  if (inf_(ax) || inf_(ay)) return Z(copysign(T(0), x), copysign(half_pi<T>(), y));
  if (y == T(0) && ax <= T(1)) return Z(atanh(x), y);  // +-1 -> +-inf
  // (log(1 + z) - log(1 - z)) / 2 with 1 - z formed as (1 - x, -y): a zero imaginary part keeps
  // its side of the cut beyond +-1.
  const Z a = c_log1p(Z(x, y)), b = c_log1p(Z(-x, -y));
  return Z((a.real() - b.real()) * T(0.5), (a.imag() - b.imag()) * T(0.5));
}

// i z and -i z, exact.
template <class Z> TESSEL_CMATH Z times_i(Z z) { return Z(-z.imag(), z.real()); }
template <class Z> TESSEL_CMATH Z times_minus_i(Z z) { return Z(z.imag(), -z.real()); }

// The circular functions through the hyperbolic ones, as the standard defines their special cases.
template <class Z> TESSEL_CMATH Z c_sin(Z z) { return times_minus_i(c_sinh(times_i(z))); }
template <class Z> TESSEL_CMATH Z c_cos(Z z) { return c_cosh(times_i(z)); }
template <class Z> TESSEL_CMATH Z c_tan(Z z) { return times_minus_i(c_tanh(times_i(z))); }
template <class Z> TESSEL_CMATH Z c_asin(Z z) { return times_minus_i(c_asinh(times_i(z))); }
template <class Z> TESSEL_CMATH Z c_atan(Z z) { return times_minus_i(c_atanh(times_i(z))); }
// acos(z) = pi/2 - asin(z).
template <class Z> TESSEL_CMATH Z c_acos(Z z) {
  using T = typename Z::value_type;
  if (z.imag() == T(0) && fabs(z.real()) <= T(1)) return Z(acos(z.real()), -z.imag());  // no cancellation near 1
  const Z s = c_asin(z);
  return Z(half_pi<T>() - s.real(), -s.imag());
}
// acosh(z) = +-i acos(z): the sign that puts the real part in [0, inf), the imaginary part's sign
// that of z's (C99).
template <class Z> TESSEL_CMATH Z c_acosh(Z z) {
  using T = typename Z::value_type;
  if (z.imag() == T(0) && z.real() >= T(1)) return Z(acosh(z.real()), z.imag());
  const Z w = c_acos(z);
  return Z(fabs(w.imag()), copysign(w.real(), z.imag()));
}

template <class Z> TESSEL_CMATH Z c_scale(Z z, typename Z::value_type s) { return Z(z.real() * s, z.imag() * s); }
template <class Z> TESSEL_CMATH Z c_exp2(Z z) {
  using T = typename Z::value_type;
  return c_exp(c_scale(z, T(0.69314718055994530942)));
}
// The standard's change of base: log(z) / log(base), special values those of log.
template <class Z> TESSEL_CMATH Z c_log2(Z z) {
  using T = typename Z::value_type;
  return c_scale(c_log(z), T(1.44269504088896340736));
}
template <class Z> TESSEL_CMATH Z c_log10(Z z) {
  using T = typename Z::value_type;
  return c_scale(c_log(z), T(0.43429448190325182765));
}

template <class Z> TESSEL_CMATH Z c_mul(Z a, Z b) {
  return Z(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
}

// NumPy's power: z**0 = 1, 0**w = 0 for Re(w) > 0 (exp(w log 0) = exp(-inf + i y): the
// standard's zero) and NaN otherwise, small integer exponents by repeated squaring, otherwise
// exp(w log z) as the standard defines it.
template <class Z> TESSEL_CMATH Z c_pow(Z z, Z w) {
  using T = typename Z::value_type;
  if (w.real() == T(0) && w.imag() == T(0)) return Z(T(1), T(0));
  if (z.real() == T(0) && z.imag() == T(0)) {
    if (w.real() > T(0)) return Z(T(0), T(0));
    return Z(quiet_nan<T>(), quiet_nan<T>());
  }
  if (w.imag() == T(0) && w.real() == trunc(w.real()) && fabs(w.real()) < T(100)) {
    long long n = static_cast<long long>(fabs(w.real()));
    Z result(T(1), T(0)), base = z;
    while (n) {
      if (n & 1) result = c_mul(result, base);
      base = c_mul(base, base);
      n >>= 1;
    }
    return w.real() >= T(0) ? result : c_div(Z(T(1), T(0)), result);
  }
  return c_exp(c_mul(c_log(z), w));
}

}  // namespace tessel::cmath
