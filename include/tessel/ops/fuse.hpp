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
//
// Several outputs: a function returning a std::vector<Sym> gives a kernel whose call_outputs()
// computes all of them in one kernel (CUDA) or one pass over blocks (CPU), each subexpression the
// outputs share computed once. Every output has the broadcast shape of all the inputs, as the
// single output does (so an output that reads fewer inputs is broadcast to the common shape), and
// its own NumPy dtype.
//
//   auto k2 = tessel::fuse([](const std::vector<tessel::Sym>& v) {
//     tessel::Sym s = sigmoid(v[0]);
//     return std::vector<tessel::Sym>{s * v[1], s * (1.0 - s)};
//   }, 2);
//   std::vector<Array> ys = k2.call_outputs({x, y});
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
  // Several outputs (at least one), computed together by call_outputs().
  FusedKernel(std::vector<Sym> roots, int num_inputs);
  // Broadcasts the inputs; the result has the graph's NumPy dtype. `out` receives a copy.
  // A kernel of several outputs is a ValueError here (use call_outputs).
  // CUDA: what does not depend on shapes (typing, partition, per kernel its operands and loaded
  // kernels) is kept per input-dtype vector, so a repeated call only plans and launches.
  Array operator()(const std::vector<Array>& inputs, const OptionalArray& out = std::nullopt,
                   const OptionalStream& stream = std::nullopt) const;
  // The same over `count` borrowed inputs: no Array copies (the Python binding's path).
  Array operator()(const Array* const* inputs, std::size_t count, const OptionalArray& out = std::nullopt,
                   const OptionalStream& stream = std::nullopt) const;
  // Every output, each of the inputs' broadcast shape and its own NumPy dtype: one kernel on CUDA
  // (several where the graph is split, as for one output), one pass over blocks on the CPU.
  std::vector<Array> call_outputs(const std::vector<Array>& inputs, const OptionalStream& stream = std::nullopt) const;
  std::vector<Array> call_outputs(const Array* const* inputs, std::size_t count,
                                  const OptionalStream& stream = std::nullopt) const;
  // The CUDA source of the fused kernel for these input dtypes (contiguous layout); for a graph
  // split into several kernels, each of them in launch order under a "// ---- kernel i of n" line.
  std::string source(const std::vector<DType>& input_dtypes) const;
  // The dtype of the result for these input dtypes (DTypeError names the op that rejects them);
  // of the first output for a kernel of several.
  DType result_dtype(const std::vector<DType>& input_dtypes) const;
  std::vector<DType> result_dtypes(const std::vector<DType>& input_dtypes) const;
  // Kernels one CUDA call launches: 1, or more where the graph exceeds kFusedMaxArrays array
  // operands or kFusedMaxOps op nodes per kernel and is split (intermediates materialized).
  int num_kernels() const;
  int num_inputs() const { return num_inputs_; }
  int num_outputs() const { return static_cast<int>(roots_.size()); }
  // Whether it was made from a vector of outputs (even of one): the Python binding returns a tuple.
  bool multi_output() const { return multi_; }
  const Sym& root() const { return roots_[0]; }
  const std::vector<Sym>& roots() const { return roots_; }

 private:
  struct Plans;  // CUDA launch plans per input-dtype vector; shared by copies, thread-safe
  std::vector<Sym> roots_;
  bool multi_ = false;
  int num_inputs_;
  std::shared_ptr<Plans> plans_;
};

FusedKernel fuse(const std::function<Sym(const std::vector<Sym>&)>& f, int num_inputs);
FusedKernel fuse(const std::function<std::vector<Sym>(const std::vector<Sym>&)>& f, int num_inputs);

// The switch: off runs fused graphs op by op. Default on, unless TESSEL_FUSION=0.
void set_fusion_enabled(bool enabled);
bool fusion_enabled();

// ---- the ops on Sym (same names as on Array) ----
#define TESSEL_SYM_BINARY(fn, ...) \
  inline Sym fn(const Sym& a, const Sym& b) { return Sym::apply(ElementwiseOp::fn, {a, b}); }
#define TESSEL_SYM_UNARY(fn, ...) \
  inline Sym fn(const Sym& a) { return Sym::apply(ElementwiseOp::fn, {a}); }
TESSEL_BINARY_OPS(TESSEL_SYM_BINARY)
TESSEL_UNARY_OPS(TESSEL_SYM_UNARY)
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
