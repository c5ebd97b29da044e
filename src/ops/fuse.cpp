// fuse(): the traced graph is typed with the same promotion rules as the eager ops, then either
// lowered to one jit expression (CUDA) or evaluated node by node (CPU, or fusion off).
#include "tessel/ops/cast.hpp"
#include "tessel/ops/fuse.hpp"

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
#include "backend/elementwise.hpp"
#include "ops/elementwise_operands.hpp"
#include "ops/op_stream.hpp"
#include "core/inline_buffer.hpp"
#include "tessel/core/profile_range.hpp"
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

// The CUDA launch plan of a graph for one input-dtype vector: everything a call needs that does
// not depend on shapes. Immutable once built.
struct FusedPlan {
  struct Region {
    std::vector<const Node*> leaves;  // the kernel's array inputs in order: graph inputs and cut nodes
    DType result = DType::float32;
    std::unique_ptr<jit::ElementwiseLauncher> launcher;
  };
  std::map<const Node*, Region> regions;  // the root's and every cut node's kernel
};

// The broadcast shape of `count` arrays, without copying their shapes into a vector.
Shape common_shape(const Array* const* arrays, std::size_t count) {
  detail::InlineBuffer<const Shape*, 16> shapes(count);
  for (std::size_t i = 0; i < count; ++i) shapes[i] = &arrays[i]->shape();
  return broadcast_shape_list(shapes.data(), count, "fused");
}

#ifdef TESSEL_HAVE_CUDA
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

// The results of a split graph's cut nodes, computed once per call (std::map: stable references).
using Materialized = std::map<const Node*, Array>;

// Runs the kernel of the region rooted at `n` (materializing the cut nodes it reads first) and
// returns its result, broadcast over its leaves' shapes. Inputs and leaves are borrowed, and the
// kernel gets views of their strides: a one-kernel call copies no Array and no strides.
Array run_region(const Node* n, const FusedPlan& plan, const Array* const* inputs, const Stream& s,
                 Materialized& done) {
  const FusedPlan::Region& region = plan.regions.at(n);
  const std::size_t count = region.leaves.size();
  detail::InlineBuffer<const Array*, 16> leaves(count);
  for (std::size_t k = 0; k < count; ++k) {
    const Node* leaf = region.leaves[k];
    if (leaf->kind == Node::Kind::input) {
      leaves[k] = inputs[static_cast<std::size_t>(leaf->index)];
      continue;
    }
    auto it = done.find(leaf);
    if (it == done.end()) it = done.emplace(leaf, run_region(leaf, plan, inputs, s, done)).first;
    leaves[k] = &it->second;
  }
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
#endif

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

Array evaluate_blocked(const Node* root, const std::vector<Array>& inputs, const Shape& shape, DType rt,
                       const OptionalStream& stream) {
  auto whole = [&](const std::vector<Array>& in) {
    std::map<const Node*, Value> memo;
    const Value v = evaluate(root, in, stream, memo);
    if (!std::holds_alternative<Array>(v)) throw ValueError("fuse: the traced function returned a constant");
    return std::get<Array>(v);
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
  Array result = empty(shape, rt, Device::cpu());
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
#pragma omp parallel for schedule(dynamic, 4) if (items > 1)
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
      const Array target = cut(result);
      const Array value = whole(block);
      copyto(target, value.shape() == target.shape() ? value : value.broadcast_to(target.shape()), stream);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return result;
}

}  // namespace

// Plans are built on the first call with an input-dtype vector and never removed.
struct FusedKernel::Plans {
  std::mutex mutex;
  std::map<std::vector<DType>, std::shared_ptr<const FusedPlan>> by_dtypes;
};

FusedKernel::FusedKernel(Sym root, int num_inputs)
    : root_(std::move(root)), num_inputs_(num_inputs), plans_(std::make_shared<Plans>()) {}

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

int FusedKernel::num_kernels() const {
  Partition part;
  part.visit(root_.node().get());
  return root_.node()->kind == Node::Kind::op ? static_cast<int>(part.cut.size()) + 1 : 0;
}

DType FusedKernel::result_dtype(const std::vector<DType>& input_dtypes) const {
  Typing typing{input_dtypes, {}, {}};
  const auto t = typing.type(root_.node().get());
  if (!t) throw ValueError("fuse: the traced function returned a constant");
  return *t;
}

std::string FusedKernel::source(const std::vector<DType>& input_dtypes) const {
#ifdef TESSEL_HAVE_CUDA
  if (num_kernels() <= 1) {
    DType result{};
    return jit::generate_elementwise_source(fused_spec(root_, input_dtypes, result));
  }
  // A split graph: every kernel a call launches, in launch order (a kernel after the ones whose
  // results it reads), as run_region walks them.
  if (static_cast<int>(input_dtypes.size()) != num_inputs_) {
    throw ValueError("fuse: the kernel takes " + std::to_string(num_inputs_) + " inputs, got " +
                     std::to_string(input_dtypes.size()) + " dtypes");
  }
  const std::shared_ptr<const FusedPlan> plan = make_plan(root_.node().get(), input_dtypes);
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
  visit(root_.node().get());
  std::string out;
  for (std::size_t i = 0; i < order.size(); ++i) {
    out += "// ---- kernel " + std::to_string(i + 1) + " of " + std::to_string(order.size()) + ": " +
           std::to_string(order[i]->leaves.size()) + " array inputs -> " + dtype_name(order[i]->result) +
           (i + 1 == order.size() ? " (the result)" : " (an intermediate)") + "\n";
    out += jit::generate_elementwise_source(order[i]->launcher->spec());
    out += "\n";
  }
  return out;
#else
  (void)input_dtypes;
  throw DeviceError("fuse: this build has no CUDA backend to generate source for");
#endif
}

Array FusedKernel::operator()(const std::vector<Array>& inputs, const OptionalArray& out,
                              const OptionalStream& stream) const {
  detail::InlineBuffer<const Array*, 16> refs(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) refs[i] = &inputs[i];
  return (*this)(refs.data(), inputs.size(), out, stream);
}

Array FusedKernel::operator()(const Array* const* inputs, std::size_t count, const OptionalArray& out,
                              const OptionalStream& stream) const {
  TESSEL_OP_RANGE("fused");
  if (static_cast<int>(count) != num_inputs_) {
    throw ValueError("fuse: the kernel takes " + std::to_string(num_inputs_) + " inputs, got " +
                     std::to_string(count));
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
  if (out) check_writable(*out, "fused");  // before any work
  const bool fusing = fusion_enabled();
  Array result;
#ifdef TESSEL_HAVE_CUDA
  if (count > 0 && inputs[0]->device().is_cuda() && fusing) {
    const Device device = inputs[0]->device();
    const Shape shape = common_shape(inputs, count);
    if (root_.node()->kind == Node::Kind::scalar) throw ValueError("fuse: the traced function returned a constant");
    std::shared_ptr<const FusedPlan> plan;
    {
      std::lock_guard<std::mutex> lock(plans_->mutex);
      auto it = plans_->by_dtypes.find(dtypes);
      if (it != plans_->by_dtypes.end()) plan = it->second;
    }
    if (!plan) {
      plan = make_plan(root_.node().get(), dtypes);  // outside the lock; DTypeError is not cached
      std::lock_guard<std::mutex> lock(plans_->mutex);
      plan = plans_->by_dtypes.emplace(dtypes, plan).first->second;  // another thread's wins a race
    }
    const Stream s = detail::op_stream(device, stream, "fuse");
    Materialized done;
    result = run_region(root_.node().get(), *plan, inputs, s, done);
    // A graph that reads only some inputs still has the shape of all of them broadcast.
    if (result.shape() != shape) result = result.broadcast_to(shape).contiguous(s);
  }
#endif
  if (!result.defined()) {
    // The CPU, or fusion off: op by op (copies of the inputs are cheap next to that work).
    std::vector<Array> copies;
    copies.reserve(count);
    for (std::size_t i = 0; i < count; ++i) copies.push_back(*inputs[i]);
    if (count > 0 && copies[0].device().is_cpu() && fusing) {
      const Shape shape = common_shape(inputs, count);
      result = evaluate_blocked(root_.node().get(), copies, shape, result_dtype(dtypes), stream);
      if (result.shape() != shape) result = result.broadcast_to(shape).contiguous(stream);
    } else {
      std::map<const Node*, Value> memo;
      const Value v = evaluate(root_.node().get(), copies, stream, memo);
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
    return *out;
  }
  return result;
}

}  // namespace tessel
