#pragma once
// The parts of ts.fuse (ops/fuse.cpp, the public FusedKernel) that its other files share: the
// typed graph, its split into kernels and the CUDA plan (here); the CUDA lowering and launches
// (fuse_cuda.cpp); the CPU evaluators (fuse_cpu.cpp).
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


namespace tessel::detail::fusion {

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

inline void check_arity(const Node* n) {
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
inline Shape common_shape(const Array* const* arrays, std::size_t count) {
  detail::InlineBuffer<const Shape*, 16> shapes(count);
  for (std::size_t i = 0; i < count; ++i) shapes[i] = &arrays[i]->shape();
  return broadcast_shape_list(shapes.data(), count, "fused");
}

// ---- fuse_cuda.cpp ----
// The results of a split graph's cut nodes, computed once per call (std::map: stable references).
using Materialized = std::map<const Node*, Array>;
// The jit spec of a one-kernel graph rooted at `root` (result: its result dtype).
jit::ElementwiseSpec fused_spec(const Sym& root, const std::vector<DType>& input_dtypes, DType& result);
// The CUDA plans of one output and of several, for one input-dtype vector.
std::shared_ptr<const FusedPlan> make_plan(const Node* root, const std::vector<DType>& input_dtypes);
std::shared_ptr<const FusedPlan> make_multi_plan(const std::vector<Sym>& roots, const std::vector<DType>& input_dtypes);
Array run_region(const Node* n, const FusedPlan& plan, const Array* const* inputs, const Stream& s,
                 Materialized& done);
std::vector<Array> run_outputs(const std::vector<Sym>& roots, const FusedPlan& plan, const Array* const* inputs,
                               const Shape& shape, const Stream& s);

// ---- fuse_cpu.cpp ----
using Value = std::variant<Array, Scalar>;
// Node by node through the eager ops (memo: each node's value once).
Value evaluate(const Node* n, const std::vector<Array>& inputs, const OptionalStream& stream,
               std::map<const Node*, Value>& memo);
std::vector<Array> evaluate_blocked(const Node* const* roots, std::size_t num_roots, const std::vector<Array>& inputs,
                                    const Shape& shape, const std::vector<DType>& rts, const OptionalStream& stream);
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
std::shared_ptr<const CpuProgram> make_cpu_program(const Node* const* roots, std::size_t num_roots,
                                                   const std::vector<DType>& dtypes);
std::vector<Array> run_cpu_program(const CpuProgram& prog, const std::vector<Array>& inputs, const Shape& shape,
                                   const std::vector<DType>& rts);

}  // namespace tessel::detail::fusion
