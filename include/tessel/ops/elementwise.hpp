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
#include "tessel/ops/elementwise_list.hpp"

namespace tessel {

// Every elementwise op; the backends and the dtype table are indexed by it.
#define TESSEL_ENUM_ENTRY(name, ...) name,
enum class ElementwiseOp : std::uint8_t {
  TESSEL_BINARY_OPS(TESSEL_ENUM_ENTRY)  // arity 2
  TESSEL_UNARY_OPS(TESSEL_ENUM_ENTRY)   // arity 1
  where,                                // arity 3
  count_                                // number of ops
};
#undef TESSEL_ENUM_ENTRY
constexpr int num_elementwise_ops = static_cast<int>(ElementwiseOp::count_);
#define TESSEL_COUNT_ENTRY(...) +1
constexpr int num_binary_elementwise_ops = 0 TESSEL_BINARY_OPS(TESSEL_COUNT_ENTRY);
#undef TESSEL_COUNT_ENTRY
// The number of inputs of `op`: 2 for the binary ops (first in the enum), 3 for where, else 1.
constexpr int elementwise_arity(ElementwiseOp op) {
  return op == ElementwiseOp::where ? 3 : (static_cast<int>(op) < num_binary_elementwise_ops ? 2 : 1);
}
const char* op_name(ElementwiseOp op);

using OptionalArray = std::optional<Array>;

#define TESSEL_DECLARE_BINARY(name, ...)                                                                  \
  Array name(const Array& a, const Array& b, const OptionalArray& out = std::nullopt,               \
             const OptionalStream& stream = std::nullopt);                                          \
  Array name(const Array& a, Scalar b, const OptionalArray& out = std::nullopt,                     \
             const OptionalStream& stream = std::nullopt);                                          \
  Array name(Scalar a, const Array& b, const OptionalArray& out = std::nullopt,                     \
             const OptionalStream& stream = std::nullopt);
#define TESSEL_DECLARE_UNARY(name, ...) \
  Array name(const Array& a, const OptionalArray& out = std::nullopt, const OptionalStream& stream = std::nullopt);

TESSEL_BINARY_OPS(TESSEL_DECLARE_BINARY)
TESSEL_UNARY_OPS(TESSEL_DECLARE_UNARY)

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
