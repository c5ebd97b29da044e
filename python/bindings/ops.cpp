// Ops layer: elementwise functions (Array API names plus NumPy's) and the Array operators.
// Hot path: an operator is one C++ call that checks the operand types by hand (no overload
// resolution, no Python wrapper) and calls the tessel op directly.
#include <algorithm>
#include <chrono>
#include <iterator>
#include <string_view>

#include "common.hpp"

namespace tessel::python {
namespace {

using BinaryAA = Array (*)(const Array&, const Array&, const OptionalArray&, const OptionalStream&);
using BinaryAS = Array (*)(const Array&, Scalar, const OptionalArray&, const OptionalStream&);
using BinarySA = Array (*)(Scalar, const Array&, const OptionalArray&, const OptionalStream&);
using Unary = Array (*)(const Array&, const OptionalArray&, const OptionalStream&);

struct BinaryOp {
  ElementwiseOp op;
  BinaryAA aa;
  BinaryAS as;
  BinarySA sa;
};

inline bool is_sym(nb::handle h) { return nb::isinstance<Sym>(h); }

Sym to_sym(nb::handle h) {
  if (is_sym(h)) return nb::cast<Sym>(h);
  Scalar s;
  if (to_scalar(h, s)) return Sym(s);
  throw nb::type_error(("fuse: inside a fused function only symbolic arrays and Python scalars can be combined, got " +
                        nb::cast<std::string>(nb::type_name(h.type())))
                           .c_str());
}

// Returns a null object for operand types that an operator should answer NotImplemented to.
nb::object apply_binary(const BinaryOp& op, nb::handle a, nb::handle b, bool for_operator, const Array* out = nullptr) {
  const OptionalArray out_arg = out ? OptionalArray(*out) : std::nullopt;
  const bool a_arr = is_array(a), b_arr = is_array(b);
  if (a_arr && b_arr) return wrap_array(op.aa(as_array(a), as_array(b), out_arg, std::nullopt));
  Scalar s;
  if (a_arr && to_scalar(b, s)) return wrap_array(op.as(as_array(a), s, out_arg, std::nullopt));
  if (b_arr && to_scalar(a, s)) return wrap_array(op.sa(s, as_array(b), out_arg, std::nullopt));
  if (is_sym(a) || is_sym(b)) return nb::cast(Sym::apply(op.op, {to_sym(a), to_sym(b)}));
  if (a_arr || b_arr) {
    const Array& known = a_arr ? as_array(a) : as_array(b);
    nb::handle other = a_arr ? b : a;
    // Foreign operands: NumPy arrays, sequences, DLPack producers. Operators give other types
    // (torch tensors with their own operators, arbitrary objects) the chance to answer.
    const bool convertible = nb::hasattr(other, "__array_interface__") || nb::hasattr(other, "__dlpack__") ||
                             nb::hasattr(other, "__cuda_array_interface__") || PyList_Check(other.ptr()) ||
                             PyTuple_Check(other.ptr()) || nb::hasattr(other, "dtype");
    if (!convertible) {
      if (for_operator) return nb::object();
      throw nb::type_error(("tessel." + std::string(op_name(op.op)) + ": unsupported operand type " +
                            nb::cast<std::string>(nb::type_name(other.type())))
                               .c_str());
    }
    const Array converted = to_array(other, known.device());
    return wrap_array(a_arr ? op.aa(known, converted, out_arg, std::nullopt) : op.aa(converted, known, out_arg, std::nullopt));
  }
  if (for_operator) return nb::object();
  Scalar sa, sb;
  if (to_scalar(a, sa) && to_scalar(b, sb)) {
    throw nb::type_error(("tessel." + std::string(op_name(op.op)) + ": at least one operand must be an array").c_str());
  }
  // Two non-arrays: convert both (e.g. NumPy arrays passed to a tessel function).
  return wrap_array(op.aa(to_array(a), to_array(b), out_arg, std::nullopt));
}

nb::object apply_unary(ElementwiseOp op, Unary fn, nb::handle a) {
  if (is_array(a)) return wrap_array(fn(as_array(a), std::nullopt, std::nullopt));
  if (is_sym(a)) return nb::cast(Sym::apply(op, {nb::cast<Sym>(a)}));
  return nb::cast(fn(to_array(a), std::nullopt, std::nullopt));
}

nb::object not_implemented() { return nb::borrow(Py_NotImplemented); }

#define TESSEL_BINARY_OP(fn) \
  BinaryOp{ElementwiseOp::fn, static_cast<BinaryAA>(&tessel::fn), static_cast<BinaryAS>(&tessel::fn), static_cast<BinarySA>(&tessel::fn)}

// ---- binary functions: (Array API name, op); operators find their entry by name ----
#define TESSEL_BINARY_ENTRY(fn, python_name, ...) {python_name, TESSEL_BINARY_OP(fn)},
constexpr std::pair<const char*, BinaryOp> binary[] = {TESSEL_BINARY_OPS(TESSEL_BINARY_ENTRY)};
#undef TESSEL_BINARY_ENTRY
#define TESSEL_BINARY_DOC(fn, python_name, promote, result, kinds, doc) doc,
constexpr const char* binary_doc[] = {TESSEL_BINARY_OPS(TESSEL_BINARY_DOC)};
#undef TESSEL_BINARY_DOC

// The index of `name` in `binary`. Evaluated at compile time (every use below is constexpr), where
// an unknown name is an error: the throw is not a constant expression.
constexpr int binary_index(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(binary)); ++i) {
    if (name == binary[i].first) return i;
  }
  throw "binary_index: no binary op of that name";
}
constexpr int kAdd = binary_index("add"), kSubtract = binary_index("subtract"), kMultiply = binary_index("multiply");
constexpr int kDivide = binary_index("divide"), kFloorDivide = binary_index("floor_divide");
constexpr int kRemainder = binary_index("remainder"), kPow = binary_index("pow");
constexpr int kEqual = binary_index("equal"), kNotEqual = binary_index("not_equal"), kLess = binary_index("less");
constexpr int kLessEqual = binary_index("less_equal"), kGreater = binary_index("greater");
constexpr int kGreaterEqual = binary_index("greater_equal");
constexpr int kAnd = binary_index("bitwise_and"), kOr = binary_index("bitwise_or"), kXor = binary_index("bitwise_xor");
constexpr int kLeftShift = binary_index("bitwise_left_shift"), kRightShift = binary_index("bitwise_right_shift");

// ---- the Array's operator slots (see array_operator_slots in common.hpp) ----
// Binary slots get the operands in source order whichever of them is the Array (CPython calls the
// right operand's slot with the same order), so one function serves x + 1.0 and 1.0 + x.
PyObject* binary_slot(const BinaryOp& op, PyObject* a, PyObject* b) noexcept {
  try {
    nb::object r = apply_binary(op, a, b, true);
    if (!r.is_valid()) Py_RETURN_NOTIMPLEMENTED;
    return r.release().ptr();
  } catch (...) {
    return set_python_error_from_current_exception();
  }
}

// x op= y writes into x (out=x) and returns x itself. As NumPy, the result is cast to x's dtype
// when the cast is same-kind (float32 += float64), and an error otherwise (int32 += 1.5). It never changes x's dtype (Array API): an
// array operand whose promotion with x is another dtype is an error, even where NumPy's same_kind
// cast would store it (float32 += float64). Weak Python scalars keep x's dtype by promotion.
PyObject* inplace_slot(const BinaryOp& op, PyObject* self, PyObject* other) noexcept {
  try {
    nb::object r = apply_binary(op, self, other, true, &as_array(self));
    if (!r.is_valid()) Py_RETURN_NOTIMPLEMENTED;
    Py_INCREF(self);
    return self;
  } catch (...) {
    return set_python_error_from_current_exception();
  }
}

template <int I>
PyObject* binary_slot(PyObject* a, PyObject* b) noexcept { return binary_slot(binary[I].second, a, b); }
template <int I>
PyObject* inplace_slot(PyObject* a, PyObject* b) noexcept { return inplace_slot(binary[I].second, a, b); }

// pow(x, y, mod) has no array meaning: a modulus gives NotImplemented (a TypeError).
PyObject* power_slot(PyObject* a, PyObject* b, PyObject* mod) noexcept {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return binary_slot(binary[kPow].second, a, b);
}
PyObject* inplace_power_slot(PyObject* a, PyObject* b, PyObject* mod) noexcept {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return inplace_slot(binary[kPow].second, a, b);
}

// tp_richcompare: self is always the Array (CPython swaps the comparison for reflected calls).
PyObject* richcompare_slot(PyObject* self, PyObject* other, int op) noexcept {
  switch (op) {
    case Py_LT: return binary_slot(binary[kLess].second, self, other);
    case Py_LE: return binary_slot(binary[kLessEqual].second, self, other);
    case Py_EQ: return binary_slot(binary[kEqual].second, self, other);
    case Py_NE: return binary_slot(binary[kNotEqual].second, self, other);
    case Py_GT: return binary_slot(binary[kGreater].second, self, other);
    case Py_GE: return binary_slot(binary[kGreaterEqual].second, self, other);
    default: Py_RETURN_NOTIMPLEMENTED;
  }
}

template <Array (*fn)(const Array&, const OptionalArray&, const OptionalStream&)>
PyObject* unary_slot(PyObject* self) noexcept {
  try {
    return wrap_array(fn(as_array(self), std::nullopt, std::nullopt)).release().ptr();
  } catch (...) {
    return set_python_error_from_current_exception();
  }
}

// Host microseconds per call of `call`, run `calls` times after calls / 10 warm-up calls: the
// overhead probes' C++ side (scripts/overhead_probe.py, bench/peers/python_overhead.py).
template <class Call>
double host_us_per_call(int calls, Call&& call) {
  for (int i = 0; i < std::max(1, calls / 10); ++i) call();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
  return took.count() / std::max(1, calls);
}

}  // namespace

const PyType_Slot* array_operator_slots() {
  static const PyType_Slot slots[] = {
      {Py_nb_add, reinterpret_cast<void*>(&binary_slot<kAdd>)},
      {Py_nb_subtract, reinterpret_cast<void*>(&binary_slot<kSubtract>)},
      {Py_nb_multiply, reinterpret_cast<void*>(&binary_slot<kMultiply>)},
      {Py_nb_true_divide, reinterpret_cast<void*>(&binary_slot<kDivide>)},
      {Py_nb_floor_divide, reinterpret_cast<void*>(&binary_slot<kFloorDivide>)},
      {Py_nb_remainder, reinterpret_cast<void*>(&binary_slot<kRemainder>)},
      {Py_nb_power, reinterpret_cast<void*>(&power_slot)},
      {Py_nb_and, reinterpret_cast<void*>(&binary_slot<kAnd>)},
      {Py_nb_or, reinterpret_cast<void*>(&binary_slot<kOr>)},
      {Py_nb_xor, reinterpret_cast<void*>(&binary_slot<kXor>)},
      {Py_nb_lshift, reinterpret_cast<void*>(&binary_slot<kLeftShift>)},
      {Py_nb_rshift, reinterpret_cast<void*>(&binary_slot<kRightShift>)},
      {Py_nb_inplace_add, reinterpret_cast<void*>(&inplace_slot<kAdd>)},
      {Py_nb_inplace_subtract, reinterpret_cast<void*>(&inplace_slot<kSubtract>)},
      {Py_nb_inplace_multiply, reinterpret_cast<void*>(&inplace_slot<kMultiply>)},
      {Py_nb_inplace_true_divide, reinterpret_cast<void*>(&inplace_slot<kDivide>)},
      {Py_nb_inplace_floor_divide, reinterpret_cast<void*>(&inplace_slot<kFloorDivide>)},
      {Py_nb_inplace_remainder, reinterpret_cast<void*>(&inplace_slot<kRemainder>)},
      {Py_nb_inplace_power, reinterpret_cast<void*>(&inplace_power_slot)},
      {Py_nb_inplace_and, reinterpret_cast<void*>(&inplace_slot<kAnd>)},
      {Py_nb_inplace_or, reinterpret_cast<void*>(&inplace_slot<kOr>)},
      {Py_nb_inplace_xor, reinterpret_cast<void*>(&inplace_slot<kXor>)},
      {Py_nb_inplace_lshift, reinterpret_cast<void*>(&inplace_slot<kLeftShift>)},
      {Py_nb_inplace_rshift, reinterpret_cast<void*>(&inplace_slot<kRightShift>)},
      {Py_tp_richcompare, reinterpret_cast<void*>(&richcompare_slot)},
      {Py_nb_negative, reinterpret_cast<void*>(&unary_slot<static_cast<Unary>(&tessel::negative)>)},
      {Py_nb_positive, reinterpret_cast<void*>(&unary_slot<static_cast<Unary>(&tessel::positive)>)},
      {Py_nb_absolute, reinterpret_cast<void*>(&unary_slot<static_cast<Unary>(&tessel::abs)>)},
      {Py_nb_invert, reinterpret_cast<void*>(&unary_slot<static_cast<Unary>(&tessel::bitwise_not)>)},
      {0, nullptr},
  };
  return slots;
}

void register_ops(nb::module_& m) {
  nb::class_<Array>& cls = array_class();

  for (std::size_t i = 0; i < std::size(binary); ++i) {
    const BinaryOp* p = &binary[i].second;
    m.def(binary[i].first, [p](nb::handle x1, nb::handle x2, nb::handle out) -> nb::object {
      if (out.is_none()) return apply_binary(*p, x1, x2, false);
      return apply_binary(*p, x1, x2, false, &as_array(out));
    }, "x1"_a, "x2"_a, nb::kw_only(), "out"_a = nb::none(), binary_doc[i]);
  }

  // ---- operators (reflected and in-place too) ----
  struct OperatorSpec {
    const char* forward;
    const char* reflected;
    const char* inplace;
    const BinaryOp* op;
  };
  static const OperatorSpec operators[] = {
      {"__add__", "__radd__", "__iadd__", &binary[kAdd].second},
      {"__sub__", "__rsub__", "__isub__", &binary[kSubtract].second},
      {"__mul__", "__rmul__", "__imul__", &binary[kMultiply].second},
      {"__truediv__", "__rtruediv__", "__itruediv__", &binary[kDivide].second},
      {"__floordiv__", "__rfloordiv__", "__ifloordiv__", &binary[kFloorDivide].second},
      {"__mod__", "__rmod__", "__imod__", &binary[kRemainder].second},
      {"__pow__", "__rpow__", "__ipow__", &binary[kPow].second},
      {"__and__", "__rand__", "__iand__", &binary[kAnd].second},
      {"__or__", "__ror__", "__ior__", &binary[kOr].second},
      {"__xor__", "__rxor__", "__ixor__", &binary[kXor].second},
      {"__lshift__", "__rlshift__", "__ilshift__", &binary[kLeftShift].second},
      {"__rshift__", "__rrshift__", "__irshift__", &binary[kRightShift].second},
  };
  static const std::pair<const char*, const BinaryOp*> comparisons[] = {
      {"__eq__", &binary[kEqual].second},  {"__ne__", &binary[kNotEqual].second},  {"__lt__", &binary[kLess].second},
      {"__le__", &binary[kLessEqual].second}, {"__gt__", &binary[kGreater].second}, {"__ge__", &binary[kGreaterEqual].second},
  };
  // Symbolic values of ts.fuse traces get the same operators (apply_binary builds Sym nodes).
  nb::class_<Sym> sym_cls(m, "Sym", "A symbolic array inside a ts.fuse trace.");
  sym_cls.def("__repr__", [](const Sym&) { return std::string("<tessel.Sym>"); });
  auto def_operators = [&](auto& c, bool inplace) {
    for (const auto& spec : operators) {
      const BinaryOp* p = spec.op;
      c.def(spec.forward, [p](nb::handle self, nb::handle other) -> nb::object {
        nb::object r = apply_binary(*p, self, other, true);
        return r.is_valid() ? r : not_implemented();
      }, "other"_a.none());
      c.def(spec.reflected, [p](nb::handle self, nb::handle other) -> nb::object {
        nb::object r = apply_binary(*p, other, self, true);
        return r.is_valid() ? r : not_implemented();
      }, "other"_a.none());
      if (inplace) {
        c.def(spec.inplace, [p](nb::handle self, nb::handle other) -> nb::object {
          nb::object r = apply_binary(*p, self, other, true, &as_array(self));
          if (!r.is_valid()) return not_implemented();
          return nb::borrow(self);
        }, "other"_a.none());
      }
    }
    for (const auto& [name, op] : comparisons) {
      const BinaryOp* p = op;
      c.def(name, [p](nb::handle self, nb::handle other) -> nb::object {
        nb::object r = apply_binary(*p, self, other, true);
        return r.is_valid() ? r : not_implemented();
      }, "other"_a.none());
    }
  };
  def_operators(sym_cls, false);  // the Array's operators are type slots (array_operator_slots)
  sym_cls.def("__neg__", [](const Sym& a) { return negative(a); });
  sym_cls.attr("__hash__") = nb::none();
  cls.attr("__hash__") = nb::none();

  // ---- unary functions ----
  struct UnarySpec {
    const char* name;
    ElementwiseOp op;
    Unary fn;
    const char* doc;
  };
#define TESSEL_UNARY(fn, python_name, promote, result, kinds, doc) \
  UnarySpec{python_name, ElementwiseOp::fn, static_cast<Unary>(&tessel::fn), doc},
  static const UnarySpec unary[] = {TESSEL_UNARY_OPS(TESSEL_UNARY)};
#undef TESSEL_UNARY
  nb::list unary_names;
  for (const auto& spec : unary) {
    const UnarySpec* p = &spec;
    m.def(spec.name, [p](nb::handle x) { return apply_unary(p->op, p->fn, x); }, "x"_a, spec.doc);
    unary_names.append(spec.name);
  }
  // The op list's unary functions by Python name, for code that follows the list (tessel.torch).
  m.attr("_unary_functions") = nb::steal(PySequence_Tuple(unary_names.ptr()));
  // NumPy's spellings of the same functions (the op list's aliases).
#define TESSEL_ALIAS(alias, python_name) m.attr(#alias) = m.attr(python_name);
  TESSEL_ELEMENTWISE_ALIASES(TESSEL_ALIAS)
#undef TESSEL_ALIAS
  cls.def("conj", [](const Array& self) { return conj(self); });
  cls.def_prop_ro("real", [](const Array& self) { return real(self); });
  cls.def_prop_ro("imag", [](const Array& self) { return imag(self); });

  // For the overhead breakdown (scripts/overhead_probe.py): the per-call host time of tessel::add
  // called from C++ (no Python), so that x + y minus this is the Python layer's part.
  m.def("_time_add_in_cpp", [](const Array& x, const Array& y, nb::handle out, int calls) {
    const OptionalArray out_arg = out.is_none() ? OptionalArray() : OptionalArray(as_array(out));
    nb::gil_scoped_release release;
    return host_us_per_call(calls, [&] { (void)tessel::add(x, y, out_arg, std::nullopt); });
  }, "x"_a, "y"_a, "out"_a = nb::none(), "calls"_a = 20000,
  "Per-call microseconds of tessel::add(x, y[, out]) in a C++ loop (host time, no synchronization).");
  // The floor under every op: an empty cached kernel launched through jit::Kernel::launch.
  m.def("_time_launch_floor", [](int device, int calls) {
    const Device gpu = Device::cuda(device);
    jit::CompileRequest request;
    request.source = "extern \"C\" __global__ void tessel_launch_floor(float*) {}";
    request.name = "tessel_launch_floor";
    nb::gil_scoped_release release;
    const jit::Kernel kernel = jit::get_kernel(request, gpu);
    const Stream stream = current_stream(gpu);
    float* unused = nullptr;
    void* args[] = {&unused};
    const jit::LaunchConfig config{jit::Dim3(1), jit::Dim3(32), 0};
    stream.synchronize();
    const double us = host_us_per_call(calls, [&] { kernel.launch(config, args, stream); });
    stream.synchronize();
    return us;
  }, "device"_a, "calls"_a = 2000,
  "Per-call microseconds of launching an empty kernel from C++ (host time): the floor of a tiny op.");

  // ---- where and clip ----
  // The default of x1 and x2: a private object, so that where(condition) can be told apart.
  static nb::object* where_missing = new nb::object(nb::steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type))));
  m.def("where", [](nb::handle cond, nb::handle x1, nb::handle x2) -> nb::object {
    if (x1.is(*where_missing) || x2.is(*where_missing)) {
      // NumPy's one-argument where(condition) is nonzero(condition).
      if (!x1.is(*where_missing) || !x2.is(*where_missing)) {
        throw nb::type_error("where: give both x1 and x2, or neither (where(condition) is nonzero(condition))");
      }
      static nb::object* nonzero_fn = new nb::object(nb::module_::import_("tessel._tessel").attr("nonzero"));
      return (*nonzero_fn)(cond);
    }
    if (is_sym(cond) || is_sym(x1) || is_sym(x2)) {
      return nb::cast(Sym::apply(ElementwiseOp::where, {to_sym(cond), to_sym(x1), to_sym(x2)}));
    }
    const Array c = to_array(cond);
    // Python scalars become 0-d arrays of the other operand's dtype (weak scalars).
    Scalar s;
    auto operand = [&](nb::handle h, nb::handle other) -> Array {
      if (to_scalar(h, s)) {
        if (is_array(other)) {
          const Array& o = as_array(other);
          return full({}, s, result_type(o.dtype(), s.scalar_kind()), c.device());
        }
        return full({}, s, s.default_dtype(), c.device());
      }
      return to_array(h, c.device());
    };
    return nb::cast(where(c, operand(x1, x2), operand(x2, x1)));
  }, "condition"_a, "x1"_a = *where_missing, "x2"_a = *where_missing);
  m.def("clip", [](const Array& x, nb::handle min, nb::handle max) {
    Scalar lo, hi;
    const bool lo_scalar = min.is_none() || to_scalar(min, lo);
    const bool hi_scalar = max.is_none() || to_scalar(max, hi);
    if (lo_scalar && hi_scalar && !min.is_none() && !max.is_none()) return clip(x, lo, hi);  // keeps x's dtype
    if (lo_scalar && hi_scalar) {
      Array r = x;
      if (!min.is_none()) r = maximum(r, lo);
      if (!max.is_none()) r = minimum(r, hi);
      return min.is_none() && max.is_none() ? x.copy() : r;
    }
    Array r = x;
    if (!min.is_none()) r = lo_scalar ? maximum(r, lo) : maximum(r, to_array(min, x.device()));
    if (!max.is_none()) r = hi_scalar ? minimum(r, hi) : minimum(r, to_array(max, x.device()));
    return r;
  }, "x"_a, "min"_a = nb::none(), "max"_a = nb::none());
}

}  // namespace tessel::python
