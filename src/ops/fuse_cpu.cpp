// ts.fuse on the CPU: the graph evaluated through the eager ops, block by block (evaluate_blocked)
// or as a program of the backend's kernels over chunks (CpuProgram).
#include "ops/fuse_graph.hpp"

namespace tessel::detail::fusion {

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

}  // namespace tessel::detail::fusion
