#pragma once
// Fusion: fuse(f, n) traces f once over n symbolic arrays (Sym) into one expression graph. Calling
// the result on arrays runs the whole graph as one generated CUDA kernel on a CUDA device; on the
// CPU, or with fusion switched off (set_fusion_enabled(false) or TESSEL_FUSION=0), it runs the
// same graph op by op through the ordinary elementwise ops. Both give the same dtypes and values:
// the fused kernel rounds every intermediate to its NumPy dtype, as the unfused ops do.
//
//   auto k = tessel::fuse([](const std::vector<tessel::Sym>& v) { return relu(v[0] * v[1] + v[2]); }, 3);
//   Array y = k({a, x, b});
//   std::cout << k.source({DType::float32, DType::float32, DType::float32});
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tessel/ops/elementwise.hpp"

namespace tessel {

// A symbolic array in a fuse() trace: an input, a Python-style (weak) scalar, or an op node.
class Sym {
 public:
  struct Node;
  Sym(Scalar value);  // NOLINT: implicit, so that x * 2 works
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Sym(T value) : Sym(Scalar(value)) {}  // NOLINT
  static Sym input(int index);
  static Sym apply(ElementwiseOp op, std::vector<Sym> args);
  const std::shared_ptr<const Node>& node() const { return node_; }

 private:
  Sym() = default;
  std::shared_ptr<const Node> node_;
};

struct Sym::Node {
  enum class Kind { input, scalar, op } kind;
  int index = 0;  // input
  Scalar value;   // scalar
  ElementwiseOp op = ElementwiseOp::add;
  std::vector<Sym> args;
};

// Per-kernel budgets of the CUDA path (see num_kernels).
constexpr int kFusedMaxArrays = 32;  // array operands, the output included
constexpr int kFusedMaxOps = 64;     // op nodes

class FusedKernel {
 public:
  FusedKernel(Sym root, int num_inputs);
  // Broadcasts the inputs; the result has the graph's NumPy dtype. `out` receives a copy.
  // CUDA: what does not depend on shapes (typing, partition, per kernel its operands and loaded
  // kernels) is kept per input-dtype vector, so a repeated call only plans and launches.
  Array operator()(const std::vector<Array>& inputs, const OptionalArray& out = std::nullopt,
                   const OptionalStream& stream = std::nullopt) const;
  // The same over `count` borrowed inputs: no Array copies (the Python binding's path).
  Array operator()(const Array* const* inputs, std::size_t count, const OptionalArray& out = std::nullopt,
                   const OptionalStream& stream = std::nullopt) const;
  // The CUDA source of the fused kernel for these input dtypes (contiguous layout); for a graph
  // split into several kernels, each of them in launch order under a "// ---- kernel i of n" line.
  std::string source(const std::vector<DType>& input_dtypes) const;
  // The dtype of the result for these input dtypes (DTypeError names the op that rejects them).
  DType result_dtype(const std::vector<DType>& input_dtypes) const;
  // Kernels one CUDA call launches: 1, or more where the graph exceeds kFusedMaxArrays array
  // operands or kFusedMaxOps op nodes per kernel and is split (intermediates materialized).
  int num_kernels() const;
  int num_inputs() const { return num_inputs_; }
  const Sym& root() const { return root_; }

 private:
  struct Plans;  // CUDA launch plans per input-dtype vector; shared by copies, thread-safe
  Sym root_;
  int num_inputs_;
  std::shared_ptr<Plans> plans_;
};

FusedKernel fuse(const std::function<Sym(const std::vector<Sym>&)>& f, int num_inputs);

// The switch: off runs fused graphs op by op. Default on, unless TESSEL_FUSION=0.
void set_fusion_enabled(bool enabled);
bool fusion_enabled();

// ---- the ops on Sym (same names as on Array) ----
#define TESSEL_SYM_BINARY(fn) \
  inline Sym fn(const Sym& a, const Sym& b) { return Sym::apply(ElementwiseOp::fn, {a, b}); }
#define TESSEL_SYM_UNARY(fn) \
  inline Sym fn(const Sym& a) { return Sym::apply(ElementwiseOp::fn, {a}); }
TESSEL_SYM_BINARY(add) TESSEL_SYM_BINARY(subtract) TESSEL_SYM_BINARY(multiply) TESSEL_SYM_BINARY(divide)
TESSEL_SYM_BINARY(floor_divide) TESSEL_SYM_BINARY(remainder) TESSEL_SYM_BINARY(power)
TESSEL_SYM_BINARY(equal) TESSEL_SYM_BINARY(not_equal) TESSEL_SYM_BINARY(less) TESSEL_SYM_BINARY(less_equal)
TESSEL_SYM_BINARY(greater) TESSEL_SYM_BINARY(greater_equal)
TESSEL_SYM_BINARY(logical_and) TESSEL_SYM_BINARY(logical_or) TESSEL_SYM_BINARY(logical_xor)
TESSEL_SYM_BINARY(bitwise_and) TESSEL_SYM_BINARY(bitwise_or) TESSEL_SYM_BINARY(bitwise_xor)
TESSEL_SYM_BINARY(left_shift) TESSEL_SYM_BINARY(right_shift)
TESSEL_SYM_BINARY(minimum) TESSEL_SYM_BINARY(maximum) TESSEL_SYM_BINARY(fmin) TESSEL_SYM_BINARY(fmax)
TESSEL_SYM_BINARY(hypot) TESSEL_SYM_BINARY(copysign) TESSEL_SYM_BINARY(logaddexp) TESSEL_SYM_BINARY(arctan2)
TESSEL_SYM_UNARY(negative) TESSEL_SYM_UNARY(positive) TESSEL_SYM_UNARY(abs) TESSEL_SYM_UNARY(logical_not)
TESSEL_SYM_UNARY(bitwise_not) TESSEL_SYM_UNARY(square) TESSEL_SYM_UNARY(reciprocal) TESSEL_SYM_UNARY(sign)
TESSEL_SYM_UNARY(exp) TESSEL_SYM_UNARY(exp2) TESSEL_SYM_UNARY(expm1) TESSEL_SYM_UNARY(log) TESSEL_SYM_UNARY(log2)
TESSEL_SYM_UNARY(log10) TESSEL_SYM_UNARY(log1p) TESSEL_SYM_UNARY(sqrt) TESSEL_SYM_UNARY(rsqrt) TESSEL_SYM_UNARY(cbrt)
TESSEL_SYM_UNARY(sin) TESSEL_SYM_UNARY(cos) TESSEL_SYM_UNARY(tan) TESSEL_SYM_UNARY(arcsin) TESSEL_SYM_UNARY(arccos)
TESSEL_SYM_UNARY(arctan) TESSEL_SYM_UNARY(sinh) TESSEL_SYM_UNARY(cosh) TESSEL_SYM_UNARY(tanh)
TESSEL_SYM_UNARY(arcsinh) TESSEL_SYM_UNARY(arccosh) TESSEL_SYM_UNARY(arctanh)
TESSEL_SYM_UNARY(sigmoid) TESSEL_SYM_UNARY(relu) TESSEL_SYM_UNARY(gelu) TESSEL_SYM_UNARY(erf) TESSEL_SYM_UNARY(softplus)
TESSEL_SYM_UNARY(floor) TESSEL_SYM_UNARY(ceil) TESSEL_SYM_UNARY(trunc) TESSEL_SYM_UNARY(round)
TESSEL_SYM_UNARY(isnan) TESSEL_SYM_UNARY(isinf) TESSEL_SYM_UNARY(isfinite)
TESSEL_SYM_UNARY(real) TESSEL_SYM_UNARY(imag) TESSEL_SYM_UNARY(conj) TESSEL_SYM_UNARY(angle)
TESSEL_SYM_UNARY(signbit)
#undef TESSEL_SYM_BINARY
#undef TESSEL_SYM_UNARY
inline Sym where(const Sym& c, const Sym& a, const Sym& b) { return Sym::apply(ElementwiseOp::where, {c, a, b}); }
inline Sym clip(const Sym& a, const Sym& lo, const Sym& hi) { return minimum(maximum(a, lo), hi); }

inline Sym operator+(const Sym& a, const Sym& b) { return add(a, b); }
inline Sym operator-(const Sym& a, const Sym& b) { return subtract(a, b); }
inline Sym operator*(const Sym& a, const Sym& b) { return multiply(a, b); }
inline Sym operator/(const Sym& a, const Sym& b) { return divide(a, b); }
inline Sym operator%(const Sym& a, const Sym& b) { return remainder(a, b); }
inline Sym operator<(const Sym& a, const Sym& b) { return less(a, b); }
inline Sym operator<=(const Sym& a, const Sym& b) { return less_equal(a, b); }
inline Sym operator>(const Sym& a, const Sym& b) { return greater(a, b); }
inline Sym operator>=(const Sym& a, const Sym& b) { return greater_equal(a, b); }
inline Sym operator-(const Sym& a) { return negative(a); }

}  // namespace tessel
