// Linear algebra: the native half of ts.linalg (python/tessel/linalg.py wraps the tuple results
// into the Array API's named tuples and composes the rest), and ts.linalg.LinAlgError.
//
// The *_ex functions only launch on CUDA; the plain ones read the info array (a synchronization
// on CUDA). Both release the GIL around the C++ call.
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>

#include <tuple>

#include "common.hpp"

namespace tessel::python {
namespace {

PyObject* linalg_error = nullptr;

template <class F>
auto on_array(nb::handle h, F&& f) {
  const Array x = is_array(h) ? as_array(h) : to_array(h);
  nb::gil_scoped_release release;
  return f(x);
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

  m.def("cholesky", [](nb::handle x, bool upper) {
    return on_array(x, [&](const Array& a) { return linalg::cholesky(a, upper); });
  }, "x"_a, nb::kw_only(), "upper"_a = false);
  m.def("cholesky_ex", [](nb::handle x, bool upper) {
    return on_array(x, [&](const Array& a) {
      auto r = linalg::cholesky_ex(a, upper);
      return std::make_tuple(r.factor, r.info);
    });
  }, "x"_a, nb::kw_only(), "upper"_a = false);
  m.def("inv", [](nb::handle x) { return on_array(x, [](const Array& a) { return linalg::inv(a); }); }, "x"_a);
  m.def("inv_ex", [](nb::handle x) {
    return on_array(x, [](const Array& a) {
      auto r = linalg::inv_ex(a);
      return std::make_tuple(r.inverse, r.info);
    });
  }, "x"_a);
  m.def("solve", [](nb::handle x1, nb::handle x2) {
    const Array b = is_array(x2) ? as_array(x2) : to_array(x2);
    return on_array(x1, [&](const Array& a) { return linalg::solve(a, b); });
  }, "x1"_a, "x2"_a);
  m.def("solve_ex", [](nb::handle x1, nb::handle x2) {
    const Array b = is_array(x2) ? as_array(x2) : to_array(x2);
    return on_array(x1, [&](const Array& a) {
      auto r = linalg::solve_ex(a, b);
      return std::make_tuple(r.result, r.info);
    });
  }, "x1"_a, "x2"_a);
  m.def("det", [](nb::handle x) { return on_array(x, [](const Array& a) { return linalg::det(a); }); }, "x"_a);
  m.def("slogdet", [](nb::handle x) {
    return on_array(x, [](const Array& a) {
      auto r = linalg::slogdet(a);
      return std::make_tuple(r.sign, r.logabsdet);
    });
  }, "x"_a);
  m.def("eigh", [](nb::handle x) {
    return on_array(x, [](const Array& a) {
      auto r = linalg::eigh(a);
      return std::make_tuple(r.eigenvalues, r.eigenvectors);
    });
  }, "x"_a);
  m.def("eigh_ex", [](nb::handle x) {
    return on_array(x, [](const Array& a) {
      auto r = linalg::eigh_ex(a);
      return std::make_tuple(r.eigenvalues, r.eigenvectors, r.info);
    });
  }, "x"_a);
  m.def("eigvalsh", [](nb::handle x) { return on_array(x, [](const Array& a) { return linalg::eigvalsh(a); }); }, "x"_a);
  m.def("eig", [](nb::handle x) {
    return on_array(x, [](const Array& a) {
      auto r = linalg::eig(a);
      return std::make_tuple(r.eigenvalues, r.eigenvectors);
    });
  }, "x"_a);
  m.def("eigvals", [](nb::handle x) { return on_array(x, [](const Array& a) { return linalg::eigvals(a); }); }, "x"_a);
  m.def("qr", [](nb::handle x, std::string_view mode) {
    return on_array(x, [&](const Array& a) {
      auto r = linalg::qr(a, mode);
      return std::make_tuple(r.Q, r.R);
    });
  }, "x"_a, nb::kw_only(), "mode"_a = "reduced");
  m.def("svd", [](nb::handle x, bool full_matrices) {
    return on_array(x, [&](const Array& a) {
      auto r = linalg::svd(a, full_matrices);
      return std::make_tuple(r.U, r.S, r.Vh);
    });
  }, "x"_a, nb::kw_only(), "full_matrices"_a = true);
  m.def("svdvals", [](nb::handle x) { return on_array(x, [](const Array& a) { return linalg::svdvals(a); }); }, "x"_a);
  m.def("compute_dtype", [](nb::handle dtype, const char* op) {
    return dtype_object(linalg::compute_dtype(to_dtype(dtype), op));
  }, "dtype"_a, "op"_a);
}

}  // namespace tessel::python
