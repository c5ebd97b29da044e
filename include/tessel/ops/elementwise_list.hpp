#pragma once
// Every elementwise function, one row each: the one place where an op's C++ name, Python (Array
// API) name and dtype rule are written. The rows expand into the ElementwiseOp enum, the C++
// functions (elementwise.hpp), their Sym twins (fuse.hpp), the dtype table (src/ops/
// elementwise.cpp) and the Python bindings (python/bindings/ops.cpp). An op that is one formula
// on both backends also has a row of TESSEL_UNARY_FORMULAS below, its code on the CPU and on CUDA.
//
//   X(name, "python_name", promote, result, kinds, "docstring")
//
// promote: how the compute dtype follows from the promoted input dtype
//   same          the promoted dtype
//   bool_to_int8  NumPy computes bool // bool, bool ** bool and bool**2 in int8
//   true_divide   bool and integers -> float64
//   to_float      bool/integers -> the smallest float that holds them (NumPy's loops: int8 ->
//                 float16, int16 -> float32, wider -> float64); floats stay
// result: the output dtype from the compute dtype: same, bool_ or real (the real part's type)
// docstring: the Python function's (its binding's __doc__, its stub in python/tessel/__init__.pyi
//   and its API reference entry follow from it: scripts/gen_op_stubs.py)
// kinds: the compute dtype kinds the op accepts (kB | kI | kF | kC, kAll); anything else is a
//   DTypeError naming the op, the dtype and these kinds. The CPU loops exist for exactly these
//   kinds (src/backend/cpu/elementwise.cpp). Complex: NumPy's set (ordering is lexicographic,
//   sign is z/|z|); not rsqrt/cbrt/arctan2/floor-like/sigmoid/gelu/erf/softplus/relu, as
//   NumPy and PyTorch.

// Binary functions, in enum order.
#define TESSEL_BINARY_OPS(X) \
  X(add, "add", same, same, kAll, \
    "x1 + x2 with broadcasting and NumPy 2 promotion (Python scalars are weak).\n\n" \
    "``out`` receives the result (same-kind casting); it may be one of the inputs.") \
  X(subtract, "subtract", same, same, kI|kF|kC, "x1 - x2 (not for bool).") /* NumPy has no boolean subtract */ \
  X(multiply, "multiply", same, same, kAll, "x1 * x2.") \
  X(divide, "divide", true_divide, same, kF|kC, /* true division: integers give float64 */ \
    "True division x1 / x2: integer and bool inputs give float64, as NumPy.") \
  X(floor_divide, "floor_divide", bool_to_int8, same, kI|kF, \
    "floor(x1 / x2), as Python's //, for integer and real floating arrays.") \
  X(remainder, "remainder", bool_to_int8, same, kI|kF, /* sign of the divisor, as Python */ \
    "x1 - floor_divide(x1, x2) * x2: the sign of the divisor, as Python's %.") \
  X(power, "pow", bool_to_int8, same, kI|kF|kC, \
    "x1 ** x2. Integer powers with a negative exponent give 0 (or +-1 for a base of +-1).") \
  X(equal, "equal", same, bool_, kAll, "x1 == x2, a bool array.") \
  X(not_equal, "not_equal", same, bool_, kAll, "x1 != x2, a bool array.") \
  X(less, "less", same, bool_, kAll, "x1 < x2, a bool array; complex numbers compare lexicographically, as NumPy.") \
  X(less_equal, "less_equal", same, bool_, kAll, "x1 <= x2, a bool array.") \
  X(greater, "greater", same, bool_, kAll, "x1 > x2, a bool array.") \
  X(greater_equal, "greater_equal", same, bool_, kAll, "x1 >= x2, a bool array.") \
  X(logical_and, "logical_and", same, bool_, kAll, "x1 and x2, elementwise; a bool array.") \
  X(logical_or, "logical_or", same, bool_, kAll, "x1 or x2, elementwise; a bool array.") \
  X(logical_xor, "logical_xor", same, bool_, kAll, "x1 xor x2, elementwise; a bool array.") \
  X(bitwise_and, "bitwise_and", same, same, kB|kI, "x1 & x2 for bool and integer arrays.") \
  X(bitwise_or, "bitwise_or", same, same, kB|kI, "x1 | x2 for bool and integer arrays.") \
  X(bitwise_xor, "bitwise_xor", same, same, kB|kI, "x1 ^ x2 for bool and integer arrays.") \
  X(left_shift, "bitwise_left_shift", bool_to_int8, same, kI, /* NumPy: bool << bool is int8 */ \
    "x1 << x2 for integer arrays; shifts past the width give 0.") \
  X(right_shift, "bitwise_right_shift", bool_to_int8, same, kI, \
    "x1 >> x2 for integer arrays (arithmetic for signed types).") \
  X(minimum, "minimum", same, same, kAll, "The smaller of x1 and x2; NaN propagates.") /* NaN-propagating */ \
  X(maximum, "maximum", same, same, kAll, "The larger of x1 and x2; NaN propagates.") \
  X(fmin, "fmin", same, same, kAll, "The smaller of x1 and x2, ignoring a NaN.") /* NaN-ignoring */ \
  X(nextafter, "nextafter", to_float, same, kF, /* the next value of x1's dtype toward x2 */ \
    "The next representable value of x1's floating-point dtype toward x2 (x2 where they are equal).") \
  X(fmax, "fmax", same, same, kAll, "The larger of x1 and x2, ignoring a NaN.") \
  X(hypot, "hypot", to_float, same, kF, /* no undue overflow; inf if either is inf, even with NaN */ \
    "sqrt(x1**2 + x2**2) without intermediate overflow; +inf where either is infinite, even with NaN.") \
  X(copysign, "copysign", to_float, same, kF, /* |x1| with x2's sign bit, a NaN's too */ \
    "The magnitude of x1 with the sign bit of x2 (a NaN's sign bit too).") \
  X(logaddexp, "logaddexp", to_float, same, kF, /* log(exp(x1) + exp(x2)) without overflow */ \
    "log(exp(x1) + exp(x2)) without overflow.") \
  X(arctan2, "atan2", to_float, same, kF, \
    "The angle of the point (x2, x1), in radians, for real floating arrays (``arctan2``).")

// Unary functions, in enum order.
#define TESSEL_UNARY_OPS(X) \
  X(negative, "negative", same, same, kI|kF|kC, "-x, elementwise (integers wrap around).") \
  X(positive, "positive", same, same, kI|kF|kC, "+x, elementwise (a copy).") \
  X(abs, "abs", same, real, kAll, "The absolute value, elementwise; complex inputs give their (real) magnitude.") \
  X(logical_not, "logical_not", same, bool_, kAll, "not x, elementwise; a bool array.") \
  X(bitwise_not, "bitwise_invert", same, same, kB|kI, "~x for bool and integer arrays.") \
  X(square, "square", bool_to_int8, same, kI|kF|kC, "x * x, elementwise.") \
  X(reciprocal, "reciprocal", same, same, kF|kC, "1 / x for floating and complex arrays.") \
  X(sign, "sign", same, same, kI|kF|kC, \
    "-1, 0 or 1 for real inputs (NaN stays NaN); ``z / abs(z)`` for complex ones (NumPy 2).") \
  X(exp, "exp", to_float, same, kF|kC, "e**x, elementwise.") \
  X(exp2, "exp2", to_float, same, kF|kC, "2**x, elementwise.") \
  X(expm1, "expm1", to_float, same, kF|kC, "exp(x) - 1, accurate near 0.") \
  X(log, "log", to_float, same, kF|kC, "Natural logarithm; complex inputs follow C99's branch cut.") \
  X(log2, "log2", to_float, same, kF|kC, "Base-2 logarithm.") \
  X(log10, "log10", to_float, same, kF|kC, "Base-10 logarithm.") \
  X(log1p, "log1p", to_float, same, kF|kC, "log(1 + x), accurate near 0.") \
  X(sqrt, "sqrt", to_float, same, kF|kC, "Square root; complex inputs follow C99's branch cut.") \
  X(rsqrt, "rsqrt", to_float, same, kF, "1 / sqrt(x) for real floating arrays.") \
  X(cbrt, "cbrt", to_float, same, kF, "Cube root for real floating arrays.") \
  X(sin, "sin", to_float, same, kF|kC, "Sine (radians).") \
  X(cos, "cos", to_float, same, kF|kC, "Cosine (radians).") \
  X(tan, "tan", to_float, same, kF|kC, "Tangent (radians).") \
  X(arcsin, "asin", to_float, same, kF|kC, "Inverse sine (``arcsin``).") \
  X(arccos, "acos", to_float, same, kF|kC, "Inverse cosine (``arccos``).") \
  X(arctan, "atan", to_float, same, kF|kC, "Inverse tangent (``arctan``).") \
  X(sinh, "sinh", to_float, same, kF|kC, "Hyperbolic sine.") \
  X(cosh, "cosh", to_float, same, kF|kC, "Hyperbolic cosine.") \
  X(tanh, "tanh", to_float, same, kF|kC, "Hyperbolic tangent.") \
  X(arcsinh, "asinh", to_float, same, kF|kC, "Inverse hyperbolic sine (``arcsinh``).") \
  X(arccosh, "acosh", to_float, same, kF|kC, "Inverse hyperbolic cosine (``arccosh``).") \
  X(arctanh, "atanh", to_float, same, kF|kC, "Inverse hyperbolic tangent (``arctanh``).") \
  X(sigmoid, "sigmoid", to_float, same, kF, "1 / (1 + exp(-x)) for real floating arrays.") \
  X(relu, "relu", same, same, kI|kF, "max(x, 0) for integer and real floating arrays; NaN stays NaN.") \
  X(gelu, "gelu", to_float, same, kF, /* erf form: x * (1 + erf(x / sqrt(2))) / 2 */ \
    "x * (1 + erf(x / sqrt(2))) / 2 (the exact, erf form).") \
  X(erf, "erf", to_float, same, kF, "The error function, for real floating arrays.") \
  X(softplus, "softplus", to_float, same, kF, \
    "log(1 + exp(x)), computed as ``max(x, 0) + log1p(exp(-abs(x)))`` so that it does not overflow.") \
  X(floor, "floor", same, same, kI|kF, /* NumPy 2: ints stay ints */ \
    "Largest integer <= x; integer arrays stay integer (NumPy 2).") \
  X(ceil, "ceil", same, same, kI|kF, "Smallest integer >= x; integer arrays stay integer.") \
  X(trunc, "trunc", same, same, kI|kF, "x rounded toward zero; integer arrays stay integer.") \
  X(round, "round", same, same, kI|kF|kC, /* half to even; complex: each part */ \
    "x rounded to the nearest integer, half to even (as NumPy).") \
  X(isnan, "isnan", same, bool_, kAll, "True where x is NaN (either part, for complex).") \
  X(isinf, "isinf", same, bool_, kAll, "True where x is +-infinity (either part, for complex).") \
  X(isfinite, "isfinite", same, bool_, kAll, "True where x is neither NaN nor infinite.") \
  X(real, "real", same, real, kAll, "The real part (the array itself, copied, for real inputs).") \
  X(imag, "imag", same, real, kAll, "The imaginary part (zeros for real inputs).") \
  X(conj, "conj", same, same, kAll, "The complex conjugate (a copy for real inputs).") \
  X(angle, "angle", to_float, real, kF|kC, "The argument of a complex number, in radians; pi for negative reals.") \
  X(signbit, "signbit", to_float, bool_, kF, /* the sign bit, of -0 and NaN too */ \
    "True where the sign bit is set (also for -0.0 and negative NaNs).")

// The unary ops whose value is one formula on both backends: F(name, expression). The expression
// is C++ over one element `x` of the compute type `C` (every kind the op's row accepts; no
// complex), calling math functions by their plain C names (exp, log1p, erf, fabs, isnan, ...).
// The CPU loops expand it in place, where those names are <cmath>'s overloads (src/backend/cpu/
// elementwise_values.hpp); the CUDA backend compiles it as the device function tessel_ops::name,
// where they are CUDA's (src/backend/cuda/elementwise.cpp). So the row is the op's code on both,
// and the name must not be one of those math functions (the device function would call itself).
// Every op here has result `same` in its row above. Ops whose backends differ (complex numbers,
// special values a math library gets wrong, CUDA intrinsics) have an expression in each backend.
#define TESSEL_UNARY_FORMULAS(F) \
  F(sigmoid, C(1) / (C(1) + exp(-x))) \
  F(relu, isnan(x) ? x : (x > C(0) ? x : C(0))) \
  F(gelu, C(0.5) * x * (C(1) + erf(x * C(0.70710678118654752440)))) /* 0.7071... = 1/sqrt(2) */ \
  F(softplus, isnan(x) ? x : (x > C(0) ? x : C(0)) + log1p(exp(-fabs(x)))) /* max(x, 0) + log1p(exp(-|x|)) */

// NumPy's spellings of the functions above: X(alias, "python_name of the function"). The bindings
// bind the alias to the function, and the stubs and the API reference list it.
#define TESSEL_ELEMENTWISE_ALIASES(X) \
  X(arcsin, "asin") \
  X(arccos, "acos") \
  X(arctan, "atan") \
  X(arcsinh, "asinh") \
  X(arccosh, "acosh") \
  X(arctanh, "atanh") \
  X(bitwise_not, "bitwise_invert") \
  X(invert, "bitwise_invert") \
  X(absolute, "abs") \
  X(conjugate, "conj") \
  X(power, "pow") \
  X(arctan2, "atan2") \
  X(left_shift, "bitwise_left_shift") \
  X(right_shift, "bitwise_right_shift") \
  X(true_divide, "divide") \
  X(mod, "remainder")
