#pragma once
// Every elementwise function, one row each: the one place where an op's C++ name, Python (Array
// API) name and dtype rule are written. The rows expand into the ElementwiseOp enum, the C++
// functions (elementwise.hpp), their Sym twins (fuse.hpp), the dtype table (src/ops/
// elementwise.cpp) and the Python bindings (python/bindings/ops.cpp).
//
//   X(name, "python_name", promote, result, kinds)
//
// promote: how the compute dtype follows from the promoted input dtype
//   same          the promoted dtype
//   bool_to_int8  NumPy computes bool // bool, bool ** bool and bool**2 in int8
//   true_divide   bool and integers -> float64
//   to_float      bool/integers -> the smallest float that holds them (NumPy's loops: int8 ->
//                 float16, int16 -> float32, wider -> float64); floats stay
// result: the output dtype from the compute dtype: same, bool_ or real (the real part's type)
// kinds: the compute dtype kinds the op accepts (kB | kI | kF | kC, kAll); anything else is a
//   DTypeError naming the op, the dtype and these kinds. The CPU loops exist for exactly these
//   kinds (src/backend/cpu/elementwise.cpp). Complex: NumPy's set (ordering is lexicographic,
//   sign is z/|z|); not rsqrt/cbrt/arctan2/floor-like/sigmoid/gelu/erf/softplus/relu, as
//   NumPy and PyTorch.

// Binary functions, in enum order.
#define TESSEL_BINARY_OPS(X) \
  X(add, "add", same, same, kAll) \
  X(subtract, "subtract", same, same, kI|kF|kC) /* NumPy has no boolean subtract */ \
  X(multiply, "multiply", same, same, kAll) \
  X(divide, "divide", true_divide, same, kF|kC) /* true division: integers give float64 */ \
  X(floor_divide, "floor_divide", bool_to_int8, same, kI|kF) \
  X(remainder, "remainder", bool_to_int8, same, kI|kF) /* sign of the divisor, as Python */ \
  X(power, "pow", bool_to_int8, same, kI|kF|kC) \
  X(equal, "equal", same, bool_, kAll) \
  X(not_equal, "not_equal", same, bool_, kAll) \
  X(less, "less", same, bool_, kAll) \
  X(less_equal, "less_equal", same, bool_, kAll) \
  X(greater, "greater", same, bool_, kAll) \
  X(greater_equal, "greater_equal", same, bool_, kAll) \
  X(logical_and, "logical_and", same, bool_, kAll) \
  X(logical_or, "logical_or", same, bool_, kAll) \
  X(logical_xor, "logical_xor", same, bool_, kAll) \
  X(bitwise_and, "bitwise_and", same, same, kB|kI) \
  X(bitwise_or, "bitwise_or", same, same, kB|kI) \
  X(bitwise_xor, "bitwise_xor", same, same, kB|kI) \
  X(left_shift, "bitwise_left_shift", bool_to_int8, same, kI) /* NumPy: bool << bool is int8 */ \
  X(right_shift, "bitwise_right_shift", bool_to_int8, same, kI) \
  X(minimum, "minimum", same, same, kAll) /* NaN-propagating */ \
  X(maximum, "maximum", same, same, kAll) \
  X(fmin, "fmin", same, same, kAll) /* NaN-ignoring */ \
  X(nextafter, "nextafter", to_float, same, kF) /* the next value of x1's dtype toward x2 */ \
  X(fmax, "fmax", same, same, kAll) \
  X(hypot, "hypot", to_float, same, kF) /* no undue overflow; inf if either is inf, even with NaN */ \
  X(copysign, "copysign", to_float, same, kF) /* |x1| with x2's sign bit, a NaN's too */ \
  X(logaddexp, "logaddexp", to_float, same, kF) /* log(exp(x1) + exp(x2)) without overflow */ \
  X(arctan2, "atan2", to_float, same, kF)

// Unary functions, in enum order.
#define TESSEL_UNARY_OPS(X) \
  X(negative, "negative", same, same, kI|kF|kC) \
  X(positive, "positive", same, same, kI|kF|kC) \
  X(abs, "abs", same, real, kAll) \
  X(logical_not, "logical_not", same, bool_, kAll) \
  X(bitwise_not, "bitwise_invert", same, same, kB|kI) \
  X(square, "square", bool_to_int8, same, kI|kF|kC) \
  X(reciprocal, "reciprocal", same, same, kF|kC) \
  X(sign, "sign", same, same, kI|kF|kC) \
  X(exp, "exp", to_float, same, kF|kC) \
  X(exp2, "exp2", to_float, same, kF|kC) \
  X(expm1, "expm1", to_float, same, kF|kC) \
  X(log, "log", to_float, same, kF|kC) \
  X(log2, "log2", to_float, same, kF|kC) \
  X(log10, "log10", to_float, same, kF|kC) \
  X(log1p, "log1p", to_float, same, kF|kC) \
  X(sqrt, "sqrt", to_float, same, kF|kC) \
  X(rsqrt, "rsqrt", to_float, same, kF) \
  X(cbrt, "cbrt", to_float, same, kF) \
  X(sin, "sin", to_float, same, kF|kC) \
  X(cos, "cos", to_float, same, kF|kC) \
  X(tan, "tan", to_float, same, kF|kC) \
  X(arcsin, "asin", to_float, same, kF|kC) \
  X(arccos, "acos", to_float, same, kF|kC) \
  X(arctan, "atan", to_float, same, kF|kC) \
  X(sinh, "sinh", to_float, same, kF|kC) \
  X(cosh, "cosh", to_float, same, kF|kC) \
  X(tanh, "tanh", to_float, same, kF|kC) \
  X(arcsinh, "asinh", to_float, same, kF|kC) \
  X(arccosh, "acosh", to_float, same, kF|kC) \
  X(arctanh, "atanh", to_float, same, kF|kC) \
  X(sigmoid, "sigmoid", to_float, same, kF) \
  X(relu, "relu", same, same, kI|kF) \
  X(gelu, "gelu", to_float, same, kF) /* erf form: x * (1 + erf(x / sqrt(2))) / 2 */ \
  X(erf, "erf", to_float, same, kF) \
  X(softplus, "softplus", to_float, same, kF) \
  X(floor, "floor", same, same, kI|kF) /* NumPy 2: ints stay ints */ \
  X(ceil, "ceil", same, same, kI|kF) \
  X(trunc, "trunc", same, same, kI|kF) \
  X(round, "round", same, same, kI|kF|kC) /* half to even; complex: each part */ \
  X(isnan, "isnan", same, bool_, kAll) \
  X(isinf, "isinf", same, bool_, kAll) \
  X(isfinite, "isfinite", same, bool_, kAll) \
  X(real, "real", same, real, kAll) \
  X(imag, "imag", same, real, kAll) \
  X(conj, "conj", same, same, kAll) \
  X(angle, "angle", to_float, real, kF|kC) \
  X(signbit, "signbit", to_float, bool_, kF) /* the sign bit, of -0 and NaN too */
