#pragma once
// Elementwise operations with NumPy semantics: NumPy 2 type promotion (C++ arithmetic values
// passed as Scalar are weak Python scalars), broadcasting, `out=` (same_kind casting), in-place
// use (add(a, b, a)) and outputs that overlap inputs (staged through a temporary). Every op is
// asynchronous on `stream` (default: the current stream of the operands' device).
//
// Errors name the op: ShapeError (both shapes and the failing axis), DTypeError (the op and the
// dtype), DeviceError (both devices), for `out` of the wrong shape or an unsafe cast too.
#include <cstdint>
#include <optional>
#include <string>

#include "tessel/array/array.hpp"

namespace tessel {

// Every elementwise op; the backends and the dtype table are indexed by it.
enum class ElementwiseOp : std::uint8_t {
  // binary arithmetic
  add, subtract, multiply, divide, floor_divide, remainder, power,
  // comparisons
  equal, not_equal, less, less_equal, greater, greater_equal,
  // logical and bitwise
  logical_and, logical_or, logical_xor, bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift,
  // extrema
  minimum, maximum, fmin, fmax, hypot, copysign, logaddexp, arctan2,  // arctan2: the last binary op
  // unary
  negative, positive, abs, logical_not, bitwise_not, square, reciprocal, sign,
  exp, exp2, expm1, log, log2, log10, log1p, sqrt, rsqrt, cbrt,
  sin, cos, tan, arcsin, arccos, arctan, sinh, cosh, tanh, arcsinh, arccosh, arctanh,
  sigmoid, relu, gelu, erf, softplus,
  floor, ceil, trunc, round,
  isnan, isinf, isfinite,
  real, imag, conj, angle, signbit,
  // ternary
  where,
  count_  // number of ops
};
constexpr int num_elementwise_ops = static_cast<int>(ElementwiseOp::count_);
const char* op_name(ElementwiseOp op);

using OptionalArray = std::optional<Array>;

#define TESSEL_DECLARE_BINARY(name)                                                                  \
  Array name(const Array& a, const Array& b, const OptionalArray& out = std::nullopt,               \
             const OptionalStream& stream = std::nullopt);                                          \
  Array name(const Array& a, Scalar b, const OptionalArray& out = std::nullopt,                     \
             const OptionalStream& stream = std::nullopt);                                          \
  Array name(Scalar a, const Array& b, const OptionalArray& out = std::nullopt,                     \
             const OptionalStream& stream = std::nullopt);
#define TESSEL_DECLARE_UNARY(name) \
  Array name(const Array& a, const OptionalArray& out = std::nullopt, const OptionalStream& stream = std::nullopt);

TESSEL_DECLARE_BINARY(add)
TESSEL_DECLARE_BINARY(subtract)
TESSEL_DECLARE_BINARY(multiply)
TESSEL_DECLARE_BINARY(divide)  // true division: integers give float64
TESSEL_DECLARE_BINARY(floor_divide)
TESSEL_DECLARE_BINARY(remainder)  // sign of the divisor, as Python
TESSEL_DECLARE_BINARY(power)
TESSEL_DECLARE_BINARY(equal)
TESSEL_DECLARE_BINARY(not_equal)
TESSEL_DECLARE_BINARY(less)
TESSEL_DECLARE_BINARY(less_equal)
TESSEL_DECLARE_BINARY(greater)
TESSEL_DECLARE_BINARY(greater_equal)
TESSEL_DECLARE_BINARY(logical_and)
TESSEL_DECLARE_BINARY(logical_or)
TESSEL_DECLARE_BINARY(logical_xor)
TESSEL_DECLARE_BINARY(bitwise_and)
TESSEL_DECLARE_BINARY(bitwise_or)
TESSEL_DECLARE_BINARY(bitwise_xor)
TESSEL_DECLARE_BINARY(left_shift)
TESSEL_DECLARE_BINARY(right_shift)
TESSEL_DECLARE_BINARY(minimum)  // NaN-propagating
TESSEL_DECLARE_BINARY(maximum)
TESSEL_DECLARE_BINARY(fmin)  // NaN-ignoring
TESSEL_DECLARE_BINARY(fmax)
TESSEL_DECLARE_BINARY(arctan2)
TESSEL_DECLARE_BINARY(hypot)      // sqrt(a^2 + b^2) without undue overflow; inf if either is inf
TESSEL_DECLARE_BINARY(copysign)   // |a| with the sign bit of b (NaN's sign bit too)
TESSEL_DECLARE_BINARY(logaddexp)  // log(exp(a) + exp(b)) without overflow

TESSEL_DECLARE_UNARY(negative)
TESSEL_DECLARE_UNARY(positive)
TESSEL_DECLARE_UNARY(abs)
TESSEL_DECLARE_UNARY(logical_not)
TESSEL_DECLARE_UNARY(bitwise_not)
TESSEL_DECLARE_UNARY(square)
TESSEL_DECLARE_UNARY(reciprocal)
TESSEL_DECLARE_UNARY(sign)
TESSEL_DECLARE_UNARY(exp)
TESSEL_DECLARE_UNARY(exp2)
TESSEL_DECLARE_UNARY(expm1)
TESSEL_DECLARE_UNARY(log)
TESSEL_DECLARE_UNARY(log2)
TESSEL_DECLARE_UNARY(log10)
TESSEL_DECLARE_UNARY(log1p)
TESSEL_DECLARE_UNARY(sqrt)
TESSEL_DECLARE_UNARY(rsqrt)
TESSEL_DECLARE_UNARY(cbrt)
TESSEL_DECLARE_UNARY(sin)
TESSEL_DECLARE_UNARY(cos)
TESSEL_DECLARE_UNARY(tan)
TESSEL_DECLARE_UNARY(arcsin)
TESSEL_DECLARE_UNARY(arccos)
TESSEL_DECLARE_UNARY(arctan)
TESSEL_DECLARE_UNARY(sinh)
TESSEL_DECLARE_UNARY(cosh)
TESSEL_DECLARE_UNARY(tanh)
TESSEL_DECLARE_UNARY(arcsinh)
TESSEL_DECLARE_UNARY(arccosh)
TESSEL_DECLARE_UNARY(arctanh)
TESSEL_DECLARE_UNARY(sigmoid)
TESSEL_DECLARE_UNARY(relu)
TESSEL_DECLARE_UNARY(gelu)  // erf form: x * (1 + erf(x / sqrt(2))) / 2
TESSEL_DECLARE_UNARY(erf)
TESSEL_DECLARE_UNARY(softplus)
TESSEL_DECLARE_UNARY(floor)
TESSEL_DECLARE_UNARY(ceil)
TESSEL_DECLARE_UNARY(trunc)
TESSEL_DECLARE_UNARY(round)  // half to even
TESSEL_DECLARE_UNARY(isnan)
TESSEL_DECLARE_UNARY(isinf)
TESSEL_DECLARE_UNARY(isfinite)
TESSEL_DECLARE_UNARY(real)
TESSEL_DECLARE_UNARY(imag)
TESSEL_DECLARE_UNARY(conj)
TESSEL_DECLARE_UNARY(angle)
TESSEL_DECLARE_UNARY(signbit)  // the sign bit, of -0 and NaN too

#undef TESSEL_DECLARE_BINARY
#undef TESSEL_DECLARE_UNARY

// cond ? a : b, broadcasting all three; cond is read as bool.
Array where(const Array& cond, const Array& a, const Array& b, const OptionalArray& out = std::nullopt,
            const OptionalStream& stream = std::nullopt);
// minimum(maximum(a, lo), hi), NaN-propagating as NumPy's clip.
Array clip(const Array& a, Scalar lo, Scalar hi, const OptionalArray& out = std::nullopt,
           const OptionalStream& stream = std::nullopt);
Array clip(const Array& a, const Array& lo, const Array& hi, const OptionalArray& out = std::nullopt,
           const OptionalStream& stream = std::nullopt);

// The generic entry points the named functions call (also for bindings): inputs are arrays.
Array elementwise(ElementwiseOp op, const std::vector<Array>& inputs, const OptionalArray& out = std::nullopt,
                  const OptionalStream& stream = std::nullopt);

// ---- operators (NumPy's: / is true division, % is remainder) ----
#define TESSEL_ARRAY_OPERATOR(sym, fn)                                          \
  inline Array operator sym(const Array& a, const Array& b) { return fn(a, b); } \
  inline Array operator sym(const Array& a, Scalar b) { return fn(a, b); }       \
  inline Array operator sym(Scalar a, const Array& b) { return fn(a, b); }       \
  inline Array& operator sym##=(Array& a, const Array& b) {                      \
    fn(a, b, a);                                                                 \
    return a;                                                                    \
  }                                                                              \
  inline Array& operator sym##=(Array& a, Scalar b) {                            \
    fn(a, b, a);                                                                 \
    return a;                                                                    \
  }
TESSEL_ARRAY_OPERATOR(+, add)
TESSEL_ARRAY_OPERATOR(-, subtract)
TESSEL_ARRAY_OPERATOR(*, multiply)
TESSEL_ARRAY_OPERATOR(/, divide)
TESSEL_ARRAY_OPERATOR(%, remainder)
TESSEL_ARRAY_OPERATOR(&, bitwise_and)
TESSEL_ARRAY_OPERATOR(|, bitwise_or)
TESSEL_ARRAY_OPERATOR(^, bitwise_xor)
TESSEL_ARRAY_OPERATOR(<<, left_shift)
TESSEL_ARRAY_OPERATOR(>>, right_shift)
#undef TESSEL_ARRAY_OPERATOR
#define TESSEL_ARRAY_COMPARISON(sym, fn)                                         \
  inline Array operator sym(const Array& a, const Array& b) { return fn(a, b); } \
  inline Array operator sym(const Array& a, Scalar b) { return fn(a, b); }       \
  inline Array operator sym(Scalar a, const Array& b) { return fn(a, b); }
TESSEL_ARRAY_COMPARISON(==, equal)
TESSEL_ARRAY_COMPARISON(!=, not_equal)
TESSEL_ARRAY_COMPARISON(<, less)
TESSEL_ARRAY_COMPARISON(<=, less_equal)
TESSEL_ARRAY_COMPARISON(>, greater)
TESSEL_ARRAY_COMPARISON(>=, greater_equal)
#undef TESSEL_ARRAY_COMPARISON
inline Array operator-(const Array& a) { return negative(a); }
inline Array operator+(const Array& a) { return positive(a); }
inline Array operator~(const Array& a) { return bitwise_not(a); }
inline Array operator!(const Array& a) { return logical_not(a); }

}  // namespace tessel
