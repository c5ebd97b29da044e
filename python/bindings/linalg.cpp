// Linear algebra: the native half of ts.linalg (python/tessel/linalg.py wraps the tuple results
// into the Array API's named tuples and composes the rest), and ts.linalg.LinAlgError.
//
// The *_ex functions only launch on CUDA; the plain ones read the info array (a synchronization
// on CUDA). Both release the GIL around the C++ call.
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>

#include <tuple>

#include "common.hpp"
#include "tessel/ops/linalg_list.hpp"

namespace tessel::python {
namespace {

PyObject* linalg_error = nullptr;

template <class F>
auto on_array(nb::handle h, F&& f) {
  const Array x = is_array(h) ? as_array(h) : to_array(h);
  nb::gil_scoped_release release;
  return f(x);
}

// A C++ result as the binding returns it: an Array, or a tuple of the result's fields in order
// (linalg.py wraps it into the named tuple of the Array API). Plain C++, so it runs without the GIL.
Array fields(Array r) { return r; }
std::tuple<Array, Array> fields(linalg::CholeskyExResult r) { return {r.factor, r.info}; }
std::tuple<Array, Array> fields(linalg::InvExResult r) { return {r.inverse, r.info}; }
std::tuple<Array, Array> fields(linalg::SolveExResult r) { return {r.result, r.info}; }
std::tuple<Array, Array> fields(linalg::SlogdetResult r) { return {r.sign, r.logabsdet}; }
std::tuple<Array, Array> fields(linalg::EighResult r) { return {r.eigenvalues, r.eigenvectors}; }
std::tuple<Array, Array, Array> fields(linalg::EighExResult r) { return {r.eigenvalues, r.eigenvectors, r.info}; }
std::tuple<Array, Array> fields(linalg::EigResult r) { return {r.eigenvalues, r.eigenvectors}; }
std::tuple<Array, Array> fields(linalg::QRResult r) { return {r.Q, r.R}; }
std::tuple<Array, Array, Array> fields(linalg::SVDResult r) { return {r.U, r.S, r.Vh}; }

// The bindings of a linalg row, by its shape (linalg_list.hpp); R is the C++ function's result.
template <class R>
void bind_matrix(nb::module_& m, const char* name, R (*f)(const Array&, const OptionalStream&), const char* doc) {
  m.def(name, [f](nb::handle x) {
    return on_array(x, [f](const Array& a) { return fields(f(a, std::nullopt)); });
  }, "x"_a, doc);
}

template <class R>
void bind_upper(nb::module_& m, const char* name, R (*f)(const Array&, bool, const OptionalStream&),
                const char* doc) {
  m.def(name, [f](nb::handle x, bool upper) {
    return on_array(x, [&](const Array& a) { return fields(f(a, upper, std::nullopt)); });
  }, "x"_a, nb::kw_only(), "upper"_a = false, doc);
}

template <class R>
void bind_two_matrices(nb::module_& m, const char* name, R (*f)(const Array&, const Array&, const OptionalStream&),
                       const char* doc) {
  m.def(name, [f](nb::handle x1, nb::handle x2) {
    const Array b = is_array(x2) ? as_array(x2) : to_array(x2);
    return on_array(x1, [&](const Array& a) { return fields(f(a, b, std::nullopt)); });
  }, "x1"_a, "x2"_a, doc);
}

template <class R>
void bind_mode(nb::module_& m, const char* name, R (*f)(const Array&, std::string_view, const OptionalStream&),
               const char* doc) {
  m.def(name, [f](nb::handle x, std::string_view mode) {
    return on_array(x, [&](const Array& a) { return fields(f(a, mode, std::nullopt)); });
  }, "x"_a, nb::kw_only(), "mode"_a = "reduced", doc);
}

template <class R>
void bind_full_matrices(nb::module_& m, const char* name, R (*f)(const Array&, bool, const OptionalStream&),
                        const char* doc) {
  m.def(name, [f](nb::handle x, bool full_matrices) {
    return on_array(x, [&](const Array& a) { return fields(f(a, full_matrices, std::nullopt)); });
  }, "x"_a, nb::kw_only(), "full_matrices"_a = true, doc);
}

}  // namespace

void register_linalg(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_linalg", "Native half of tessel.linalg (use tessel.linalg).");

  parent.def("set_linalg_streams", &set_linalg_streams, "streams"_a,
             "Splits each batched cuSOLVER call of the CUDA linear algebra (eigh's XsyevBatched) into up to\n"
             "`streams` parts of at least 64 matrices, run on the caller's stream and side streams and joined\n"
             "back into the caller's stream (TESSEL_LINALG_STREAMS=N starts it at N; default 4). While a CUDA\n"
             "graph capture is active a call runs on one stream. The CPU backend ignores it. ValueError\n"
             "outside 1..64.");
  parent.def("linalg_streams", [] { return config().linalg_streams; },
             "The streams a batched cuSOLVER call is split over (set_linalg_streams).");

  // tessel.ValueError is both a TesselError and a builtin ValueError.
  nb::handle base = parent.attr("ValueError");
  linalg_error = PyErr_NewExceptionWithDoc(
      "tessel.linalg.LinAlgError",
      "A numerical failure in a linear-algebra function: a singular matrix, one that is not positive\n"
      "definite, or no convergence. .batch_index is the flat index of the first failing matrix.",
      base.ptr(), nullptr);
  if (linalg_error == nullptr) throw nb::python_error();
  m.attr("LinAlgError") = nb::handle(linalg_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const linalg::LinAlgError& e) {
      nb::object exc = nb::steal(PyObject_CallFunction(linalg_error, "s", e.what()));
      if (!exc.is_valid()) return;
      exc.attr("batch_index") = e.batch_index();
      exc.attr("info") = e.info();
      PyErr_SetObject(linalg_error, exc.ptr());
    }
  });

  // ---- the factorizations and solvers: the rows of linalg_list.hpp ----
  nb::dict functions;
#define TESSEL_BIND_LINALG(name, python_name, shape, Result, doc) \
  bind_##shape(m, python_name, &linalg::name, doc);              \
  functions[python_name] = doc;
  TESSEL_LINALG_OPS(TESSEL_BIND_LINALG)
#undef TESSEL_BIND_LINALG
  // The rows' Python names and docstrings, in row order: tessel.linalg's functions of these names
  // take these docstrings, and its __all__ lists them.
  m.attr("_linalg_functions") = functions;

  m.def("compute_dtype", [](nb::handle dtype, const char* op) {
    return dtype_object(linalg::compute_dtype(to_dtype(dtype), op));
  }, "dtype"_a, "op"_a);
}

}  // namespace tessel::python
