// fuse(): the traced graph is typed with the same promotion rules as the eager ops, then either
// lowered to one jit expression (CUDA) or evaluated node by node (CPU, or fusion off).
#include "tessel/ops/cast.hpp"
#include "tessel/ops/fuse.hpp"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <variant>

#include "array/backend.hpp"
#include "backend/cpu/strided_loop.hpp"
#include "backend/cpu/threads.hpp"
#include "backend/elementwise.hpp"
#include "ops/elementwise_operands.hpp"
#include "ops/op_stream.hpp"
#include "core/inline_buffer.hpp"
#include "ops/checks.hpp"
#include "tessel/array/profile_args.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/jit/elementwise.hpp"

namespace tessel {

Sym::Sym(Scalar value) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::scalar;
  n->value = value;
  node_ = std::move(n);
}

Sym Sym::input(int index) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::input;
  n->index = index;
  Sym s;
  s.node_ = std::move(n);
  return s;
}

Sym Sym::apply(ElementwiseOp op, std::vector<Sym> args) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::op;
  n->op = op;
  n->args = std::move(args);
  Sym s;
  s.node_ = std::move(n);
  return s;
}

namespace {

std::atomic<int>& fusion_flag() {
  // -1: not read yet from TESSEL_FUSION.
  static std::atomic<int> flag{-1};
  return flag;
}

using Node = Sym::Node;

// Dtypes of every node for given input dtypes; scalars have none (they are weak).
struct Typing {
  const std::vector<DType>& inputs;
  std::map<const Node*, std::optional<DType>> result;  // nullopt: a scalar
  std::map<const Node*, DType> compute;                // op nodes

  std::optional<DType> type(const Node* n) {
    auto it = result.find(n);
    if (it != result.end()) return it->second;
    std::optional<DType> t;
    switch (n->kind) {
      case Node::Kind::scalar: break;
      case Node::Kind::input:
        if (n->index < 0 || n->index >= static_cast<int>(inputs.size())) {
          throw ValueError("fuse: input " + std::to_string(n->index) + " used, but " + std::to_string(inputs.size()) +
                           " inputs given");
        }
        t = inputs[static_cast<std::size_t>(n->index)];
        break;
      case Node::Kind::op: {
        const std::size_t first = n->op == ElementwiseOp::where ? 1 : 0;
        std::optional<DType> promoted;
        for (std::size_t k = 0; k < n->args.size(); ++k) {
          const auto at = type(n->args[k].node().get());
          if (k >= first && at) promoted = promoted ? result_type(*promoted, *at) : *at;
        }
        for (std::size_t k = first; k < n->args.size(); ++k) {
          const Node* a = n->args[k].node().get();
          if (a->kind == Node::Kind::scalar) {
            promoted = promoted ? result_type(*promoted, a->value.scalar_kind()) : a->value.default_dtype();
          }
        }
        const detail::ElementwiseTypes ty = detail::elementwise_types(n->op, *promoted);
        compute[n] = ty.compute;
        t = ty.result;
        break;
      }
    }
    result[n] = t;
    return t;
  }
};

void check_arity(const Node* n) {
  if (n->kind != Node::Kind::op) return;
  const std::size_t want = static_cast<std::size_t>(elementwise_arity(n->op));
  if (n->args.size() != want) {
    throw ValueError(std::string("fuse: ") + op_name(n->op) + " takes " + std::to_string(want) + " arguments, got " +
                     std::to_string(n->args.size()));
  }
  for (const Sym& a : n->args) check_arity(a.node().get());
}

// ---- splitting a graph into kernels ------------------------------------------------------------
// One generated kernel takes at most kFusedMaxArrays array operands (the strided layout passes a
// pointer and up to 12 strides per operand: 32 of them stay under CUDA's 4 KB of kernel
// parameters) and at most kFusedMaxOps op nodes (bounds the expression size and the registers).
// A graph beyond either is cut: post-order, a node whose region (the op nodes a kernel rooted at
// it would compute, and the leaves it would read) would exceed a budget gets its op arguments
// materialized as kernels of their own, which become leaves of its region.
struct Partition {
  std::set<const Node*> cut;  // op nodes computed by a kernel of their own (the root always is)
  struct Region {
    std::set<const Node*> ops;
    std::set<const Node*> leaves;  // inputs and cut nodes
  };
  std::map<const Node*, Region> region;

  const Region& visit(const Node* n) {
    auto it = region.find(n);
    if (it != region.end()) return it->second;
    Region r;
    if (n->kind == Node::Kind::input) {
      r.leaves.insert(n);
    } else if (n->kind == Node::Kind::op) {
      r.ops.insert(n);
      auto merge_args = [&](Region& into) {
        for (const Sym& a : n->args) {
          const Node* an = a.node().get();
          const Region& ar = visit(an);
          if (cut.count(an)) {
            into.leaves.insert(an);
          } else {
            into.ops.insert(ar.ops.begin(), ar.ops.end());
            into.leaves.insert(ar.leaves.begin(), ar.leaves.end());
          }
        }
      };
      merge_args(r);
      // Over budget: cut the largest uncut op argument, then the next, until the region fits
      // (with every op argument cut it holds one op and at most 3 leaves).
      while (static_cast<int>(r.ops.size()) > kFusedMaxOps || static_cast<int>(r.leaves.size()) > kFusedMaxArrays - 1) {
        const Node* largest = nullptr;
        std::size_t largest_size = 0;
        for (const Sym& a : n->args) {
          const Node* an = a.node().get();
          if (an->kind != Node::Kind::op || cut.count(an)) continue;
          const Region& ar = region.at(an);
          const std::size_t size = ar.ops.size() + ar.leaves.size();
          if (!largest || size > largest_size) largest = an, largest_size = size;
        }
        if (!largest) break;
        cut.insert(largest);
        r = Region{};
        r.ops.insert(n);
        merge_args(r);
      }
    }
    return region.emplace(n, std::move(r)).first->second;
  }
};

// The kernels of a graph of several outputs: one partition over all of them (a node cut for one
// output is materialized once for all), then one kernel computing every output that is not itself
// cut, when their regions together fit one kernel's budgets (each output takes an array operand);
// otherwise one kernel per such output.
struct MultiLayout {
  Partition part;
  std::vector<const Node*> kernel_roots;  // outputs a final kernel computes (not cut), deduplicated
  bool merged = false;                     // kernel_roots in one kernel
  std::set<const Node*> leaves;            // merged: the kernel's array inputs

  explicit MultiLayout(const std::vector<Sym>& roots) {
    for (const Sym& r : roots) part.visit(r.node().get());
    std::set<const Node*> ops;
    for (const Sym& r : roots) {
      const Node* n = r.node().get();
      if (n->kind == Node::Kind::scalar || part.cut.count(n)) continue;
      if (std::find(kernel_roots.begin(), kernel_roots.end(), n) != kernel_roots.end()) continue;
      kernel_roots.push_back(n);
      const Partition::Region& region = part.region.at(n);
      ops.insert(region.ops.begin(), region.ops.end());
      leaves.insert(region.leaves.begin(), region.leaves.end());
    }
    merged = !kernel_roots.empty() && static_cast<int>(ops.size()) <= kFusedMaxOps &&
             static_cast<int>(leaves.size() + kernel_roots.size()) <= kFusedMaxArrays;
  }
  int num_kernels() const {
    return static_cast<int>(part.cut.size()) + (merged ? 1 : static_cast<int>(kernel_roots.size()));
  }
};

// The CUDA launch plan of a graph for one input-dtype vector: everything a call needs that does
// not depend on shapes. Immutable once built.
struct FusedPlan {
  struct Region {
    std::vector<const Node*> leaves;  // the kernel's array inputs in order: graph inputs and cut nodes
    DType result = DType::float32;
    std::unique_ptr<jit::ElementwiseLauncher> launcher;
  };
  std::map<const Node*, Region> regions;  // the root's and every cut node's kernel
  // Several outputs: the kernel computing MultiLayout::kernel_roots together, when merged (the
  // roots then have no Region of their own unless cut).
  struct Merged {
    std::vector<const Node*> leaves;
    std::vector<const Node*> outputs;
    std::vector<DType> results;
    std::unique_ptr<jit::ElementwiseLauncher> launcher;
  };
  std::unique_ptr<Merged> merged;
};

// The broadcast shape of `count` arrays, without copying their shapes into a vector.
Shape common_shape(const Array* const* arrays, std::size_t count) {
  detail::InlineBuffer<const Shape*, 16> shapes(count);
  for (std::size_t i = 0; i < count; ++i) shapes[i] = &arrays[i]->shape();
  return broadcast_shape_list(shapes.data(), count, "fused");
}

// ---- CUDA: the graph as generated kernels (the expressions of backend/cuda/elementwise.cpp) ----
// The value of a scalar in compute dtype `ct`, as a literal of the body's type.
std::string literal_code(const Scalar& s, DType ct) {
  const std::string type =
      (ct == DType::float16 || ct == DType::bfloat16) ? std::string("float") : std::string(cuda_type_name(ct));
  char buf[96];
  if (is_complex(ct)) {
    const std::complex<double> v = s.to_complex();
    std::uint64_t re = 0, im = 0;
    std::memcpy(&re, &v, 8);
    const double vi = v.imag();
    std::memcpy(&im, &vi, 8);
    std::snprintf(buf, sizeof buf, "%s(__longlong_as_double(0x%016" PRIx64 "LL), __longlong_as_double(0x%016" PRIx64 "LL))",
                  type.c_str(), re, im);
  } else if (is_floating(ct)) {
    // Exact bits, so NaN and Inf need no special spelling.
    const double v = s.to_double();
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, 8);
    std::snprintf(buf, sizeof buf, "((%s)__longlong_as_double(0x%016" PRIx64 "LL))", type.c_str(), bits);
  } else if (is_bool(ct)) {
    return s.to_bool() ? "true" : "false";
  } else if (s.kind() == Scalar::Kind::uint_) {
    std::snprintf(buf, sizeof buf, "((%s)%" PRIu64 "ULL)", type.c_str(), s.to_uint64());
  } else {
    std::snprintf(buf, sizeof buf, "((%s)(%" PRId64 "LL))", type.c_str(), s.to_int64());
  }
  return buf;
}

// The graph as one jit expression; every op node rounds to its NumPy result dtype, as eager ops do.
// `leaves` (optional) maps the region's leaves (inputs or cut nodes) to kernel input positions;
// without it the whole graph is one kernel over the graph inputs.
jit::Expr lower(const Node* n, Typing& typing, std::map<const Node*, jit::Expr>& memo,
                const std::map<const Node*, int>* leaves = nullptr) {
  auto it = memo.find(n);
  if (it != memo.end()) return it->second;
  jit::Expr e = jit::Expr::input(0, DType::bool_);
  if (leaves && leaves->count(n)) {
    e = jit::Expr::input(leaves->at(n), *typing.type(n));
  } else if (n->kind == Node::Kind::input) {
    e = jit::Expr::input(n->index, *typing.type(n));
  } else {
    const DType rt = *typing.type(n);
    const DType ct = typing.compute.at(n);
    std::vector<jit::Expr> args;
    for (std::size_t k = 0; k < n->args.size(); ++k) {
      const Node* a = n->args[k].node().get();
      const DType want = (n->op == ElementwiseOp::where && k == 0) ? DType::bool_ : ct;
      if (a->kind == Node::Kind::scalar) {
        args.push_back(jit::Expr::literal(literal_code(a->value, want), want));
      } else {
        jit::Expr x = lower(a, typing, memo, leaves);
        args.push_back(x.dtype() == want ? x : jit::Expr::cast(x, want));
      }
    }
    e = backend::cuda::op_expression(n->op, args, rt);
  }
  memo.emplace(n, e);
  return e;
}

jit::ElementwiseSpec fused_spec(const Sym& root, const std::vector<DType>& input_dtypes, DType& result) {
  if (root.node()->kind == Node::Kind::scalar) throw ValueError("fuse: the traced function returned a constant");
  Typing typing{input_dtypes, {}, {}};
  result = *typing.type(root.node().get());
  std::map<const Node*, jit::Expr> memo;
  const jit::Expr e = lower(root.node().get(), typing, memo);
  jit::ElementwiseSpec spec = jit::lower_expressions("tessel_fused", input_dtypes, {}, {e}, {result});
  spec.preamble = backend::cuda::elementwise_preamble();
  return spec;
}
// Builds the launch plan of a graph for its input dtypes: the typing (DTypeError names the op
// that rejects them), the partition, and per kernel its leaves, result dtype and launcher.
std::shared_ptr<const FusedPlan> make_plan(const Node* root, const std::vector<DType>& input_dtypes) {
  Typing typing{input_dtypes, {}, {}};
  typing.type(root);  // types every node
  Partition part;
  part.visit(root);
  auto plan = std::make_shared<FusedPlan>();
  auto add_region = [&](const Node* n) {
    const Partition::Region& region = part.region.at(n);
    FusedPlan::Region r;
    r.leaves.assign(region.leaves.begin(), region.leaves.end());
    std::map<const Node*, int> leaf_index;
    std::vector<DType> leaf_dtypes;
    for (const Node* leaf : r.leaves) {
      leaf_index[leaf] = static_cast<int>(leaf_dtypes.size());
      leaf_dtypes.push_back(*typing.type(leaf));  // an input's dtype, or a cut node's result dtype
    }
    std::map<const Node*, jit::Expr> memo;
    const jit::Expr e = lower(n, typing, memo, &leaf_index);
    r.result = *typing.type(n);
    jit::ElementwiseSpec spec = jit::lower_expressions("tessel_fused", leaf_dtypes, {}, {e}, {r.result});
    spec.preamble = backend::cuda::elementwise_preamble();
    r.launcher = std::make_unique<jit::ElementwiseLauncher>(std::move(spec));
    plan->regions.emplace(n, std::move(r));
  };
  add_region(root);
  for (const Node* n : part.cut) add_region(n);
  return plan;
}

// The plan of a graph of several outputs (see MultiLayout).
std::shared_ptr<const FusedPlan> make_multi_plan(const std::vector<Sym>& roots, const std::vector<DType>& input_dtypes) {
  Typing typing{input_dtypes, {}, {}};
  for (const Sym& r : roots) {
    if (r.node()->kind == Node::Kind::scalar) throw ValueError("fuse: an output of the traced function is a constant");
    typing.type(r.node().get());
  }
  const MultiLayout layout(roots);
  auto plan = std::make_shared<FusedPlan>();
  // Kernels of one output each: every cut node, and the outputs when they are not merged.
  auto add_region = [&](const Node* n) {
    const Partition::Region& region = layout.part.region.at(n);
    FusedPlan::Region r;
    r.leaves.assign(region.leaves.begin(), region.leaves.end());
    std::map<const Node*, int> leaf_index;
    std::vector<DType> leaf_dtypes;
    for (const Node* leaf : r.leaves) {
      leaf_index[leaf] = static_cast<int>(leaf_dtypes.size());
      leaf_dtypes.push_back(*typing.type(leaf));
    }
    std::map<const Node*, jit::Expr> memo;
    const jit::Expr e = lower(n, typing, memo, &leaf_index);
    r.result = *typing.type(n);
    jit::ElementwiseSpec spec = jit::lower_expressions("tessel_fused", leaf_dtypes, {}, {e}, {r.result});
    spec.preamble = backend::cuda::elementwise_preamble();
    r.launcher = std::make_unique<jit::ElementwiseLauncher>(std::move(spec));
    plan->regions.emplace(n, std::move(r));
  };
  for (const Node* n : layout.part.cut) add_region(n);
  if (!layout.merged) {
    for (const Node* n : layout.kernel_roots) add_region(n);
    return plan;
  }
  auto m = std::make_unique<FusedPlan::Merged>();
  m->leaves.assign(layout.leaves.begin(), layout.leaves.end());
  m->outputs = layout.kernel_roots;
  std::map<const Node*, int> leaf_index;
  std::vector<DType> leaf_dtypes;
  for (const Node* leaf : m->leaves) {
    leaf_index[leaf] = static_cast<int>(leaf_dtypes.size());
    leaf_dtypes.push_back(*typing.type(leaf));
  }
  // One memo for all outputs: a subexpression they share is one node, emitted once.
  std::map<const Node*, jit::Expr> memo;
  std::vector<jit::Expr> exprs;
  for (const Node* n : m->outputs) {
    exprs.push_back(lower(n, typing, memo, &leaf_index));
    m->results.push_back(*typing.type(n));
  }
  jit::ElementwiseSpec spec = jit::lower_expressions("tessel_fused", leaf_dtypes, {}, exprs, m->results);
  spec.preamble = backend::cuda::elementwise_preamble();
  m->launcher = std::make_unique<jit::ElementwiseLauncher>(std::move(spec));
  plan->merged = std::move(m);
  return plan;
}

// The results of a split graph's cut nodes, computed once per call (std::map: stable references).
using Materialized = std::map<const Node*, Array>;

Array run_region(const Node* n, const FusedPlan& plan, const Array* const* inputs, const Stream& s,
                 Materialized& done);

// The array a kernel reads for `leaf`: an input, or a cut node's result, run once (kept in `done`,
// whose nodes do not move, so the pointer stays valid).
const Array* leaf_array(const Node* leaf, const FusedPlan& plan, const Array* const* inputs, const Stream& s,
                        Materialized& done) {
  if (leaf->kind == Node::Kind::input) return inputs[static_cast<std::size_t>(leaf->index)];
  auto it = done.find(leaf);
  if (it == done.end()) it = done.emplace(leaf, run_region(leaf, plan, inputs, s, done)).first;
  return &it->second;
}

// Runs the kernel of the region rooted at `n` (materializing the cut nodes it reads first) and
// returns its result, broadcast over its leaves' shapes. Inputs and leaves are borrowed, and the
// kernel gets views of their strides: a one-kernel call copies no Array and no strides.
Array run_region(const Node* n, const FusedPlan& plan, const Array* const* inputs, const Stream& s,
                 Materialized& done) {
  const FusedPlan::Region& region = plan.regions.at(n);
  const std::size_t count = region.leaves.size();
  detail::InlineBuffer<const Array*, 16> leaves(count);
  for (std::size_t k = 0; k < count; ++k) leaves[k] = leaf_array(region.leaves[k], plan, inputs, s, done);
  const Shape shape = common_shape(leaves.data(), count);
  Array result = detail::allocate_array(shape, region.result, s.device(), s);
  std::vector<Array> broadcast;  // views of leaves of another shape, alive for the launch
  detail::InlineBuffer<jit::ElementwiseArgView, 16> args(count + 1);
  args[0] = {result.data(), result.strides().data(), result.strides().size(), nullptr};
  for (std::size_t k = 0; k < count; ++k) {
    const Array* a = leaves[k];
    a->storage()->wait_on_stream(s);
    if (a->shape() != shape) {
      if (broadcast.empty()) broadcast.reserve(count);  // no reallocation: `a` points into it
      broadcast.push_back(a->broadcast_to(shape));
      a = &broadcast.back();
    }
    args[k + 1] = {a->data(), a->strides().data(), a->strides().size(), nullptr};
  }
  if (result.size() > 0) region.launcher->launch(shape, args.data(), count + 1, s.device(), s);
  result.storage()->record_pending_write(s);
  return result;
}

// Every output of a multi-output plan at `shape` (the inputs' broadcast shape): the merged kernel
// launches at that shape directly, so its outputs need no broadcast afterwards.
std::vector<Array> run_outputs(const std::vector<Sym>& roots, const FusedPlan& plan, const Array* const* inputs,
                               const Shape& shape, const Stream& s) {
  Materialized done;
  std::map<const Node*, Array> computed;  // per distinct output node
  if (plan.merged) {
    const FusedPlan::Merged& m = *plan.merged;
    const std::size_t n_out = m.outputs.size();
    const std::size_t count = m.leaves.size();
    std::vector<const Array*> leaves(count);
    for (std::size_t k = 0; k < count; ++k) leaves[k] = leaf_array(m.leaves[k], plan, inputs, s, done);
    std::vector<Array> outs;
    outs.reserve(n_out);
    for (std::size_t j = 0; j < n_out; ++j) outs.push_back(detail::allocate_array(shape, m.results[j], s.device(), s));
    std::vector<Array> broadcast;
    broadcast.reserve(count);  // no reallocation: pointers into it stay valid
    std::vector<jit::ElementwiseArgView> args(n_out + count);
    for (std::size_t j = 0; j < n_out; ++j) {
      args[j] = {outs[j].data(), outs[j].strides().data(), outs[j].strides().size(), nullptr};
    }
    for (std::size_t k = 0; k < count; ++k) {
      const Array* a = leaves[k];
      a->storage()->wait_on_stream(s);
      if (a->shape() != shape) {
        broadcast.push_back(a->broadcast_to(shape));
        a = &broadcast.back();
      }
      args[n_out + k] = {a->data(), a->strides().data(), a->strides().size(), nullptr};
    }
    if (numel(shape) > 0) m.launcher->launch(shape, args.data(), args.size(), s.device(), s);
    for (std::size_t j = 0; j < n_out; ++j) {
      outs[j].storage()->record_pending_write(s);
      computed.emplace(m.outputs[j], std::move(outs[j]));
    }
  }
  std::vector<Array> results;
  results.reserve(roots.size());
  std::set<const Node*> used;
  for (const Sym& r : roots) {
    const Node* n = r.node().get();
    auto it = computed.find(n);
    if (it == computed.end()) {
      // A cut output (materialized already, or now), or one kernel per output when not merged.
      auto d = done.find(n);
      Array v = d != done.end() ? d->second : run_region(n, plan, inputs, s, done);
      done.emplace(n, v);
      if (v.shape() != shape) v = v.broadcast_to(shape).contiguous(s);
      it = computed.emplace(n, std::move(v)).first;
    }
    // The same node returned twice gives two arrays, as two expressions would.
    results.push_back(used.insert(n).second ? it->second : it->second.copy(s));
  }
  return results;
}

using Value = std::variant<Array, Scalar>;

Value evaluate(const Node* n, const std::vector<Array>& inputs, const OptionalStream& stream,
               std::map<const Node*, Value>& memo) {
  auto it = memo.find(n);
  if (it != memo.end()) return it->second;
  Value v;
  switch (n->kind) {
    case Node::Kind::input: v = inputs[static_cast<std::size_t>(n->index)]; break;
    case Node::Kind::scalar: v = n->value; break;
    case Node::Kind::op: {
      std::vector<detail::ElementwiseOperand> operands;
      for (const Sym& a : n->args) {
        const Value av = evaluate(a.node().get(), inputs, stream, memo);
        if (std::holds_alternative<Array>(av)) {
          operands.push_back({std::get<Array>(av), std::nullopt});
        } else {
          operands.push_back({Array(), std::get<Scalar>(av)});
        }
      }
      v = detail::elementwise_operands(n->op, std::move(operands), std::nullopt, stream);
      break;
    }
  }
  memo.emplace(n, v);
  return v;
}

// CPU, fusion on: the graph runs block by block (about kCpuFusedBlock elements at a time)
// through the same op loops, so a block's intermediates stay in cache instead of streaming whole
// arrays through memory once per op. Blocks are slices along one axis (the outermost one whose
// inner size fits a block) under fixed indices of the axes before it.
constexpr std::int64_t kCpuFusedBlock = 32768;  // 128 KiB per float32 operand: a block's values stay in L2

// Several outputs share one memo per block, so a subexpression they share is computed once per
// block. Below one block the results keep the shapes the ops give (the caller broadcasts them).
std::vector<Array> evaluate_blocked(const Node* const* roots, std::size_t num_roots, const std::vector<Array>& inputs,
                                    const Shape& shape, const std::vector<DType>& rts, const OptionalStream& stream) {
  auto whole = [&](const std::vector<Array>& in) {
    std::map<const Node*, Value> memo;
    std::vector<Array> values;
    values.reserve(num_roots);
    for (std::size_t j = 0; j < num_roots; ++j) {
      const Value v = evaluate(roots[j], in, stream, memo);
      if (!std::holds_alternative<Array>(v)) throw ValueError("fuse: the traced function returned a constant");
      values.push_back(std::get<Array>(v));
    }
    return values;
  };
  const std::int64_t total = numel(shape);
  if (total <= kCpuFusedBlock) return whole(inputs);
  const int ndim = static_cast<int>(shape.size());
  int axis = ndim - 1;
  std::int64_t inner = 1;  // elements per index of `axis`
  while (axis > 0 && inner * shape[static_cast<std::size_t>(axis)] <= kCpuFusedBlock) {
    inner *= shape[static_cast<std::size_t>(axis)];
    --axis;
  }
  const std::int64_t chunk = std::max<std::int64_t>(1, kCpuFusedBlock / inner);
  std::vector<Array> full;
  for (const Array& a : inputs) full.push_back(a.broadcast_to(shape));
  std::vector<Array> results;
  results.reserve(num_roots);
  for (std::size_t j = 0; j < num_roots; ++j) results.push_back(empty(shape, rts[j], Device::cpu()));
  // Work items: (flat index over the axes before `axis`, start along `axis`).
  const std::int64_t extent = shape[static_cast<std::size_t>(axis)];
  const std::int64_t per_row = (extent + chunk - 1) / chunk;
  std::int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[static_cast<std::size_t>(d)];
  const std::int64_t items = outer * per_row;
  // Blocks run in parallel, each on one thread: the ops inside a block stay serial (nested
  // regions are inactive), so no block pays a fork and join per op.
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const int threads = backend::cpu::loop_threads(items, 1);
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads) if (threads > 1)
  for (std::int64_t item = 0; item < items; ++item) {
    try {
      const std::int64_t start = (item % per_row) * chunk;
      const std::int64_t stop = std::min(start + chunk, extent);
      std::int64_t rest = item / per_row;
      std::vector<std::int64_t> index(static_cast<std::size_t>(axis), 0);
      for (int d = axis - 1; d >= 0; --d) {
        index[static_cast<std::size_t>(d)] = rest % shape[static_cast<std::size_t>(d)];
        rest /= shape[static_cast<std::size_t>(d)];
      }
      auto cut = [&](Array v) {
        for (int d = 0; d < axis; ++d) v = v.slice(d, Slice(index[static_cast<std::size_t>(d)], index[static_cast<std::size_t>(d)] + 1));
        return v.slice(axis, Slice(start, stop));
      };
      std::vector<Array> block(full.size());
      for (std::size_t k = 0; k < full.size(); ++k) block[k] = cut(full[k]);
      const std::vector<Array> values = whole(block);
      for (std::size_t j = 0; j < num_roots; ++j) {
        const Array target = cut(results[j]);
        const Array& value = values[j];
        copyto(target, value.shape() == target.shape() ? value : value.broadcast_to(target.shape()), stream);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return results;
}

// ---- CPU, fusion on: the graph as a program over chunks ---------------------------------------
// The typed graph becomes a list of steps, each one backend kernel (backend::cpu::elementwise_kernel,
// or a cast where an argument's dtype is not the op's compute dtype, as the eager op's astype). The
// output shape's collapsed layout is walked in runs on the threads (strided_loop.hpp), and each run
// in chunks of kCpuChunk elements: inputs are read in place (any stride, 0 for a broadcast one),
// every intermediate lives in a per-thread buffer of one chunk (in cache), and the outputs are
// written once. The kernels are the eager ops' own, so the results are those of op-by-op
// evaluation bit for bit. Graphs it does not take (an integer op with a Python int, whose range the
// eager op checks; more operands than kMaxProgramOperands) run evaluate_blocked below.
constexpr std::int64_t kCpuChunk = 1024;
constexpr std::size_t kMaxProgramOperands = 64;

struct CpuProgram {
  struct Slot {
    enum class Kind { input, constant, temp } kind;
    int index;  // input: the input's index; constant: into constants; temp: the temp buffer's index
    DType dtype;
  };
  struct Step {
    backend::cpu::ElementwiseKernel kernel = nullptr;  // an op, or
    backend::cpu::CastKernel cast = nullptr;           // a cast of args[0] to result's dtype
    int args[3] = {-1, -1, -1};
    int nargs = 0;
    int result = -1;
  };
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<Array> constants;  // 0-d arrays: the scalars in the dtype each use needs
  std::vector<int> roots;        // the slot of each output
  std::vector<int> inputs;       // the graph inputs read, in operand order after the outputs
  int temps = 0;
  std::int64_t grain = backend::cpu::kMinElementsPerThread;
};

// The program of `roots` for input dtypes `dtypes`, or nullptr where evaluate_blocked must run it
// (a constant or an input as an output, an integer op with a Python int, any error: that path
// raises it as the eager op would).
std::shared_ptr<const CpuProgram> make_cpu_program(const Node* const* roots, std::size_t num_roots,
                                                   const std::vector<DType>& dtypes) {
  try {
    auto prog = std::make_shared<CpuProgram>();
    Typing typing{dtypes, {}, {}};
    std::map<const Node*, int> slot_of;
    std::map<std::pair<int, DType>, int> cast_of;  // (slot, dtype) -> its cast's slot
    std::map<int, int> input_operand;              // input index -> slot
    bool ok = true;
    auto temp = [&](DType dtype) {
      prog->slots.push_back({CpuProgram::Slot::Kind::temp, prog->temps++, dtype});
      return static_cast<int>(prog->slots.size()) - 1;
    };
    auto as_dtype = [&](int slot, DType want) {
      if (prog->slots[static_cast<std::size_t>(slot)].dtype == want) return slot;
      auto it = cast_of.find({slot, want});
      if (it != cast_of.end()) return it->second;
      CpuProgram::Step step;
      step.cast = backend::cpu::cast_kernel(want, prog->slots[static_cast<std::size_t>(slot)].dtype);
      step.args[0] = slot;
      step.nargs = 1;
      step.result = temp(want);
      prog->steps.push_back(step);
      cast_of.emplace(std::make_pair(slot, want), step.result);
      return step.result;
    };
    std::function<int(const Node*)> visit = [&](const Node* n) -> int {
      auto it = slot_of.find(n);
      if (it != slot_of.end()) return it->second;
      int slot = -1;
      if (n->kind == Node::Kind::input) {
        auto in = input_operand.find(n->index);
        if (in != input_operand.end()) {
          slot = in->second;
        } else {
          prog->slots.push_back({CpuProgram::Slot::Kind::input, n->index, dtypes[static_cast<std::size_t>(n->index)]});
          slot = static_cast<int>(prog->slots.size()) - 1;
          input_operand.emplace(n->index, slot);
          prog->inputs.push_back(n->index);
        }
      } else if (n->kind == Node::Kind::op) {
        typing.type(n);
        const DType compute = typing.compute.at(n);
        const DType result = *typing.result.at(n);
        CpuProgram::Step step;
        step.nargs = static_cast<int>(n->args.size());
        for (int k = 0; k < step.nargs; ++k) {
          const Node* a = n->args[static_cast<std::size_t>(k)].node().get();
          const DType want = (n->op == ElementwiseOp::where && k == 0) ? DType::bool_ : compute;
          if (a->kind == Node::Kind::scalar) {
            if (is_integer(compute) && (a->value.kind() == Scalar::Kind::int_ || a->value.kind() == Scalar::Kind::uint_)) {
              ok = false;  // the eager op checks the int's range (and may compare in a wider dtype)
              return -1;
            }
            prog->constants.push_back(full({}, a->value, want, Device::cpu()));
            prog->slots.push_back({CpuProgram::Slot::Kind::constant, static_cast<int>(prog->constants.size()) - 1, want});
            step.args[k] = static_cast<int>(prog->slots.size()) - 1;
          } else {
            const int arg = visit(a);
            if (!ok) return -1;
            step.args[k] = as_dtype(arg, want);
          }
        }
        step.kernel = backend::cpu::elementwise_kernel(n->op, compute);
        prog->grain = std::min(prog->grain, backend::cpu::elementwise_grain(n->op, compute));
        step.result = temp(result);
        prog->steps.push_back(step);
        slot = step.result;
      } else {
        ok = false;  // a constant output
      }
      slot_of.emplace(n, slot);
      return slot;
    };
    for (std::size_t j = 0; j < num_roots && ok; ++j) {
      if (roots[j]->kind != Node::Kind::op) return nullptr;
      const int slot = visit(roots[j]);
      if (!ok) return nullptr;
      prog->roots.push_back(slot);
    }
    if (num_roots + prog->inputs.size() > kMaxProgramOperands) return nullptr;
    return prog;
  } catch (const Error&) {
    return nullptr;
  }
}

// Runs `prog` over the broadcast shape of `inputs` into new arrays of dtypes `rts`.
std::vector<Array> run_cpu_program(const CpuProgram& prog, const std::vector<Array>& inputs, const Shape& shape,
                                   const std::vector<DType>& rts) {
  const std::size_t num_roots = prog.roots.size();
  std::vector<Array> results;
  results.reserve(num_roots);
  for (std::size_t j = 0; j < num_roots; ++j) results.push_back(empty(shape, rts[j], Device::cpu()));
  if (numel(shape) == 0) return results;
  // Operands: the outputs, then the inputs read, broadcast to the shape.
  std::vector<Array> operands;
  for (const int index : prog.inputs) {
    Array a = inputs[static_cast<std::size_t>(index)];
    a.wait();
    operands.push_back(a.shape() == shape ? a : a.broadcast_to(shape));
  }
  std::vector<Strides> strides;
  for (const Array& r : results) strides.push_back(r.strides());
  for (const Array& a : operands) strides.push_back(a.strides());
  const CollapsedDims dims = collapse_dims(shape, strides);
  const std::size_t nops = strides.size();
  std::vector<char*> base(nops);
  std::vector<std::int64_t> size(nops), inner(nops);
  for (std::size_t k = 0; k < nops; ++k) {
    const Array& a = k < num_roots ? results[k] : operands[k - num_roots];
    base[k] = static_cast<char*>(const_cast<void*>(a.data()));
    size[k] = itemsize(a.dtype());
    inner[k] = dims.strides[k].back();
  }
  // Where each input slot is among the operands.
  std::vector<int> operand_of_slot(prog.slots.size(), -1);
  for (std::size_t i = 0; i < prog.inputs.size(); ++i) {
    for (std::size_t s = 0; s < prog.slots.size(); ++s) {
      if (prog.slots[s].kind == CpuProgram::Slot::Kind::input && prog.slots[s].index == prog.inputs[i]) {
        operand_of_slot[s] = static_cast<int>(num_roots + i);
      }
    }
  }
  std::int64_t total = 1;
  for (const std::int64_t extent : dims.shape) total *= extent;
  const int threads = backend::cpu::loop_threads(total, prog.grain);
  constexpr std::int64_t kSlotBytes = kCpuChunk * 16;  // the widest dtype (complex128)
  std::vector<backend::cpu::CastKernel> store(num_roots);
  for (std::size_t j = 0; j < num_roots; ++j) {
    store[j] = backend::cpu::cast_kernel(rts[j], prog.slots[static_cast<std::size_t>(prog.roots[j])].dtype);
  }
  backend::cpu::for_each_run_of<kMaxProgramOperands>(dims, nops, threads, [&](const std::int64_t* off, std::int64_t count) {
    // Per thread: the temps' chunks, and each slot's address and stride in the current chunk.
    thread_local std::vector<char> scratch;
    thread_local std::vector<const void*> ptr;
    thread_local std::vector<std::int64_t> stride;
    const std::size_t need = static_cast<std::size_t>(std::max(prog.temps, 1)) * kSlotBytes;
    if (scratch.size() < need) scratch.resize(need);
    ptr.resize(prog.slots.size());
    stride.resize(prog.slots.size());
    for (std::int64_t first = 0; first < count; first += kCpuChunk) {
      const std::int64_t m = std::min(kCpuChunk, count - first);
      for (std::size_t s = 0; s < prog.slots.size(); ++s) {
        const CpuProgram::Slot& slot = prog.slots[s];
        switch (slot.kind) {
          case CpuProgram::Slot::Kind::input: {
            const int k = operand_of_slot[s];
            ptr[s] = base[static_cast<std::size_t>(k)] + (off[k] + first * inner[static_cast<std::size_t>(k)]) * size[static_cast<std::size_t>(k)];
            stride[s] = inner[static_cast<std::size_t>(k)];
            break;
          }
          case CpuProgram::Slot::Kind::constant:
            ptr[s] = prog.constants[static_cast<std::size_t>(slot.index)].data();
            stride[s] = 0;
            break;
          case CpuProgram::Slot::Kind::temp:
            ptr[s] = scratch.data() + slot.index * kSlotBytes;
            stride[s] = 1;
            break;
        }
      }
      for (const CpuProgram::Step& step : prog.steps) {
        void* out = const_cast<void*>(ptr[static_cast<std::size_t>(step.result)]);
        if (step.cast) {
          step.cast(out, 1, ptr[static_cast<std::size_t>(step.args[0])], stride[static_cast<std::size_t>(step.args[0])], m);
          continue;
        }
        const void* in[3];
        std::int64_t si[3];
        for (int k = 0; k < step.nargs; ++k) {
          in[k] = ptr[static_cast<std::size_t>(step.args[k])];
          si[k] = stride[static_cast<std::size_t>(step.args[k])];
        }
        step.kernel(out, 1, in, si, m);
      }
      for (std::size_t j = 0; j < num_roots; ++j) {
        const std::size_t s = static_cast<std::size_t>(prog.roots[j]);
        char* out = base[j] + (off[j] + first * inner[j]) * size[j];
        store[j](out, inner[j], ptr[s], stride[s], m);
      }
    }
  });
  return results;
}

// A fused kernel's inputs as its range's payload.
struct FusedInputs {
  const Array* const* arrays;
  std::size_t count;
};
[[maybe_unused]] void describe(profile::ArgSink& sink, const FusedInputs& inputs) {
  for (std::size_t i = 0; i < inputs.count; ++i) describe(sink, *inputs.arrays[i]);
}

}  // namespace

// Plans are built on the first call with an input-dtype vector and never removed.
struct FusedKernel::Plans {
  std::mutex mutex;
  std::map<std::vector<DType>, std::shared_ptr<const FusedPlan>> by_dtypes;
  // CPU programs per input-dtype vector; nullptr: the graph runs evaluate_blocked.
  std::map<std::vector<DType>, std::shared_ptr<const CpuProgram>> cpu_by_dtypes;

  std::shared_ptr<const CpuProgram> cpu_program(const std::vector<Sym>& roots, const std::vector<DType>& dtypes) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = cpu_by_dtypes.find(dtypes);
      if (it != cpu_by_dtypes.end()) return it->second;
    }
    std::vector<const Node*> nodes;
    for (const Sym& r : roots) nodes.push_back(r.node().get());
    auto prog = make_cpu_program(nodes.data(), nodes.size(), dtypes);
    std::lock_guard<std::mutex> lock(mutex);
    return cpu_by_dtypes.emplace(dtypes, prog).first->second;
  }
};

FusedKernel::FusedKernel(Sym root, int num_inputs)
    : roots_{std::move(root)}, num_inputs_(num_inputs), plans_(std::make_shared<Plans>()) {}

FusedKernel::FusedKernel(std::vector<Sym> roots, int num_inputs)
    : roots_(std::move(roots)), multi_(true), num_inputs_(num_inputs), plans_(std::make_shared<Plans>()) {
  if (roots_.empty()) throw ValueError("fuse: the traced function returned no outputs");
  for (const Sym& r : roots_) {
    if (!r.node()) throw ValueError("fuse: an output is an empty Sym");
  }
}

void set_fusion_enabled(bool enabled) { fusion_flag().store(enabled ? 1 : 0); }

bool fusion_enabled() {
  int f = fusion_flag().load();
  if (f < 0) {
    const char* env = std::getenv("TESSEL_FUSION");
    f = (env && std::strcmp(env, "0") == 0) ? 0 : 1;
    fusion_flag().store(f);
  }
  return f == 1;
}

FusedKernel fuse(const std::function<Sym(const std::vector<Sym>&)>& f, int num_inputs) {
  std::vector<Sym> inputs;
  for (int i = 0; i < num_inputs; ++i) inputs.push_back(Sym::input(i));
  Sym root = f(inputs);
  check_arity(root.node().get());
  return FusedKernel(std::move(root), num_inputs);
}

FusedKernel fuse(const std::function<std::vector<Sym>(const std::vector<Sym>&)>& f, int num_inputs) {
  std::vector<Sym> inputs;
  for (int i = 0; i < num_inputs; ++i) inputs.push_back(Sym::input(i));
  std::vector<Sym> roots = f(inputs);
  for (const Sym& r : roots) check_arity(r.node().get());
  return FusedKernel(std::move(roots), num_inputs);
}

std::vector<DType> FusedKernel::result_dtypes(const std::vector<DType>& input_dtypes) const {
  Typing typing{input_dtypes, {}, {}};
  std::vector<DType> out;
  for (const Sym& r : roots_) {
    const auto t = typing.type(r.node().get());
    if (!t) throw ValueError("fuse: an output of the traced function is a constant");
    out.push_back(*t);
  }
  return out;
}

int FusedKernel::num_kernels() const {
  if (roots_.size() > 1) {
    for (const Sym& r : roots_) {
      if (r.node()->kind == Node::Kind::scalar) return 0;
    }
    return MultiLayout(roots_).num_kernels();
  }
  Partition part;
  part.visit(roots_[0].node().get());
  return roots_[0].node()->kind == Node::Kind::op ? static_cast<int>(part.cut.size()) + 1 : 0;
}

DType FusedKernel::result_dtype(const std::vector<DType>& input_dtypes) const {
  Typing typing{input_dtypes, {}, {}};
  const auto t = typing.type(roots_[0].node().get());
  if (!t) throw ValueError("fuse: the traced function returned a constant");
  return *t;
}

// The CUDA source (a build without CUDA raises the DeviceError of backend/dispatch.hpp from the
// op expressions of backend::cuda).
std::string FusedKernel::source(const std::vector<DType>& input_dtypes) const {
  if (roots_.size() > 1) {
    if (static_cast<int>(input_dtypes.size()) != num_inputs_) {
      throw ValueError("fuse: the kernel takes " + std::to_string(num_inputs_) + " inputs, got " +
                       std::to_string(input_dtypes.size()) + " dtypes");
    }
    const std::shared_ptr<const FusedPlan> plan = make_multi_plan(roots_, input_dtypes);
    // Launch order: cut nodes after the cut nodes they read, then the outputs' kernels.
    std::vector<std::pair<const jit::ElementwiseSpec*, std::string>> order;
    std::set<const Node*> seen;
    std::function<void(const Node*)> visit = [&](const Node* n) {
      auto it = plan->regions.find(n);
      if (it == plan->regions.end() || !seen.insert(n).second) return;
      for (const Node* leaf : it->second.leaves) visit(leaf);
      order.emplace_back(&it->second.launcher->spec(), std::to_string(it->second.leaves.size()) + " array inputs -> " +
                                                           dtype_name(it->second.result));
    };
    if (plan->merged) {
      for (const Node* leaf : plan->merged->leaves) visit(leaf);
      std::string results;
      for (DType d : plan->merged->results) results += (results.empty() ? "" : ", ") + std::string(dtype_name(d));
      order.emplace_back(&plan->merged->launcher->spec(), std::to_string(plan->merged->leaves.size()) +
                                                              " array inputs -> " + results + " (the outputs)");
    }
    for (const Sym& r : roots_) visit(r.node().get());
    if (order.size() == 1) return jit::generate_elementwise_source(*order[0].first);
    std::string out;
    for (std::size_t i = 0; i < order.size(); ++i) {
      out += "// ---- kernel " + std::to_string(i + 1) + " of " + std::to_string(order.size()) + ": " +
             order[i].second + "\n";
      out += jit::generate_elementwise_source(*order[i].first);
      out += "\n";
    }
    return out;
  }
  if (num_kernels() <= 1) {
    DType result{};
    return jit::generate_elementwise_source(fused_spec(roots_[0], input_dtypes, result));
  }
  // A split graph: every kernel a call launches, in launch order (a kernel after the ones whose
  // results it reads), as run_region walks them.
  if (static_cast<int>(input_dtypes.size()) != num_inputs_) {
    throw ValueError("fuse: the kernel takes " + std::to_string(num_inputs_) + " inputs, got " +
                     std::to_string(input_dtypes.size()) + " dtypes");
  }
  const std::shared_ptr<const FusedPlan> plan = make_plan(roots_[0].node().get(), input_dtypes);
  std::vector<const FusedPlan::Region*> order;
  std::set<const Node*> seen;
  std::function<void(const Node*)> visit = [&](const Node* n) {
    if (!seen.insert(n).second) return;
    const FusedPlan::Region& region = plan->regions.at(n);
    for (const Node* leaf : region.leaves) {
      if (plan->regions.count(leaf)) visit(leaf);
    }
    order.push_back(&region);
  };
  visit(roots_[0].node().get());
  std::string out;
  for (std::size_t i = 0; i < order.size(); ++i) {
    out += "// ---- kernel " + std::to_string(i + 1) + " of " + std::to_string(order.size()) + ": " +
           std::to_string(order[i]->leaves.size()) + " array inputs -> " + dtype_name(order[i]->result) +
           (i + 1 == order.size() ? " (the result)" : " (an intermediate)") + "\n";
    out += jit::generate_elementwise_source(order[i]->launcher->spec());
    out += "\n";
  }
  return out;
}

Array FusedKernel::operator()(const std::vector<Array>& inputs, const OptionalArray& out,
                              const OptionalStream& stream) const {
  detail::InlineBuffer<const Array*, 16> refs(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) refs[i] = &inputs[i];
  return (*this)(refs.data(), inputs.size(), out, stream);
}

namespace {
// The inputs' dtypes, after checking their count, that each is defined, and that all share one device.
std::vector<DType> checked_input_dtypes(const Array* const* inputs, std::size_t count, int expected) {
  if (static_cast<int>(count) != expected) {
    throw ValueError("fuse: the kernel takes " + std::to_string(expected) + " inputs, got " + std::to_string(count));
  }
  std::vector<DType> dtypes;
  dtypes.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const Array& a = *inputs[i];
    if (!a.defined()) throw ValueError("fuse: an input is an undefined Array");
    if (!(a.device() == inputs[0]->device())) {
      throw DeviceError("fuse: expected all arrays on one device, got " + inputs[0]->device().str() + " and " +
                        a.device().str());
    }
    dtypes.push_back(a.dtype());
  }
  return dtypes;
}
}  // namespace

Array FusedKernel::operator()(const Array* const* inputs, std::size_t count, const OptionalArray& out,
                              const OptionalStream& stream) const {
  TESSEL_RANGE("fused", FusedInputs{inputs, count}, out, stream);
  if (roots_.size() != 1) {
    throw ValueError("fuse: the kernel has " + std::to_string(roots_.size()) + " outputs; call_outputs() returns them");
  }
  const std::vector<DType> dtypes = checked_input_dtypes(inputs, count, num_inputs_);
  if (out) check_writable(*out, "fused");  // before any work
  const bool fusing = fusion_enabled();
  Array result;
  if (count > 0 && inputs[0]->device().is_cuda() && fusing) {
    const Device device = inputs[0]->device();
    const Shape shape = common_shape(inputs, count);
    if (roots_[0].node()->kind == Node::Kind::scalar) throw ValueError("fuse: the traced function returned a constant");
    std::shared_ptr<const FusedPlan> plan;
    {
      std::lock_guard<std::mutex> lock(plans_->mutex);
      auto it = plans_->by_dtypes.find(dtypes);
      if (it != plans_->by_dtypes.end()) plan = it->second;
    }
    if (!plan) {
      plan = make_plan(roots_[0].node().get(), dtypes);  // outside the lock; DTypeError is not cached
      std::lock_guard<std::mutex> lock(plans_->mutex);
      plan = plans_->by_dtypes.emplace(dtypes, plan).first->second;  // another thread's wins a race
    }
    const Stream s = detail::op_stream(device, stream, "fuse");
    Materialized done;
    result = run_region(roots_[0].node().get(), *plan, inputs, s, done);
    // A graph that reads only some inputs still has the shape of all of them broadcast.
    if (result.shape() != shape) result = result.broadcast_to(shape).contiguous(s);
  }
  if (!result.defined()) {
    // The CPU, or fusion off: op by op (copies of the inputs are cheap next to that work).
    std::vector<Array> copies;
    copies.reserve(count);
    for (std::size_t i = 0; i < count; ++i) copies.push_back(*inputs[i]);
    if (count > 0 && copies[0].device().is_cpu() && fusing) {
      const Shape shape = common_shape(inputs, count);
      const Node* root = roots_[0].node().get();
      if (const auto prog = plans_->cpu_program(roots_, dtypes)) {
        result = std::move(run_cpu_program(*prog, copies, shape, {result_dtype(dtypes)})[0]);
      } else {
        result = std::move(evaluate_blocked(&root, 1, copies, shape, {result_dtype(dtypes)}, stream)[0]);
      }
      if (result.shape() != shape) result = result.broadcast_to(shape).contiguous(stream);
    } else {
      std::map<const Node*, Value> memo;
      const Value v = evaluate(roots_[0].node().get(), copies, stream, memo);
      if (!std::holds_alternative<Array>(v)) throw ValueError("fuse: the traced function returned a constant");
      result = std::get<Array>(v);
    }
  }
  if (out) {
    if (out->shape() != result.shape()) {
      throw ShapeError("fused: out has shape " + shape_str(out->shape()) + " but the result has shape " +
                       shape_str(result.shape()));
    }
    if (!can_cast_same_kind(result.dtype(), out->dtype())) {
      throw DTypeError("fused: cannot cast the result dtype " + std::string(dtype_name(result.dtype())) +
                       " to out dtype " + dtype_name(out->dtype()) + " under the same_kind rule");
    }
    copyto(*out, result, stream);
    return TESSEL_RESULT(*out);
  }
  TESSEL_CHECK_RESULT(result);
  return result;
}

std::vector<Array> FusedKernel::call_outputs(const std::vector<Array>& inputs, const OptionalStream& stream) const {
  std::vector<const Array*> refs(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) refs[i] = &inputs[i];
  return call_outputs(refs.data(), refs.size(), stream);
}

std::vector<Array> FusedKernel::call_outputs(const Array* const* inputs, std::size_t count,
                                             const OptionalStream& stream) const {
  if (roots_.size() == 1) {
    // One output: the single-output path and its plans (a kernel keeps one kind of plan per
    // dtype vector), as a new array even where the graph is an input itself.
    Array r = (*this)(inputs, count, std::nullopt, stream);
    for (std::size_t i = 0; i < count; ++i) {
      if (r.storage() == inputs[i]->storage()) return {r.copy(stream)};
    }
    return {std::move(r)};
  }
  TESSEL_RANGE("fused", FusedInputs{inputs, count}, OptionalArray{}, stream);
  const std::vector<DType> dtypes = checked_input_dtypes(inputs, count, num_inputs_);
  if (count == 0) throw ValueError("fuse: a kernel of several outputs needs at least one input array");
  // Every output has the broadcast shape of all the inputs (ShapeError names them when they do not broadcast).
  const Shape shape = common_shape(inputs, count);
  const bool fusing = fusion_enabled();
  std::vector<Array> results;
  if (inputs[0]->device().is_cuda() && fusing) {
    // The plan, built once per dtype vector, types the graph (DTypeError, constant outputs).
    std::shared_ptr<const FusedPlan> plan;
    {
      std::lock_guard<std::mutex> lock(plans_->mutex);
      auto it = plans_->by_dtypes.find(dtypes);
      if (it != plans_->by_dtypes.end()) plan = it->second;
    }
    if (!plan) {
      plan = make_multi_plan(roots_, dtypes);
      std::lock_guard<std::mutex> lock(plans_->mutex);
      plan = plans_->by_dtypes.emplace(dtypes, plan).first->second;
    }
    const Stream s = detail::op_stream(inputs[0]->device(), stream, "fuse");
    results = run_outputs(roots_, *plan, inputs, shape, s);
  }
  if (results.empty()) {
    const std::vector<DType> rts = result_dtypes(dtypes);  // DTypeError / constant outputs, before any work
    std::vector<Array> copies;
    copies.reserve(count);
    for (std::size_t i = 0; i < count; ++i) copies.push_back(*inputs[i]);
    std::vector<const Node*> roots;
    for (const Sym& r : roots_) roots.push_back(r.node().get());
    if (copies[0].device().is_cpu() && fusing) {
      if (const auto prog = plans_->cpu_program(roots_, dtypes)) {
        results = run_cpu_program(*prog, copies, shape, rts);
      } else {
        results = evaluate_blocked(roots.data(), roots.size(), copies, shape, rts, stream);
      }
    } else {
      std::map<const Node*, Value> memo;
      for (const Node* n : roots) results.push_back(std::get<Array>(evaluate(n, copies, stream, memo)));
    }
    // Below one block, or op by op, an output keeps the shape its ops give; an output that is an
    // input (or the same node as an earlier output) would alias it: every output is a new array
    // of the common shape.
    std::set<const void*> seen;
    for (std::size_t i = 0; i < count; ++i) seen.insert(copies[i].storage().get());
    for (Array& r : results) {
      if (r.shape() != shape) {
        r = r.broadcast_to(shape).contiguous(stream);
      } else if (seen.count(r.storage().get())) {
        r = r.copy(stream);
      }
      seen.insert(r.storage().get());
    }
  }
  for (const Array& r : results) TESSEL_CHECK_RESULT(r);
  return results;
}

}  // namespace tessel
