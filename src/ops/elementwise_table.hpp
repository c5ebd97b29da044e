#pragma once
// The dtype table of the elementwise ops, expanded from the op list
// (include/tessel/ops/elementwise_list.hpp): the ops layer checks and promotes dtypes with it, and
// the CPU backend instantiates its loops for exactly the kinds it allows.
#include <array>
#include <cstdint>

#include "tessel/ops/elementwise.hpp"

namespace tessel::detail {

enum class Promote : std::uint8_t { same, bool_to_int8, true_divide, to_float };
enum class Result : std::uint8_t { same, bool_, real };

// The columns of include/tessel/ops/elementwise_list.hpp (their meaning is explained there).
enum : unsigned { kB = 1u, kI = 2u, kF = 4u, kC = 8u };
constexpr unsigned kAll = kB | kI | kF | kC;

struct OpInfo {
  ElementwiseOp op;
  const char* name;
  int arity;
  Promote promote;
  Result result;
  unsigned kinds;
};

// The one table of dtype support, from the op list.
#define TESSEL_BINARY_ROW(name, python_name, promote, result, kinds, doc) \
  {ElementwiseOp::name, #name, 2, Promote::promote, Result::result, kinds},
#define TESSEL_UNARY_ROW(name, python_name, promote, result, kinds, doc) \
  {ElementwiseOp::name, #name, 1, Promote::promote, Result::result, kinds},
constexpr std::array<OpInfo, num_elementwise_ops> op_table{{
    TESSEL_BINARY_OPS(TESSEL_BINARY_ROW)
    TESSEL_UNARY_OPS(TESSEL_UNARY_ROW)
    {ElementwiseOp::where, "where", 3, Promote::same, Result::same, kAll},
}};
#undef TESSEL_BINARY_ROW
#undef TESSEL_UNARY_ROW

constexpr bool op_table_in_enum_order() {
  for (int i = 0; i < num_elementwise_ops; ++i) {
    if (static_cast<int>(op_table[static_cast<std::size_t>(i)].op) != i) return false;
  }
  return true;
}
static_assert(op_table_in_enum_order(), "op_table must be indexed by ElementwiseOp");

constexpr unsigned op_kinds(ElementwiseOp op) { return op_table[static_cast<std::size_t>(op)].kinds; }

// A formula's value is stored as computed, in real arithmetic (the backends compile it so).
#define TESSEL_FORMULA_ROW_CHECK(name, expr)                                                      \
  static_assert(op_table[static_cast<std::size_t>(ElementwiseOp::name)].result == Result::same && \
                    (op_kinds(ElementwiseOp::name) & kC) == 0,                                     \
                #name ": a formula op (TESSEL_UNARY_FORMULAS) has result `same` and no kC");
TESSEL_UNARY_FORMULAS(TESSEL_FORMULA_ROW_CHECK)
#undef TESSEL_FORMULA_ROW_CHECK

}  // namespace tessel::detail
