// Matmul layer: ts.matmul (fused epilogues, aux output), the @ operators, ts.vecdot and the
// stateful plan ts.Matmul (tessel::MatmulPlan). The linalg namespace (python/tessel/linalg.py)
// builds on these. The GIL is released around every call that runs a product: a CPU product
// (OpenBLAS) can take long, and on CUDA it only launches, which costs nothing extra.
#include <nanobind/stl/string_view.h>

#include <string>

#include "common.hpp"
#include "tessel/core/config.hpp"
#include "tessel/ops/cast.hpp"

namespace tessel::python {
namespace {

Array optional_array(nb::handle h, const Device& device) {
  if (h.is_none()) return Array();
  return to_array(h, device);
}

// out= must be a tessel array (results are written into it, never into a converted copy).
Array out_array(nb::handle h, const char* op) {
  if (h.is_none()) return Array();
  if (!is_array(h)) {
    throw nb::type_error((std::string(op) + ": out must be a tessel.Array, got " +
                          nb::cast<std::string>(nb::type_name(h.type()))).c_str());
  }
  return as_array(h);  // matmul checks that it is writable
}

Array operand(nb::handle h, std::optional<Device> device = std::nullopt) {
  return is_array(h) ? as_array(h) : to_array(h, device);
}

bool is_float_or_complex(DType d) { return is_floating(d) || is_complex(d); }

// Array API type promotion for operands of different dtypes (NumPy does the same); equal
// dtypes go to the C++ op unchanged, so its dtype errors (bool, epilogues on complex...) stay.
void promote(Array& a, Array& b) {
  if (a.dtype() == b.dtype()) return;
  const DType d = result_type(a.dtype(), b.dtype());
  if (a.dtype() != d) a = astype(a, d);
  if (b.dtype() != d) b = astype(b, d);
}

// int8 @ int8 follows the Array API (int8, wrapping as NumPy's); C++'s matmul gives the int8 GEMM's
// int32 sums, which stay the result only for an int32 `out`. Other integer dtypes keep their dtype in C++.
bool int8_keeps_dtype(DType d, const Array& out) {
  return d == DType::int8 && !(out.defined() && out.dtype() == DType::int32);
}

// The shape of a @ b, or nullopt when the shapes do not fit (the C++ op then raises the error).
std::optional<Shape> result_shape(const Array& a_in, const Array& b_in) {
  if (a_in.ndim() == 0 || b_in.ndim() == 0) return std::nullopt;
  const Array a = a_in.ndim() == 1 ? a_in.expand_dims(0) : a_in;
  const Array b = b_in.ndim() == 1 ? b_in.expand_dims(1) : b_in;
  if (a.dim(-1) != b.dim(-2)) return std::nullopt;
  Shape batch;
  try {
    batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2));
  } catch (const tessel::ShapeError&) {
    return std::nullopt;
  }
  if (a_in.ndim() > 1) batch.push_back(a.dim(-2));
  if (b_in.ndim() > 1) batch.push_back(b.dim(-1));
  return batch;
}

struct MatmulArgs {
  Array a, b, out;
  nb::handle out_object;   // out as given: returned itself, as NumPy does
  MatmulOptions options;
  bool aux = false;        // return a fresh aux (the forward epilogues' output)
  bool bias_grad = false;  // return the column sums of d
};

MatmulArgs parse_args(nb::handle a_h, nb::handle b_h, nb::handle bias, std::string_view epilogue, double alpha,
                      double beta, nb::handle c, nb::handle out, std::string_view compute) {
  MatmulArgs r;
  Scalar scalar;
  for (nb::handle h : {a_h, b_h}) {
    if (to_scalar(h, scalar)) {  // the Array API forbids scalar operands (NumPy's matmul too)
      throw nb::type_error(("matmul: operands must be arrays, not the Python scalar " +
                            nb::cast<std::string>(nb::repr(h))).c_str());
    }
  }
  if (is_array(a_h)) {
    r.a = as_array(a_h);
    r.b = operand(b_h, r.a.device());
  } else {
    r.b = operand(b_h);
    r.a = operand(a_h, r.b.device());
  }
  promote(r.a, r.b);
  r.options.epilogue = parse_matmul_epilogue(epilogue);
  r.options.compute = parse_matmul_compute(compute);
  r.options.alpha = alpha;
  r.options.beta = beta;
  r.options.bias = optional_array(bias, r.a.device());
  r.options.c = optional_array(c, r.a.device());
  r.out = out_array(out, "matmul");
  r.out_object = out;
  return r;
}

// A fresh aux array of the result's shape and dtype; undefined when the shapes do not fit (the
// op then raises the shape error).
Array make_aux(const Array& a, const Array& b) {
  auto shape = result_shape(a, b);
  if (!shape) return Array();
  return empty(*shape, a.dtype(), a.device());
}

// d (out itself when given), then aux (when returned), then bias_grad (when asked for).
nb::object matmul_result(const Array& d, const MatmulArgs& args) {
  const nb::object d_object = args.out.defined() ? nb::borrow(args.out_object) : nb::cast(d);
  if (args.aux && args.bias_grad) return nb::make_tuple(d_object, args.options.aux, args.options.bias_grad);
  if (args.aux) return nb::make_tuple(d_object, args.options.aux);
  if (args.bias_grad) return nb::make_tuple(d_object, args.options.bias_grad);
  return d_object;
}

bool plain_product(const MatmulArgs& args) {
  const MatmulOptions& o = args.options;
  return !o.bias.defined() && o.epilogue == MatmulEpilogue::none && o.alpha == 1.0 && o.beta == 0.0 && !args.aux &&
         !args.bias_grad;
}

// A fresh bias_grad vector for a @ b: n elements, n = b's last dimension (1 for a 1-D b);
// undefined when the shapes do not fit (the op raises).
Array make_bias_grad(const Array& a, const Array& b) {
  if (!result_shape(a, b)) return Array();
  return empty({b.ndim() > 1 ? b.dim(-1) : 1}, a.dtype(), a.device());
}

nb::object run_matmul(MatmulArgs& args) {
  if (args.a.dtype() == args.b.dtype() && int8_keeps_dtype(args.a.dtype(), args.out) && plain_product(args)) {
    Array r;
    {
      nb::gil_scoped_release release;  // int16's exact product, wrapped to int8
      r = astype(tessel::matmul(astype(args.a, DType::int16), astype(args.b, DType::int16)), DType::int8);
      if (args.out.defined()) copyto(args.out, r);
    }
    return matmul_result(r, args);
  }
  if (args.aux) args.options.aux = make_aux(args.a, args.b);
  if (args.bias_grad) args.options.bias_grad = make_bias_grad(args.a, args.b);
  Array r;
  {
    nb::gil_scoped_release release;
    r = tessel::matmul(args.a, args.b, args.options, args.out);
  }
  return matmul_result(r, args);
}

// aux= of ts.matmul: a bool (return the forward epilogue's aux) or, for the *_grad epilogues, the
// forward's aux array (an input).
void parse_aux(MatmulArgs& args, nb::handle aux) {
  if (PyBool_Check(aux.ptr())) {
    args.aux = aux.ptr() == Py_True;
    return;
  }
  if (!is_matmul_grad_epilogue(args.options.epilogue)) {
    throw nb::type_error(("matmul: aux must be True or False with epilogue " +
                          std::string(matmul_epilogue_name(args.options.epilogue)) +
                          " (an aux array is the input of the *_grad epilogues), got " +
                          nb::cast<std::string>(nb::type_name(aux.type()))).c_str());
  }
  args.options.aux = operand(aux, args.a.device());
}

// a @ b for operators: NotImplemented for operand types tessel does not convert.
bool convertible(nb::handle h) {
  return is_array(h) || nb::hasattr(h, "__array_interface__") || nb::hasattr(h, "__dlpack__") ||
         nb::hasattr(h, "__cuda_array_interface__") || PyList_Check(h.ptr()) || PyTuple_Check(h.ptr());
}

nb::object matmul_operator(nb::handle a, nb::handle b) {
  if (!convertible(a) || !convertible(b)) return nb::borrow(Py_NotImplemented);
  MatmulArgs args = parse_args(a, b, nb::none(), "none", 1.0, 0.0, nb::none(), nb::none(), "default");
  return run_matmul(args);
}

// The plan of ts.Matmul, plus what the Python API adds: the planned arrays (execute() without
// arguments) and the aux flag (each execute then returns a fresh aux array).
struct PyMatmul {
  PyMatmul(MatmulArgs& args)
      : plan(args.a, args.b, args.options), a(args.a), b(args.b), aux(args.aux), bias_grad(args.bias_grad) {}
  MatmulPlan plan;
  Array a, b;
  bool aux;        // each execute returns a fresh aux (forward epilogues)
  bool bias_grad;  // each execute returns fresh column sums
};

nb::object candidate_list(const std::vector<MatmulCandidate>& candidates) {
  nb::list l;
  for (const auto& c : candidates) l.append(nb::cast(c));
  return l;
}

}  // namespace

void register_matmul(nb::module_& m) {
  const char* matmul_doc =
      "epilogue(alpha * (a @ b) + beta * c + bias) with NumPy matmul semantics (1-D operands, broadcast batch\n"
      "dimensions, transposed views without copies). epilogue: none, relu, gelu (erf), gelu_tanh, or the\n"
      "derivatives relu_grad, gelu_grad, gelu_tanh_grad (d = (alpha * (a @ b) + beta * c) * act'(aux), aux the\n"
      "forward's aux array); compute: default, fp32, tf32. aux=True returns (d, aux) where aux is the\n"
      "epilogue's input (the ReLU mask is aux > 0); bias_grad=True also returns d's column sums (last).";
  m.def("matmul", [](nb::handle a, nb::handle b, nb::handle bias, std::string_view epilogue, double alpha, double beta,
                     nb::handle c, nb::handle out, std::string_view compute, nb::handle aux, bool bias_grad) {
    MatmulArgs args = parse_args(a, b, bias, epilogue, alpha, beta, c, out, compute);
    parse_aux(args, aux);
    args.bias_grad = bias_grad;
    return run_matmul(args);
  }, "x1"_a, "x2"_a, nb::kw_only(), "bias"_a = nb::none(), "epilogue"_a = "none", "alpha"_a = 1.0,
        "beta"_a = 0.0, "c"_a = nb::none(), "out"_a = nb::none(), "compute"_a = "default", "aux"_a = false,
        "bias_grad"_a = false, matmul_doc);

  nb::class_<Array>& cls = array_class();
  cls.def("__matmul__", [](nb::handle self, nb::handle other) { return matmul_operator(self, other); }, "other"_a.none());
  cls.def("__rmatmul__", [](nb::handle self, nb::handle other) { return matmul_operator(other, self); }, "other"_a.none());
  // In place: the product goes to a temporary first (a GEMM must not write over its own input),
  // then into self, whose shape must be the product's.
  cls.def("__imatmul__", [](nb::handle self, nb::handle other) -> nb::object {
    nb::object r = matmul_operator(self, other);
    if (r.is(nb::handle(Py_NotImplemented))) return r;
    const Array& dst = as_array(self);
    const Array& product = nb::cast<const Array&>(r);
    if (product.shape() != dst.shape()) {
      throw tessel::ShapeError("Array.__imatmul__: the product has shape " + shape_str(product.shape()) +
                               " but the array has shape " + shape_str(dst.shape()));
    }
    {
      nb::gil_scoped_release release;
      copyto(dst, product);
    }
    return nb::borrow(self);
  }, "other"_a.none());

  m.def("vecdot", [](nb::handle x1_h, nb::handle x2_h, std::int64_t axis) {
    Array x1 = operand(x1_h), x2 = operand(x2_h, x1.device());
    promote(x1, x2);
    nb::gil_scoped_release release;
    if (!is_float_or_complex(x1.dtype())) {
      // Integers: exact, with the same checks as the C++ op for the contracted axis.
      if (x1.ndim() == 0 || x2.ndim() == 0 || axis >= 0 || -axis > std::min(x1.ndim(), x2.ndim()) ||
          x1.dim(axis) != x2.dim(axis)) {
        return vecdot(astype(x1, DType::float64), astype(x2, DType::float64), axis);  // raises the C++ error
      }
      if (is_bool(x1.dtype())) throw tessel::DTypeError("vecdot: needs numeric arrays, got bool");
      Array r = sum(multiply(x1, x2), std::vector<std::int64_t>{axis});
      return r.dtype() == x1.dtype() ? r : astype(r, x1.dtype());  // Array API: the promoted input dtype
    }
    return vecdot(x1, x2, axis);
  }, "x1"_a, "x2"_a, nb::kw_only(), "axis"_a = -1,
        "vecdot(x1, x2, /, *, axis=-1): sum(conj(x1) * x2, axis) with broadcasting (Array API).");

  nb::class_<MatmulCandidate>(m, "MatmulCandidate", "One algorithm a Matmul plan may run (and its autotune time).")
      .def_ro("name", &MatmulCandidate::name)
      .def_ro("time_ms", &MatmulCandidate::time_ms, "Median time of single autotune runs, -1 when not timed.")
      .def_ro("sustained_ms", &MatmulCandidate::sustained_ms,
              "Median time per run back to back (autotune finalists only, else -1); the smallest wins.")
      .def_ro("ok", &MatmulCandidate::ok)
      .def_ro("error", &MatmulCandidate::error)
      .def("__repr__", [](const MatmulCandidate& c) {
        std::string s = "MatmulCandidate(name='" + c.name + "', time_ms=" + std::to_string(c.time_ms);
        if (c.sustained_ms >= 0) s += ", sustained_ms=" + std::to_string(c.sustained_ms);
        if (!c.ok) s += ", error='" + c.error + "'";
        return s + ")";
      });

  nb::class_<PyMatmul>(m, "Matmul",
                       "A stateful matmul plan (nvmath-python's model): plan once for the layouts of a, b, bias and c,\n"
                       "autotune(), then execute() repeatedly on new arrays of the same layouts.")
      .def("__init__", [](PyMatmul* self, nb::handle a, nb::handle b, nb::handle bias, std::string_view epilogue,
                          double alpha, double beta, nb::handle c, std::string_view compute, nb::handle aux,
                          bool bias_grad) {
        MatmulArgs args = parse_args(a, b, bias, epilogue, alpha, beta, c, nb::none(), compute);
        parse_aux(args, aux);
        args.bias_grad = bias_grad;
        // The plan keeps these outputs only for their layouts: every execute() passes fresh ones.
        if (args.aux) args.options.aux = make_aux(args.a, args.b);
        if (bias_grad) args.options.bias_grad = make_bias_grad(args.a, args.b);
        nb::gil_scoped_release release;
        new (self) PyMatmul(args);
      }, "a"_a, "b"_a, nb::kw_only(), "bias"_a = nb::none(), "epilogue"_a = "none", "alpha"_a = 1.0, "beta"_a = 0.0,
           "c"_a = nb::none(), "compute"_a = "default", "aux"_a = false, "bias_grad"_a = false)
      .def("autotune", [](PyMatmul& self, int iterations) {
        std::vector<MatmulCandidate> result;
        {
          nb::gil_scoped_release release;
          result = self.plan.autotune(iterations);
        }
        return candidate_list(result);
      }, "iterations"_a = 10,
           "Times every candidate `iterations` times on the planned arrays, selects the fastest and caches it\n"
           "(memory and disk). Returns the candidates with their times.")
      .def("execute", [](PyMatmul& self, nb::handle a_h, nb::handle b_h, nb::handle bias, nb::handle c,
                         std::optional<double> alpha, std::optional<double> beta, nb::handle out,
                         nb::handle aux) -> nb::object {
        if (a_h.is_none() != b_h.is_none()) {
          throw tessel::ValueError("Matmul.execute: pass both a and b (new data) or neither (the planned arrays)");
        }
        Array a = a_h.is_none() ? self.a : operand(a_h, self.a.device());
        Array b = b_h.is_none() ? self.b : operand(b_h, self.a.device());
        MatmulExecuteOptions options;  // unset alpha/beta keep the planned values
        options.bias = optional_array(bias, a.device());
        options.c = optional_array(c, a.device());
        options.alpha = alpha;
        options.beta = beta;
        if (self.aux) options.aux = make_aux(a, b);
        if (!aux.is_none()) {
          if (self.aux) throw tessel::ValueError("Matmul.execute: this plan returns aux; aux= is the input of *_grad plans");
          options.aux = operand(aux, a.device());  // a *_grad plan's new input (else the planned one)
        }
        if (self.bias_grad) options.bias_grad = make_bias_grad(a, b);
        const Array out_arg = out_array(out, "Matmul.execute");
        Array r;
        {
          nb::gil_scoped_release release;
          r = self.plan.execute(a, b, options, out_arg);
        }
        MatmulArgs returned;
        returned.out = out_arg;
        returned.out_object = out;
        returned.options.aux = options.aux;
        returned.options.bias_grad = options.bias_grad;
        returned.aux = self.aux;
        returned.bias_grad = self.bias_grad;
        return matmul_result(r, returned);
      }, "a"_a = nb::none(), "b"_a = nb::none(), nb::kw_only(), "bias"_a = nb::none(), "c"_a = nb::none(),
           "alpha"_a = nb::none(), "beta"_a = nb::none(), "out"_a = nb::none(), "aux"_a = nb::none(),
           "Runs the planned product on new arrays with the planned layouts (ValueError naming both layouts\n"
           "otherwise), or on the planned arrays when a and b are omitted. bias/c/alpha/beta replace the planned\n"
           "ones when given; aux= is a *_grad plan's new input. Returns d, with aux (aux=True plans) and the\n"
           "column sums (bias_grad=True plans) after it as a tuple.")
      .def("pin", [](PyMatmul& self, nb::handle which) {
        if (PyLong_Check(which.ptr())) {
          self.plan.pin(nb::cast<int>(which));
        } else if (PyUnicode_Check(which.ptr())) {
          self.plan.pin(nb::cast<std::string>(which));
        } else {
          throw nb::type_error("Matmul.pin: pass a candidate index (int) or name (str)");
        }
      }, "candidate"_a, "Pins one candidate (index into .algorithms, or its name): execute runs only it.")
      .def_prop_ro("algorithms", [](const PyMatmul& self) { return candidate_list(self.plan.candidates()); },
                   "The candidates this plan may run, in order (the index is pin's argument).")
      .def_prop_ro("selected", [](const PyMatmul& self) -> MatmulCandidate { return self.plan.selected(); })
      .def_prop_ro("from_cache", [](const PyMatmul& self) { return self.plan.from_cache(); },
                   "True when the selection came from the autotune cache (memory or disk).")
      .def_prop_ro("cache_key", [](const PyMatmul& self) { return self.plan.cache_key(); })
      .def("__repr__", [](const PyMatmul& self) {
        return "Matmul(a=" + shape_str(self.a.shape()) + " " + dtype_name(self.a.dtype()) + ", b=" +
               shape_str(self.b.shape()) + ", device=" + self.a.device().str() + ", selected='" +
               self.plan.selected().name + "')";
      });

  m.def("clear_matmul_memory_cache", &clear_matmul_memory_cache,
        "Empties the in-memory matmul autotune and plan caches (the disk cache stays).");
  m.def("matmul_cache_dir", &matmul_cache_dir, "The folder of the matmul autotune disk cache.");
  m.def("set_matmul_cache_dir", &set_matmul_cache_dir, "folder"_a,
        "Overrides the matmul autotune disk cache folder for this process (\"\" restores the default,\n"
        "$TESSEL_CACHE_DIR/matmul). TESSEL_CACHE_DIR is read once per process; tests use this instead.");
  m.def("set_matmul_autotune", &set_matmul_autotune, "on"_a,
        "Turns autotuning on first use on or off for this process (TESSEL_MATMUL_AUTOTUNE=1 starts it on):\n"
        "while on, matmul autotunes each layout the first time it runs it, unless the autotune cache\n"
        "already has a winner for that layout.");
  m.def("matmul_autotune", [] { return config().matmul_autotune; }, "True while matmul autotunes each layout on first use.");
}

}  // namespace tessel::python
