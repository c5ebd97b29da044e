// ts.fuse on CUDA: the typed graph lowered to generated elementwise kernels (the expressions of
// backend/cuda/elementwise.cpp), their plans, and the launches of a call.
#include "ops/fuse_graph.hpp"

namespace tessel::detail::fusion {

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
// One kernel of a plan: the region's leaves (inputs, or cut nodes' results), its result dtype and
// its launcher.
FusedPlan::Region make_region(const Node* n, const Partition::Region& region, Typing& typing) {
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
  return r;
}

// Builds the launch plan of a graph for its input dtypes: the typing (DTypeError names the op
// that rejects them), the partition, and per kernel its leaves, result dtype and launcher.
std::shared_ptr<const FusedPlan> make_plan(const Node* root, const std::vector<DType>& input_dtypes) {
  Typing typing{input_dtypes, {}, {}};
  typing.type(root);  // types every node
  Partition part;
  part.visit(root);
  auto plan = std::make_shared<FusedPlan>();
  auto add_region = [&](const Node* n) { plan->regions.emplace(n, make_region(n, part.region.at(n), typing)); };
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
  auto add_region = [&](const Node* n) { plan->regions.emplace(n, make_region(n, layout.part.region.at(n), typing)); };
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

}  // namespace tessel::detail::fusion
