// Elementwise ops: one test body over backend x dtype against a host reference computed in
// complex<double> with plain C++, on fresh random inputs (seed printed on failure), through
// broadcast, negative-stride and poisoned-out= paths; promotion results; overlap; errors.
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/elementwise.hpp"
#include "ops/elementwise_operands.hpp"
#include "sanitizer.hpp"
#include "testing.hpp"
#ifdef TESSEL_HAVE_CUDA
#include "tessel/jit/compiler.hpp"
#endif

namespace tessel {
namespace {

using cd = std::complex<double>;
using Op = ElementwiseOp;

// ---- the reference ------------------------------------------------------------------------
// Integer wrap-around is not exercised (inputs are small), so double arithmetic is exact for them.
double py_floor_div(double a, double b) {
  if (std::isinf(a) || std::isinf(b)) return std::floor(a / b);  // the Array API's preferred values
  if (b == 0) return a / b;
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(0.0, a / b);
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1;
  return fl;
}
double py_mod(double a, double b) {
  if (b == 0) return std::fmod(a, b);
  double m = std::fmod(a, b);
  if (m != 0) {
    if ((b < 0) != (m < 0)) m += b;
  } else {
    m = std::copysign(0.0, b);
  }
  return m;
}
double nan_max(double a, double b) { return std::isnan(a) ? a : std::isnan(b) ? b : (a < b ? b : a); }
double nan_min(double a, double b) { return std::isnan(a) ? a : std::isnan(b) ? b : (b < a ? b : a); }
// nextafter in the compute dtype, by stepping the bit pattern (16-bit formats) or through the C
// library (float32, float64).
double nextafter_in(DType ct, double a, double b) {
  if (ct == DType::float32) return std::nextafter(static_cast<float>(a), static_cast<float>(b));
  if (ct != DType::float16 && ct != DType::bfloat16) return std::nextafter(a, b);
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return b;
  const bool half = ct == DType::float16;
  std::uint16_t bits = half ? tessel::float16(static_cast<float>(a)).bits : tessel::bfloat16(static_cast<float>(a)).bits;
  if (a == 0) bits = static_cast<std::uint16_t>((b > 0 ? 0 : 0x8000) | 1);
  else if ((a < b) == (a > 0)) ++bits;
  else --bits;
  return half ? static_cast<float>(tessel::float16::from_bits(bits)) : static_cast<float>(tessel::bfloat16::from_bits(bits));
}

cd reference(Op op, cd x, cd y, DType ct) {
  const double a = x.real(), b = y.real();
  const bool integer = is_integer(ct) || is_bool(ct);
  auto nz = [](cd v) { return v != cd(0); };
  if (!is_complex(ct)) {
    // Real arithmetic: complex<double> would turn 1/0 into (inf, nan).
    switch (op) {
      case Op::divide: return a / b;
      case Op::multiply: if (!is_bool(ct)) return a * b; break;
      case Op::square: return a * a;
      case Op::reciprocal: return 1.0 / a;
      default: break;
    }
  }
  if (is_complex(ct)) {
    // std::complex<double> follows C99's branch cuts, as NumPy; exp2/log2/log1p/expm1 by definition.
    const double ln2 = std::log(2.0);
    auto lex_less = [](cd u, cd v) { return u.real() < v.real() || (u.real() == v.real() && u.imag() < v.imag()); };
    auto lex_less_equal = [](cd u, cd v) { return u.real() < v.real() || (u.real() == v.real() && u.imag() <= v.imag()); };
    auto isnan_c = [](cd u) { return std::isnan(u.real()) || std::isnan(u.imag()); };
    switch (op) {
      case Op::power: return y == cd(0) ? cd(1) : std::pow(x, y);
      case Op::less: return cd(lex_less(x, y));
      case Op::less_equal: return cd(lex_less_equal(x, y));
      case Op::greater: return cd(lex_less(y, x));
      case Op::greater_equal: return cd(lex_less_equal(y, x));
      case Op::minimum: return isnan_c(x) ? x : isnan_c(y) ? y : (lex_less(y, x) ? y : x);
      case Op::maximum: return isnan_c(x) ? x : isnan_c(y) ? y : (lex_less(x, y) ? y : x);
      case Op::fmin: return isnan_c(y) ? x : isnan_c(x) ? y : (lex_less(y, x) ? y : x);
      case Op::fmax: return isnan_c(y) ? x : isnan_c(x) ? y : (lex_less(x, y) ? y : x);
      case Op::sign: return x == cd(0) ? cd(0) : x / std::abs(x);
      case Op::exp: return std::exp(x);
      case Op::exp2: return std::exp(x * ln2);
      case Op::expm1: return std::exp(x) - 1.0;
      case Op::log: return std::log(x);
      case Op::log2: return std::log(x) / ln2;
      case Op::log10: return std::log10(x);
      case Op::log1p: return std::log(1.0 + x);
      case Op::round: return cd(std::nearbyint(x.real()), std::nearbyint(x.imag()));
      case Op::sqrt: return std::sqrt(x);
      case Op::sin: return std::sin(x);
      case Op::cos: return std::cos(x);
      case Op::tan: return std::tan(x);
      case Op::arcsin: return std::asin(x);
      case Op::arccos: return std::acos(x);
      case Op::arctan: return std::atan(x);
      case Op::sinh: return std::sinh(x);
      case Op::cosh: return std::cosh(x);
      case Op::tanh: return std::tanh(x);
      case Op::arcsinh: return std::asinh(x);
      case Op::arccosh: return std::acosh(x);
      case Op::arctanh: return std::atanh(x);
      default: break;
    }
  }
  switch (op) {
    case Op::add: return is_bool(ct) ? cd(nz(x) || nz(y)) : x + y;
    case Op::subtract: return x - y;
    // NumPy's plain complex product, not std::complex's Annex G recovery of infinities.
    case Op::multiply:
      return is_bool(ct) ? cd(nz(x) && nz(y))
                         : cd(x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real());
    case Op::divide: return x / y;
    case Op::floor_divide: return integer ? (b == 0 ? 0.0 : std::floor(a / b)) : py_floor_div(a, b);
    case Op::remainder: return integer ? (b == 0 ? 0.0 : a - b * std::floor(a / b)) : py_mod(a, b);
    case Op::power: return std::pow(a, b);
    case Op::equal: return cd(x == y);
    case Op::not_equal: return cd(x != y);
    case Op::less: return cd(a < b);
    case Op::less_equal: return cd(a <= b);
    case Op::greater: return cd(a > b);
    case Op::greater_equal: return cd(a >= b);
    case Op::logical_and: return cd(nz(x) && nz(y));
    case Op::logical_or: return cd(nz(x) || nz(y));
    case Op::logical_xor: return cd(nz(x) != nz(y));
    case Op::bitwise_and: return double(static_cast<long long>(a) & static_cast<long long>(b));
    case Op::bitwise_or: return double(static_cast<long long>(a) | static_cast<long long>(b));
    case Op::bitwise_xor: return double(static_cast<long long>(a) ^ static_cast<long long>(b));
    case Op::left_shift: return a * std::pow(2.0, b);
    case Op::right_shift: return std::floor(a / std::pow(2.0, b));
    case Op::minimum: return nan_min(a, b);
    case Op::maximum: return nan_max(a, b);
    case Op::fmin: return std::fmin(a, b);
    case Op::nextafter: return nextafter_in(ct, a, b);
    case Op::fmax: return std::fmax(a, b);
    case Op::arctan2: return std::atan2(a, b);
    case Op::hypot: return std::hypot(a, b);
    case Op::copysign: return std::copysign(a, b);
    case Op::logaddexp:  // equal infinities: inf - inf would be NaN
      return std::isnan(a) || std::isnan(b) ? NAN
             : a == b                       ? a + std::log(2.0)
                                            : std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b)));
    case Op::negative: return -x;
    case Op::positive: return x;
    case Op::abs: return std::abs(x);
    case Op::logical_not: return cd(!nz(x));
    case Op::bitwise_not: return is_bool(ct) ? cd(!nz(x)) : cd(double(~static_cast<long long>(a)));
    case Op::square: return cd(x.real() * x.real() - x.imag() * x.imag(), 2 * x.real() * x.imag());
    case Op::reciprocal: return 1.0 / x;
    case Op::sign: return std::isnan(a) ? a : double((0 < a) - (a < 0));
    case Op::exp: return std::exp(a);
    case Op::exp2: return std::exp2(a);
    case Op::expm1: return std::expm1(a);
    case Op::log: return std::log(a);
    case Op::log2: return std::log2(a);
    case Op::log10: return std::log10(a);
    case Op::log1p: return std::log1p(a);
    case Op::sqrt: return std::sqrt(a);
    case Op::rsqrt: return 1.0 / std::sqrt(a);
    case Op::cbrt: return std::cbrt(a);
    case Op::sin: return std::sin(a);
    case Op::cos: return std::cos(a);
    case Op::tan: return std::tan(a);
    case Op::arcsin: return std::asin(a);
    case Op::arccos: return std::acos(a);
    case Op::arctan: return std::atan(a);
    case Op::sinh: return std::sinh(a);
    case Op::cosh: return std::cosh(a);
    case Op::tanh: return std::tanh(a);
    case Op::arcsinh: return std::asinh(a);
    case Op::arccosh: return std::acosh(a);
    case Op::arctanh: return std::atanh(a);
    case Op::sigmoid: return 1.0 / (1.0 + std::exp(-a));
    case Op::relu: return std::isnan(a) ? a : std::max(a, 0.0);
    case Op::gelu: return 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0)));
    case Op::erf: return std::erf(a);
    case Op::softplus: return std::isnan(a) ? a : std::max(a, 0.0) + std::log1p(std::exp(-std::fabs(a)));
    case Op::floor: return std::floor(a);
    case Op::ceil: return std::ceil(a);
    case Op::trunc: return std::trunc(a);
    case Op::round: return std::nearbyint(a);
    case Op::isnan: return cd(std::isnan(a) || std::isnan(x.imag()));
    case Op::isinf: return cd(std::isinf(a) || std::isinf(x.imag()));
    case Op::isfinite: return cd(std::isfinite(a) && std::isfinite(x.imag()));
    case Op::real: return a;
    case Op::imag: return x.imag();
    case Op::conj: return std::conj(x);
    case Op::angle: return std::arg(x);
    case Op::signbit: return cd(std::signbit(a));
    default: break;
  }
  return cd(NAN);
}

// Support per kind, written independently of the ops layer's table; std::nullopt for an op this
// file has no reference for (tests/python/test_array.py's UNARY tests every unary op).
std::optional<bool> expected_supported(Op op, DType d) {
  const bool b = is_bool(d), i = is_integer(d), f = is_floating(d), c = is_complex(d);
  switch (op) {
    case Op::add: case Op::multiply: case Op::equal: case Op::not_equal: case Op::logical_and:
    case Op::logical_or: case Op::logical_xor: case Op::abs: case Op::logical_not: case Op::isnan:
    case Op::isinf: case Op::isfinite: case Op::real: case Op::imag: case Op::conj:
      return true;
    case Op::subtract: case Op::negative: case Op::positive: return !b;
    case Op::divide: case Op::reciprocal: return f || c || ((i || b) && op == Op::divide);
    case Op::square: case Op::angle: return true;
    case Op::bitwise_and: case Op::bitwise_or: case Op::bitwise_xor: case Op::bitwise_not: return b || i;
    case Op::left_shift: case Op::right_shift: return i || b;  // bool: computed in int8, as NumPy
    // NumPy: complex ordering is lexicographic, sign(z) = z/|z|.
    case Op::power: case Op::less: case Op::less_equal: case Op::greater: case Op::greater_equal:
    case Op::minimum: case Op::maximum: case Op::fmin: case Op::fmax:
      return true;
    case Op::sign: return !b;
    case Op::round: return !b;  // complex: each part
    case Op::floor_divide: case Op::remainder:
    case Op::floor: case Op::ceil: case Op::trunc: case Op::relu:
      return !c && !(b && (op == Op::relu || op == Op::floor || op == Op::ceil || op == Op::trunc));
    case Op::hypot: case Op::copysign: case Op::logaddexp: case Op::signbit:
    case Op::rsqrt: case Op::cbrt: case Op::arctan2: case Op::nextafter: case Op::sigmoid: case Op::gelu: case Op::erf: case Op::softplus:
      return !c;
    // transcendental functions: real and complex
    case Op::exp: case Op::exp2: case Op::expm1: case Op::log: case Op::log2: case Op::log10: case Op::log1p:
    case Op::sqrt: case Op::sin: case Op::cos: case Op::tan: case Op::arcsin: case Op::arccos: case Op::arctan:
    case Op::sinh: case Op::cosh: case Op::tanh: case Op::arcsinh: case Op::arccosh: case Op::arctanh:
      return true;
    default:
      return std::nullopt;
  }
}

// Complex ops computed by formulas (not exact operations): exp, log, trig, power, sign...
bool complex_math_op(Op op) {
  switch (op) {
    case Op::power: case Op::sign: case Op::exp: case Op::exp2: case Op::expm1: case Op::log: case Op::log2:
    case Op::log10: case Op::log1p: case Op::sqrt: case Op::sin: case Op::cos: case Op::tan: case Op::arcsin:
    case Op::arccos: case Op::arctan: case Op::sinh: case Op::cosh: case Op::tanh: case Op::arcsinh:
    case Op::arccosh: case Op::arctanh:
      return true;
    default:
      return false;
  }
}

double rtol(DType d) {
  switch (d) {
    case DType::float16: return 2e-3;
    case DType::bfloat16: return 1.6e-2;
    case DType::float32: case DType::complex64: return 2e-5;
    case DType::float64: case DType::complex128: return 1e-12;
    default: return 0;
  }
}

// The reference rounded to the result dtype (so float16 overflow to inf matches).
double round_to(double v, DType d) {
  switch (d) {
    case DType::float16: return static_cast<double>(float16(v));
    case DType::bfloat16: return static_cast<double>(bfloat16(v));
    case DType::float32: case DType::complex64: return static_cast<double>(static_cast<float>(v));
    default: return v;
  }
}

// Integer results wrap modulo 2^bits, as NumPy's (unsigned subtract, negative, bitwise_not).
double wrap_int(double v, DType d) {
  if (!is_integer(d)) return v;
  const double m = std::ldexp(1.0, static_cast<int>(itemsize(d) * 8));
  const double lo = is_signed_integer(d) ? -m / 2 : 0.0;
  if (v >= lo && v < lo + m) return v;  // in range: exact (no 2^64 rounding)
  v = std::fmod(v, m);
  if (v < 0) v += m;
  if (is_signed_integer(d) && v >= m / 2) v -= m;
  return v;
}

std::vector<cd> read(const Array& a) {
  return astype(a.to(Device::cpu()), DType::complex128).to_vector<cd>();
}

bool close(double got, double want, double tol, double scale) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol * (1.0 + scale);
}

// Random values for op's input `k` in dtype d: small integers (no wrap-around), floats in a
// range with NaN, +-Inf and signed zeros sprinkled in.
Array random_input(Op op, int k, DType d, const Shape& shape, std::mt19937_64& rng, Device device) {
  const std::int64_t n = numel(shape);
  std::vector<cd> values(static_cast<std::size_t>(n));
  std::uniform_real_distribution<double> uni(-4, 4);
  const bool shift = op == Op::left_shift || op == Op::right_shift;
  const bool pow_op = op == Op::power;
  for (std::int64_t i = 0; i < n; ++i) {
    double v;
    if (is_bool(d)) {
      v = static_cast<double>(rng() % 2);
    } else if (is_integer(d)) {
      const long long lo = is_unsigned_integer(d) ? 0 : (pow_op ? -3 : -10), hi = pow_op ? 3 : 10;
      v = static_cast<double>(lo + static_cast<long long>(rng() % static_cast<std::uint64_t>(hi - lo + 1)));
      if (shift && k == 1) v = static_cast<double>(rng() % 4);
      if (pow_op && k == 1) v = static_cast<double>(rng() % 5);
    } else {
      v = uni(rng);
      if (pow_op && k == 1) v = std::round(v);
      const auto special = rng() % 16;
      if (special == 0) v = NAN;
      if (special == 1) v = INFINITY;
      if (special == 2) v = -INFINITY;
      if (special == 3) v = 0.0;
      if (special == 4) v = -0.0;
    }
    values[static_cast<std::size_t>(i)] = is_complex(d) ? cd(v, uni(rng)) : cd(v);
  }
  return astype(from_vector(values, shape, device), d);
}

Array call(Op op, const std::vector<Array>& in, const OptionalArray& out = std::nullopt) {
  return elementwise(op, in, out);
}

class ElementwiseOps : public testing::BackendDTypeTest {};

TEST_P(ElementwiseOps, MatchReference) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType d = dtype();
  for (int o = 0; o < num_elementwise_ops; ++o) {
    const Op op = static_cast<Op>(o);
    if (op == Op::where) continue;
    if (device().is_cuda() && !testing::sanitizer_sample(o, static_cast<int>(d))) continue;
    SCOPED_TRACE(std::string(op_name(op)) + " on " + dtype_name(d));
    const bool binary = elementwise_arity(static_cast<Op>(o)) == 2;
    // a: (3, 1, 5) read through a negative-stride view; b: (4, 5) broadcast.
    const std::optional<bool> supported = expected_supported(op, d);
    if (!supported) continue;  // no reference here
    Array a = random_input(op, 0, d, {3, 1, 10}, rng, device()).slice(2, Slice(none, none, -2));
    Array b = random_input(op, 1, d, {4, 5}, rng, device());
    std::vector<Array> in = binary ? std::vector<Array>{a, b} : std::vector<Array>{a};
    if (!*supported) {
      EXPECT_THROW(call(op, in), DTypeError);
      continue;
    }
    Array r;
    try {
      r = call(op, in);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw " << e.what();
      continue;
    }
    const Shape shape = binary ? Shape{3, 4, 5} : Shape{3, 1, 5};
    ASSERT_EQ(r.shape(), shape);
    // The same through a poisoned out= of the result dtype.
    Array poisoned = full(shape, 77, r.dtype(), device());
    call(op, in, poisoned);

    const DType ct = detail::elementwise_types(op, d).compute;
    const std::vector<cd> av = read(a.broadcast_to(shape)), bv = binary ? read(b.broadcast_to(shape)) : av;
    const std::vector<cd> rv = read(r), pv = read(poisoned);
    const double tol = rtol(r.dtype()) + rtol(ct);
    // Complex functions: special values at infinities and NaN are tested against the Array API's
    // tables in Python (tests/python); compare finite inputs only.
    const bool complex_function = is_complex(ct) && (complex_math_op(op));
    for (std::size_t i = 0; i < rv.size(); ++i) {
      if (complex_function && !(std::isfinite(std::abs(av[i])) && std::isfinite(std::abs(bv[i])))) continue;
      const cd want = reference(op, av[i], bv[i], ct);
      const double wr = wrap_int(round_to(want.real(), r.dtype()), r.dtype());
      const double wi = round_to(want.imag(), r.dtype());
      const double scale = std::isfinite(std::abs(want)) ? std::abs(want) : 0.0;
      if (!close(rv[i].real(), wr, tol, scale) || !close(rv[i].imag(), wi, tol, scale) ||
          !close(pv[i].real(), wr, tol, scale) || !close(pv[i].imag(), wi, tol, scale)) {
        ADD_FAILURE() << "element " << i << ": inputs " << av[i] << ", " << bv[i] << " -> got " << rv[i]
                      << " (out= " << pv[i] << "), want " << want;
        break;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(, ElementwiseOps,
                         ::testing::ValuesIn(testing::backend_dtype_cases(testing::all_dtypes())),
                         testing::case_name);

class ElementwiseBackend : public testing::BackendTest {};

// Complex functions on and next to their branch cuts (signed zeros pick the side), against
// std::complex<double> (C99's cuts, which NumPy follows).
TEST_P(ElementwiseBackend, ComplexBranchCuts) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const double z0 = 0.0, nz0 = -0.0;
  const std::vector<cd> points = {{2, z0},  {2, nz0},  {-2, z0}, {-2, nz0}, {0.5, z0}, {-0.5, nz0}, {z0, 2},
                                  {nz0, 2}, {z0, -2}, {nz0, -2}, {z0, 0.5}, {1e-3, 1.5}, {-3, 1e-9},
                                  {-3, -1e-9}, {0.3, -0.7}, {25, 1}, {-25, -2}, {1, z0}, {-1, z0}};
  const Array z = from_vector(points, {static_cast<std::int64_t>(points.size())}, device());
  ASSERT_EQ(z.dtype(), DType::complex128);
  for (Op op : {Op::sqrt, Op::log, Op::log2, Op::log10, Op::log1p, Op::exp, Op::exp2, Op::expm1, Op::sin, Op::cos,
                Op::tan, Op::sinh, Op::cosh, Op::tanh, Op::arcsin, Op::arccos, Op::arctan, Op::arcsinh, Op::arccosh,
                Op::arctanh, Op::sign}) {
    SCOPED_TRACE(op_name(op));
    const std::vector<cd> got = read(call(op, {z}));
    for (std::size_t i = 0; i < points.size(); ++i) {
      const cd want = reference(op, points[i], cd(0), DType::complex128);
      if (!std::isfinite(std::abs(want))) continue;  // poles (atanh(+-1), log1p(-1)): formula-defined
      const double scale = std::abs(want);
      EXPECT_TRUE(close(got[i].real(), want.real(), 1e-12, scale) && close(got[i].imag(), want.imag(), 1e-12, scale))
          << op_name(op) << points[i] << " = " << got[i] << ", want " << want;
    }
  }
  // Lexicographic order and NaN propagation of maximum; power with integer and complex exponents.
  const Array a = from_vector(std::vector<cd>{{1, 5}, {1, 2}, {NAN, 0}, {-1, 0}}, {4}, device());
  const Array b = from_vector(std::vector<cd>{{1, 3}, {0, 9}, {1, 1}, {-1, 0}}, {4}, device());
  EXPECT_EQ(read(less(a, b)), (std::vector<cd>{0, 0, 0, 0}));
  EXPECT_EQ(read(greater_equal(a, b)), (std::vector<cd>{1, 1, 0, 1}));
  const auto mx = read(maximum(a, b));
  EXPECT_EQ(mx[0], cd(1, 5));
  EXPECT_EQ(mx[1], cd(1, 2));
  EXPECT_TRUE(std::isnan(mx[2].real()));
  EXPECT_EQ(read(fmin(a, b))[2], cd(1, 1));
  const auto p = read(power(a.slice(0, Slice(0, 2)), from_vector(std::vector<cd>{{3, 0}, {0.5, -1.25}}, {2}, device())));
  EXPECT_LT(std::abs(p[0] - std::pow(cd(1, 5), 3)), 1e-12 * std::abs(p[0]));
  EXPECT_LT(std::abs(p[1] - std::pow(cd(1, 2), cd(0.5, -1.25))), 1e-12 * std::abs(p[1]));
}

TEST_P(ElementwiseBackend, StreamOfAnotherDevice) {
  TESSEL_SKIP_UNAVAILABLE(device());
  if (device().is_cpu()) GTEST_SKIP() << "a stream of another device needs a GPU";
  const Array a = ones({4}, DType::float32, device());
  testing::expect_error<DeviceError>([&] { add(a, a, std::nullopt, Stream::cpu()); },
                                     {"add", "the stream is on cpu", device().str()});
  testing::expect_error<DeviceError>([&] { negative(a, std::nullopt, Stream::cpu()); }, {"negative", "stream is on cpu"});
}

TEST_P(ElementwiseBackend, Promotion) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Device dev = device();
  auto arr = [&](DType d) { return ones({2}, d, dev); };
  EXPECT_EQ(add(arr(DType::int8), 1).dtype(), DType::int8);
  EXPECT_EQ(add(arr(DType::int32), 1.5).dtype(), DType::float64);
  EXPECT_EQ(add(arr(DType::float32), 1.5).dtype(), DType::float32);
  EXPECT_EQ(add(arr(DType::float16), 1).dtype(), DType::float16);
  EXPECT_EQ(add(arr(DType::uint64), arr(DType::int64)).dtype(), DType::float64);
  EXPECT_EQ(add(arr(DType::bool_), arr(DType::bool_)).dtype(), DType::bool_);
  EXPECT_EQ(add(arr(DType::int8), arr(DType::int16)).dtype(), DType::int16);
  EXPECT_EQ(add(arr(DType::float16), arr(DType::int16)).dtype(), DType::float32);
  EXPECT_EQ(multiply(arr(DType::float32), std::complex<double>(0, 1)).dtype(), DType::complex64);
  EXPECT_EQ(divide(arr(DType::int32), arr(DType::int32)).dtype(), DType::float64);
  EXPECT_EQ(exp(arr(DType::int32)).dtype(), DType::float64);
  EXPECT_EQ(exp(arr(DType::int8)).dtype(), DType::float16);  // NumPy's e->e loop
  EXPECT_EQ(exp(arr(DType::float16)).dtype(), DType::float16);
  EXPECT_EQ(abs(arr(DType::complex64)).dtype(), DType::float32);
  EXPECT_EQ(less(arr(DType::float32), arr(DType::int64)).dtype(), DType::bool_);
  EXPECT_EQ(floor(arr(DType::int32)).dtype(), DType::int32);
  EXPECT_EQ(floor_divide(arr(DType::bool_), arr(DType::bool_)).dtype(), DType::int8);
  // Values: int8 127 + 1 wraps as NumPy's; true + true is true.
  EXPECT_EQ(add(full({}, 127, DType::int8, dev), 1).item<int>(), -128);
  EXPECT_TRUE(add(full({}, true, DType::bool_, dev), full({}, true, DType::bool_, dev)).item<bool>());
  EXPECT_EQ(floor_divide(full({}, -7, DType::int32, dev), 2).item<int>(), -4);
  EXPECT_EQ(remainder(full({}, -7, DType::int32, dev), 2).item<int>(), 1);
  EXPECT_EQ(remainder(full({}, 7.0, DType::float64, dev), -2.0).item<double>(), -1.0);
  EXPECT_EQ(round(from_vector(std::vector<double>{0.5, 1.5, 2.5, -0.5}, {4}, dev)).to_vector<double>(),
            (std::vector<double>{0.0, 2.0, 2.0, -0.0}));
}

TEST_P(ElementwiseBackend, ZeroSizeZeroDimNaN) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Device dev = device();
  Array s = add(full({}, 2.0, DType::float32, dev), full({}, 3.0, DType::float32, dev));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item<float>(), 5.0f);
  Array z = add(zeros({0, 3}, DType::float32, dev), ones({3}, DType::float32, dev));
  EXPECT_EQ(z.shape(), (Shape{0, 3}));
  const std::vector<double> v{NAN, 1.0, 2.0};
  const std::vector<double> w{0.0, NAN, 1.0};
  Array a = from_vector(v, {3}, dev), b = from_vector(w, {3}, dev);
  const auto mx = maximum(a, b).to_vector<double>();
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 2.0);
  const auto fx = fmax(a, b).to_vector<double>();
  EXPECT_EQ(fx, (std::vector<double>{0.0, 1.0, 2.0}));
  const auto wh = where(astype(from_vector(std::vector<double>{1, 0, 1}, {3}, dev), DType::bool_), a, 5.5 * ones({3}, DType::float64, dev))
                      .to_vector<double>();
  EXPECT_TRUE(std::isnan(wh[0]));
  EXPECT_EQ(wh[1], 5.5);
  const auto cl = clip(from_vector(std::vector<double>{-3, 0.5, 9, NAN}, {4}, dev), 0.0, 1.0).to_vector<double>();
  EXPECT_EQ(cl[0], 0.0);
  EXPECT_EQ(cl[1], 0.5);
  EXPECT_EQ(cl[2], 1.0);
  EXPECT_TRUE(std::isnan(cl[3]));
}

TEST_P(ElementwiseBackend, OperatorsAndInPlace) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Device dev = device();
  Array a = arange(0, 6, 1, DType::float32, dev).reshape({2, 3});
  Array b = arange(0, 3, 1, DType::float32, dev);
  EXPECT_EQ((a + b).to_vector<float>(), (std::vector<float>{0, 2, 4, 3, 5, 7}));
  EXPECT_EQ((a * 2 - 1).to_vector<float>(), (std::vector<float>{-1, 1, 3, 5, 7, 9}));
  EXPECT_EQ((a > 2).to_vector<bool>(), (std::vector<bool>{false, false, false, true, true, true}));
  Array c = a.copy();
  c += b;
  c *= 2;
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 4, 8, 6, 10, 14}));
  // in-place with a float result into an int array: same_kind forbids it.
  Array i = arange(0, 3, 1, DType::int32, dev);
  EXPECT_THROW(i += 1.5, DTypeError);
  i += 1;
  EXPECT_EQ(i.to_vector<int>(), (std::vector<int>{1, 2, 3}));
  // out= of a wider dtype of the same kind is allowed (int32 result into float64).
  Array wide = zeros({3}, DType::float64, dev);
  add(i, i, wide);
  EXPECT_EQ(wide.to_vector<double>(), (std::vector<double>{2, 4, 6}));
}

TEST_P(ElementwiseBackend, OutOverlappingInputs) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Device dev = device();
  // out = a[1:], inputs a[:-1] and a[1:]: NumPy computes from the original values.
  Array a = arange(0, 8, 1, DType::float64, dev);
  add(a.slice(0, Slice(0, 7)), a.slice(0, Slice(1, 8)), a.slice(0, Slice(1, 8)));
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{0, 1, 3, 5, 7, 9, 11, 13}));
  // Reversed view of the same buffer as out.
  Array r = arange(0, 5, 1, DType::int64, dev);
  negative(r.slice(0, Slice(none, none, -1)), r);
  EXPECT_EQ(r.to_vector<std::int64_t>(), (std::vector<std::int64_t>{-4, -3, -2, -1, 0}));
  // Shifted by one element, other direction.
  Array s = arange(0, 6, 1, DType::int32, dev);
  multiply(s.slice(0, Slice(1, 6)), 10, s.slice(0, Slice(0, 5)));
  EXPECT_EQ(s.to_vector<int>(), (std::vector<int>{10, 20, 30, 40, 50, 5}));
  // Identical layout (in place) needs no staging and is right too.
  Array t = arange(0, 4, 1, DType::float32, dev);
  add(t, t, t);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 2, 4, 6}));
}

// Operands that already have the result shape are used without a broadcast view, whatever the
// strides of their size-1 axes: (4, 1) columns cut from a row-major and a transposed array, and
// (1,) elements cut from a plain and a reversed array.
TEST_P(ElementwiseBackend, ResultShapedInputsWithSizeOneAxes) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Device dev = device();
  std::uniform_real_distribution<double> uniform(-4, 4);
  std::vector<double> xv(20), yv(28);
  for (double& v : xv) v = uniform(rng);
  for (double& v : yv) v = uniform(rng);
  const Array x_all = from_vector(xv, {4, 5}, dev), y_all = from_vector(yv, {7, 4}, dev);
  const Array x = x_all.slice(1, Slice(3, 4));        // (4, 1), strides (5, 1)
  const Array y = y_all.T().slice(1, Slice(5, 6));    // (4, 1), strides (1, 4)
  ASSERT_EQ(x.shape(), (Shape{4, 1}));
  ASSERT_EQ(y.shape(), (Shape{4, 1}));
  std::vector<double> want(4);
  for (int i = 0; i < 4; ++i) want[static_cast<std::size_t>(i)] = xv[static_cast<std::size_t>(i * 5 + 3)] + yv[static_cast<std::size_t>(20 + i)];
  EXPECT_EQ(add(x, y).to_vector<double>(), want);
  Array out = full({4, 1}, NAN, DType::float64, dev);
  add(x, y, out);
  EXPECT_EQ(out.to_vector<double>(), want);

  const Array x1 = from_vector(xv, {20}, dev).slice(0, Slice(7, 8));      // offset 7
  const Array y1 = from_vector(yv, {28}, dev).slice(0, Slice(none, none, -1)).slice(0, Slice(18, 19));  // yv[9]
  EXPECT_EQ(add(x1, y1).to_vector<double>(), (std::vector<double>{xv[7] + yv[9]}));
}

TEST_P(ElementwiseBackend, BadInputs) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Device dev = device();
  testing::expect_error<ShapeError>([&] { add(ones({2, 3}, DType::float32, dev), ones({4}, DType::float32, dev)); },
                                    {"add", "(2, 3)", "(4,)", "axis"});
  testing::expect_error<DTypeError>([&] { bitwise_and(ones({2}, DType::float32, dev), ones({2}, DType::float32, dev)); },
                                    {"bitwise_and", "float32"});
  testing::expect_error<DTypeError>([&] { floor(ones({2}, DType::complex64, dev)); }, {"floor", "complex64"});
  testing::expect_error<DTypeError>([&] { subtract(ones({2}, DType::bool_, dev), ones({2}, DType::bool_, dev)); },
                                    {"subtract", "bool"});
  testing::expect_error<DTypeError>(
      [&] { left_shift(ones({2}, DType::int32, dev), ones({2}, DType::float32, dev)); },
      {"left_shift", "int32 and float32", "float64"});
  testing::expect_error<ShapeError>(
      [&] { add(ones({2, 3}, DType::float32, dev), 1, zeros({3}, DType::float32, dev)); },
      {"add", "out", "(3,)", "(2, 3)"});
  testing::expect_error<DTypeError>(
      [&] { divide(ones({3}, DType::int32, dev), 2, zeros({3}, DType::int32, dev)); },
      {"divide", "float64", "int32", "same_kind"});
  testing::expect_error<ValueError>([&] { add(Array(), ones({1}, DType::float32, dev)); }, {"add", "undefined"});
  if (cuda_available()) {
    testing::expect_error<DeviceError>(
        [&] { add(ones({2}, DType::float32, Device::cpu()), ones({2}, DType::float32, testing::test_gpu())); },
        {"add", "cpu", testing::test_gpu().str()});
  }
}

INSTANTIATE_TEST_SUITE_P(, ElementwiseBackend, ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

#ifdef TESSEL_HAVE_CUDA
// NVRTC needs no GPU: the generated source of every op for every supported dtype compiles.
TEST(ElementwiseCudaSource, EveryOpAndDtypeCompiles) {
  if (!jit::nvrtc_available()) GTEST_SKIP() << "no NVRTC";
  // One program per dtype holding every op's kernel: ~15 NVRTC runs instead of ~900.
  for (DType d : testing::all_dtypes()) {
    jit::CompileRequest r;
    r.arch = "sm_90";
    for (int o = 0; o < num_elementwise_ops; ++o) {
      const Op op = static_cast<Op>(o);
      detail::ElementwiseTypes t{};
      try {
        t = detail::elementwise_types(op, d);
      } catch (const DTypeError&) {
        continue;
      }
      const int arity = op == Op::where ? 3 : (o <= static_cast<int>(Op::arctan2) ? 2 : 1);
      std::vector<DType> in(static_cast<std::size_t>(arity), t.compute);
      if (op == Op::where) in[0] = DType::bool_;
      r.source += backend::cuda::elementwise_source(op, in, t.result) + "\n";
      if (r.name.empty()) r.name = std::string("tessel_") + op_name(op) + "_c";
    }
    try {
      EXPECT_FALSE(jit::compile_to_cubin(r).cubin.empty());
    } catch (const CompileError& e) {
      ADD_FAILURE() << dtype_name(d) << ": " << e.what();
    }
  }
}

// Scalar operands are by-value kernel parameters (a * 2 stays on the vectorized path). Generated
// with the unrolled contiguous loop the launches use (ElementwiseTuning::unroll), so every binary
// op's unrolled form compiles too.
TEST(ElementwiseCudaSource, ScalarOperandsCompile) {
  if (!jit::nvrtc_available()) GTEST_SKIP() << "no NVRTC";
  for (DType d : {DType::bool_, DType::int64, DType::float16, DType::bfloat16, DType::float32, DType::complex128}) {
    jit::CompileRequest r;
    r.arch = "sm_90";
    for (int o = 0; o <= static_cast<int>(Op::arctan2); ++o) {
      const Op op = static_cast<Op>(o);
      detail::ElementwiseTypes t{};
      try {
        t = detail::elementwise_types(op, d);
      } catch (const DTypeError&) {
        continue;
      }
      const std::string src = backend::cuda::elementwise_source(op, {t.compute, t.compute}, t.result, 2u, 4);
      EXPECT_NE(src.find(std::string(cuda_type_name(t.compute)) + " v_in1"), std::string::npos) << op_name(op);
      r.source += src + "\n";
      if (r.name.empty()) r.name = std::string("tessel_") + op_name(op) + (std::max(itemsize(t.compute), itemsize(t.result)) < 16 ? "_c_u4" : "_c");
    }
    try {
      EXPECT_FALSE(jit::compile_to_cubin(r).cubin.empty());
    } catch (const CompileError& e) {
      ADD_FAILURE() << dtype_name(d) << ": " << e.what();
    }
  }
}
#endif

}  // namespace
}  // namespace tessel
