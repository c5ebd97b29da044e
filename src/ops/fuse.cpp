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
#include "ops/fuse_graph.hpp"

namespace tessel {

using namespace detail::fusion;

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
