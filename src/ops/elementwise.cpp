// Backend-neutral part of the elementwise ops: the dtype table, promotion, broadcasting, device
// checks, out= validation and overlap staging. The backends get inputs already cast to the
// compute dtype and broadcast to the output shape (see src/backend/elementwise.hpp).
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"

#include <array>
#include <string>
#include <vector>

#include "array/backend.hpp"
#include "backend/elementwise.hpp"
#include "ops/elementwise_operands.hpp"
#include "ops/elementwise_table.hpp"
#include "ops/op_stream.hpp"
#include "tessel/array/profile_args.hpp"
#include "ops/checks.hpp"

namespace tessel {
namespace {

using detail::kAll;
using detail::kB;
using detail::kC;
using detail::kF;
using detail::kI;
using detail::op_table;
using detail::OpInfo;
using detail::Promote;
using detail::Result;

const OpInfo& info(ElementwiseOp op) { return op_table[static_cast<std::size_t>(op)]; }

unsigned kind_bit(DType d) {
  if (is_bool(d)) return kB;
  if (is_integer(d)) return kI;
  if (is_floating(d)) return kF;
  return kC;
}

DType compute_dtype(const OpInfo& op, DType promoted) {
  switch (op.promote) {
    case Promote::same: return promoted;
    case Promote::bool_to_int8: return is_bool(promoted) ? DType::int8 : promoted;
    case Promote::true_divide: return (is_bool(promoted) || is_integer(promoted)) ? DType::float64 : promoted;
    case Promote::to_float:
      if (is_bool(promoted) || is_integer(promoted)) {
        for (DType f : {DType::float16, DType::float32, DType::float64}) {
          if (can_cast_safely(promoted, f)) return f;
        }
        return DType::float64;
      }
      return promoted;
  }
  return promoted;
}

DType result_dtype(const OpInfo& op, DType compute) {
  switch (op.result) {
    case Result::same: return compute;
    case Result::bool_: return DType::bool_;
    case Result::real: return to_real(compute);
  }
  return compute;
}

std::string kinds_str(unsigned kinds) {
  std::string s;
  auto add = [&](unsigned bit, const char* text) {
    if (kinds & bit) s += (s.empty() ? "" : ", ") + std::string(text);
  };
  add(kB, "bool");
  add(kI, "integer");
  add(kF, "floating");
  add(kC, "complex");
  return s;
}

// `describe()` names the input dtypes for the error; called only on failure (no string work on
// the hot path).
template <class Describe>
detail::ElementwiseTypes resolve_types(const OpInfo& op, DType promoted, const Describe& describe) {
  const DType compute = compute_dtype(op, promoted);
  if (!(kind_bit(compute) & op.kinds)) {
    throw DTypeError(std::string(op.name) + ": unsupported dtype " + describe() + "; supported kinds: " +
                     kinds_str(op.kinds));
  }
  return {compute, result_dtype(op, compute)};
}

bool is_comparison(ElementwiseOp op) {
  return op == ElementwiseOp::equal || op == ElementwiseOp::not_equal || op == ElementwiseOp::less ||
         op == ElementwiseOp::less_equal || op == ElementwiseOp::greater || op == ElementwiseOp::greater_equal;
}

// A weak Python integer outside the range of the integer compute dtype (NumPy 2, NEP 50):
// comparisons are computed exactly in a wider dtype (uint8 array < 300 is true everywhere),
// arithmetic raises rather than wrapping the scalar. Returns the dtype to compute in.
DType check_integer_scalar(ElementwiseOp op, const char* name, const Scalar& s, DType compute) {
  if (s.kind() != Scalar::Kind::int_ && s.kind() != Scalar::Kind::uint_) return compute;
  const int bits = static_cast<int>(itemsize(compute)) * 8;
  bool fits;
  if (s.kind() == Scalar::Kind::uint_) {
    const std::uint64_t v = s.to_uint64();
    fits = is_unsigned_integer(compute) ? (bits == 64 || v < (std::uint64_t{1} << bits))
                                        : v < (std::uint64_t{1} << (bits - 1));
  } else {
    const std::int64_t v = s.to_int64();
    if (is_unsigned_integer(compute)) {
      fits = v >= 0 && (bits == 64 || v < (std::int64_t{1} << bits));
    } else {
      fits = bits == 64 || (v >= -(std::int64_t{1} << (bits - 1)) && v < (std::int64_t{1} << (bits - 1)));
    }
  }
  if (fits) return compute;
  if (is_comparison(op)) {
    // int64 holds every value of the narrower dtypes and the scalar (an int64 Python int); a
    // uint64 array or a scalar beyond int64 compares in float64, where the order is exact for the
    // sign and magnitude cases that are out of range here.
    const bool int64_ok = compute != DType::uint64 && s.kind() == Scalar::Kind::int_;
    return int64_ok ? DType::int64 : DType::float64;
  }
  throw ValueError(std::string(name) + ": Python integer " + s.str() + " is out of bounds for " + dtype_name(compute) +
                   " (the array's dtype; NumPy 2 raises OverflowError here)");
}

// True when views a and b share bytes but are not the identical layout (identical views are
// safe for elementwise work: each element is read before it is written, by the same thread).
bool partially_overlaps(const Array& a, const Array& b) {
  if (a.size() == 0 || b.size() == 0 || a.storage() != b.storage()) return false;
  const auto ea = element_extent(a.shape(), a.strides());
  const auto eb = element_extent(b.shape(), b.strides());
  const auto* base_a = static_cast<const char*>(a.data());
  const auto* base_b = static_cast<const char*>(b.data());
  const char* lo_a = base_a + ea.lowest * a.itemsize();
  const char* hi_a = base_a + (ea.highest + 1) * a.itemsize();
  const char* lo_b = base_b + eb.lowest * b.itemsize();
  const char* hi_b = base_b + (eb.highest + 1) * b.itemsize();
  if (hi_a <= lo_b || hi_b <= lo_a) return false;
  const bool identical = base_a == base_b && a.itemsize() == b.itemsize() && a.shape() == b.shape() &&
                         a.strides() == b.strides();
  return !identical;
}

// A borrowed operand: exactly one of `array` / `scalar` is set. The public entry points build
// these on the stack, so a call copies no Array (each copy is two heap vectors and an atomic
// reference count) and allocates no operand vector.
struct OperandRef {
  const Array* array = nullptr;
  const Scalar* scalar = nullptr;
};

// At most three operands (where); room for them inline, no heap.
constexpr int kMaxOperands = 3;

// The operands as an op range's payload.
struct OperandList {
  const OperandRef* operands;
  int count;
};
[[maybe_unused]] void describe(profile::ArgSink& sink, const OperandList& list) {
  for (int i = 0; i < list.count; ++i) {
    if (list.operands[i].array) {
      describe(sink, *list.operands[i].array);
    } else {
      sink.add_text("scalar");
    }
  }
}

Array run(ElementwiseOp op_id, const OperandRef* operands, int count, const OptionalArray& out,
          const OptionalStream& stream) {
  const OpInfo& op = info(op_id);
  TESSEL_RANGE(op.name, OperandList{operands, count}, out, stream);
  // Messages are built only on failure: no string work on the hot path.
  const char* name = op.name;
  if (count != op.arity || count > kMaxOperands) {
    throw ValueError(std::string(name) + ": takes " + std::to_string(op.arity) + " inputs, got " +
                     std::to_string(count));
  }
  // Devices, shapes and the promoted dtype come from the array operands.
  std::optional<Device> device;
  auto check_device = [&](const Array& a, const char* what) {
    if (!a.defined()) throw ValueError(std::string(name) + ": " + what + " is an undefined Array");
    if (!device) {
      device = a.device();
    } else if (!(a.device() == *device)) {
      throw DeviceError(std::string(name) + ": expected all arrays on one device, got " + device->str() + " and " +
                        a.device().str());
    }
  };
  // The result shape: the common case (every array operand has one shape) needs no broadcast work.
  const Shape* first_shape = nullptr;
  bool same_shapes = true;
  for (int i = 0; i < count; ++i) {
    if (!operands[i].scalar) {
      check_device(*operands[i].array, "an input");
      const Shape& sh = operands[i].array->shape();
      if (!first_shape) {
        first_shape = &sh;
      } else if (sh != *first_shape) {
        same_shapes = false;
      }
    }
  }
  if (!device) throw ValueError(std::string(name) + ": needs at least one array input");
  if (out) {
    check_device(*out, "out");
    check_writable(*out, name);
  }
  Shape broadcast;
  if (!same_shapes) {
    std::vector<Shape> shapes;
    for (int i = 0; i < count; ++i) {
      if (!operands[i].scalar) shapes.push_back(operands[i].array->shape());
    }
    broadcast = broadcast_shapes(shapes, op.name);
  }
  const Shape& shape = same_shapes ? *first_shape : broadcast;

  // where: the condition does not take part in promotion.
  const int first_value = op_id == ElementwiseOp::where ? 1 : 0;
  std::optional<DType> promoted;
  for (int i = first_value; i < count; ++i) {
    if (!operands[i].scalar) {
      promoted = promoted ? result_type(*promoted, operands[i].array->dtype()) : operands[i].array->dtype();
    }
  }
  for (int i = first_value; i < count; ++i) {
    if (operands[i].scalar) {
      promoted = promoted ? result_type(*promoted, operands[i].scalar->scalar_kind())
                          : operands[i].scalar->default_dtype();
    }
  }
  const auto describe = [&] {
    if (op.arity == 2 && !operands[0].scalar && !operands[1].scalar &&
        operands[0].array->dtype() != operands[1].array->dtype()) {
      return std::string(dtype_name(operands[0].array->dtype())) + " and " + dtype_name(operands[1].array->dtype()) +
             " (promoted to " + dtype_name(*promoted) + ")";
    }
    return std::string(dtype_name(*promoted));
  };
  const detail::ElementwiseTypes types = resolve_types(op, *promoted, describe);
  DType compute = types.compute;
  const DType result = types.result;
  if (is_integer(compute)) {
    for (int i = first_value; i < count; ++i) {
      if (operands[i].scalar) compute = check_integer_scalar(op_id, name, *operands[i].scalar, compute);
    }
  }
  // The caller's stream by reference; only a defaulted one is looked up (and held here).
  std::optional<Stream> resolved;
  if (stream) {
    detail::check_stream_device(*stream, *device, name);
  } else {
    resolved = detail::resolve_stream(*device, std::nullopt);
  }
  const Stream& s = stream ? *stream : *resolved;

  if (out) {
    if (out->shape() != shape) {
      throw ShapeError(std::string(name) + ": out has shape " + shape_str(out->shape()) +
                       " but the result has shape " + shape_str(shape));
    }
    if (!can_cast_same_kind(result, out->dtype())) {
      throw DTypeError(std::string(name) + ": cannot cast the result dtype " + std::string(dtype_name(result)) +
                       " to out dtype " + dtype_name(out->dtype()) + " under the same_kind rule");
    }
  }

  // Inputs in the compute dtype (where's condition in bool), broadcast to the result shape: the
  // caller's array itself when it already is that, else a staged cast/broadcast view.
  // CUDA takes scalars by value (kernel parameters); the CPU loops read them as 0-d arrays.
  const bool cuda = device->is_cuda();
  Array staged[kMaxOperands];
  const Array* inputs[kMaxOperands] = {nullptr, nullptr, nullptr};
  const Scalar* scalars[kMaxOperands] = {nullptr, nullptr, nullptr};
  DType in_dtypes[kMaxOperands] = {compute, compute, compute};
  for (int i = 0; i < count; ++i) {
    const DType want = (op_id == ElementwiseOp::where && i == 0) ? DType::bool_ : compute;
    in_dtypes[i] = want;
    if (operands[i].scalar && cuda) {
      scalars[i] = operands[i].scalar;
      continue;
    }
    // An input of the result shape needs no broadcast view: broadcast_to would only zero the
    // strides of its size-1 axes, which both backends collapse away unread.
    if (!operands[i].scalar && operands[i].array->dtype() == want && operands[i].array->shape() == shape) {
      inputs[i] = operands[i].array;
      continue;
    }
    Array a = operands[i].scalar ? full({}, *operands[i].scalar, want, *device, s) : *operands[i].array;
    if (a.dtype() != want) a = astype(a, want, s);
    staged[i] = a.broadcast_to(shape);
    inputs[i] = &staged[i];
  }

  bool direct = out && out->dtype() == result;
  if (direct) {
    for (int i = 0; i < count; ++i) direct = direct && !(inputs[i] && partially_overlaps(*inputs[i], *out));
  }
  // The output array by reference: out= itself (no Array copy) or a fresh one.
  Array fresh;
  if (!direct) fresh = detail::allocate_array(shape, result, *device, s);
  const Array& target = direct ? *out : fresh;
  if (target.size() > 0) {
    if (!cuda) {
      for (int i = 0; i < count; ++i) inputs[i]->wait();  // every input is an array here
      target.wait();
    } else {
      for (int i = 0; i < count; ++i) {
        if (inputs[i]) inputs[i]->storage()->wait_on_stream(s);
      }
      target.storage()->wait_on_stream(s);
    }
    backend::dispatch::elementwise(*device, op_id, count, inputs, scalars, in_dtypes, target, s);
    target.storage()->record_pending_write(s);  // nothing to record on the CPU
  }
  if (out && !direct) {
    copyto(*out, fresh, s);
    return TESSEL_RESULT(*out);
  }
  if (direct) return TESSEL_RESULT(*out);
  TESSEL_CHECK_RESULT(fresh);
  return fresh;
}

Array run_arrays(ElementwiseOp op, std::initializer_list<const Array*> arrays, const OptionalArray& out,
                 const OptionalStream& stream) {
  OperandRef refs[kMaxOperands];
  int count = 0;
  for (const Array* a : arrays) refs[count++].array = a;
  return run(op, refs, count, out, stream);
}

}  // namespace

const char* op_name(ElementwiseOp op) { return info(op).name; }

Array detail::elementwise_operands(ElementwiseOp op, std::vector<ElementwiseOperand> operands,
                                  const OptionalArray& out, const OptionalStream& stream) {
  if (static_cast<int>(operands.size()) != info(op).arity) {
    throw ValueError(std::string(op_name(op)) + ": takes " + std::to_string(info(op).arity) + " inputs, got " +
                     std::to_string(operands.size()));
  }
  OperandRef refs[kMaxOperands];
  for (std::size_t i = 0; i < operands.size(); ++i) {
    if (operands[i].scalar) {
      refs[i].scalar = &*operands[i].scalar;
    } else {
      refs[i].array = &operands[i].array;
    }
  }
  return run(op, refs, static_cast<int>(operands.size()), out, stream);
}

detail::ElementwiseTypes detail::elementwise_types(ElementwiseOp op, DType promoted) {
  return resolve_types(info(op), promoted, [&] { return std::string(dtype_name(promoted)); });
}

Array elementwise(ElementwiseOp op, const std::vector<Array>& inputs, const OptionalArray& out,
                  const OptionalStream& stream) {
  if (static_cast<int>(inputs.size()) != info(op).arity) {
    throw ValueError(std::string(op_name(op)) + ": takes " + std::to_string(info(op).arity) + " inputs, got " +
                     std::to_string(inputs.size()));
  }
  OperandRef refs[kMaxOperands];
  for (std::size_t i = 0; i < inputs.size(); ++i) refs[i].array = &inputs[i];
  return run(op, refs, static_cast<int>(inputs.size()), out, stream);
}

#define TESSEL_DEFINE_BINARY(fn, ...)                                                                            \
  Array fn(const Array& a, const Array& b, const OptionalArray& out, const OptionalStream& stream) {          \
    return run_arrays(ElementwiseOp::fn, {&a, &b}, out, stream);                                              \
  }                                                                                                           \
  Array fn(const Array& a, Scalar b, const OptionalArray& out, const OptionalStream& stream) {                 \
    const OperandRef refs[2] = {{&a, nullptr}, {nullptr, &b}};                                                \
    return run(ElementwiseOp::fn, refs, 2, out, stream);                                                      \
  }                                                                                                           \
  Array fn(Scalar a, const Array& b, const OptionalArray& out, const OptionalStream& stream) {                 \
    const OperandRef refs[2] = {{nullptr, &a}, {&b, nullptr}};                                                \
    return run(ElementwiseOp::fn, refs, 2, out, stream);                                                      \
  }
#define TESSEL_DEFINE_UNARY(fn, ...)                                                       \
  Array fn(const Array& a, const OptionalArray& out, const OptionalStream& stream) {    \
    return run_arrays(ElementwiseOp::fn, {&a}, out, stream);                            \
  }

TESSEL_BINARY_OPS(TESSEL_DEFINE_BINARY)
TESSEL_UNARY_OPS(TESSEL_DEFINE_UNARY)

Array where(const Array& cond, const Array& a, const Array& b, const OptionalArray& out,
            const OptionalStream& stream) {
  return run_arrays(ElementwiseOp::where, {&cond, &a, &b}, out, stream);
}

Array clip(const Array& a, Scalar lo, Scalar hi, const OptionalArray& out, const OptionalStream& stream) {
  // Two passes; the intermediate takes the promoted dtype, so out= applies to the last one.
  if (out) check_writable(*out, "clip");  // before the first pass
  return minimum(maximum(a, lo, std::nullopt, stream), hi, out, stream);
}

Array clip(const Array& a, const Array& lo, const Array& hi, const OptionalArray& out,
           const OptionalStream& stream) {
  if (out) check_writable(*out, "clip");
  return minimum(maximum(a, lo, std::nullopt, stream), hi, out, stream);
}

}  // namespace tessel
