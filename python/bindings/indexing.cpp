// Indexing: the key conversion behind Array.__getitem__ / __setitem__ (NumPy's rules: integers,
// slices, None, Ellipsis, bools, and integer or boolean arrays given as tessel arrays, NumPy
// arrays or nested lists) and the indexing functions, the rows of indexing_list.hpp.
#include "indexing.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "tessel/ops/backend_entry_points.hpp"
#include "tessel/ops/indexing.hpp"
#include "tessel/ops/indexing_list.hpp"

namespace tessel::python {
namespace {

[[noreturn]] void invalid_index(nb::handle item) {
  throw tessel::IndexError("only integers, slices (`:`), ellipsis (`...`), None (`newaxis`) and integer or boolean "
                           "arrays are valid indices, got " +
                           nb::cast<std::string>(nb::repr(item)));
}

// An index array on x's device, checked to be integer or boolean.
IndexItem array_item(Array a, const Array& x) {
  if (!is_integer(a.dtype()) && a.dtype() != DType::bool_) {
    throw tessel::IndexError("arrays used as indices must be of integer (or boolean) type, got " +
                             std::string(dtype_name(a.dtype())) + " of shape " + shape_str(a.shape()));
  }
  if (a.ndim() == 0 && is_integer(a.dtype())) {
    nb::gil_scoped_release release;
    return IndexItem(a.item<std::int64_t>());  // a 0-d integer array is an integer (NumPy)
  }
  if (a.device() != x.device()) {
    nb::gil_scoped_release release;
    a = a.to(x.device());
  }
  return IndexItem(a);
}

// A sequence or NumPy array as an index array: bools stay bools, integers become int64, an empty
// sequence is an empty integer index (NumPy's rule).
IndexItem host_array_item(nb::handle h, const Array& x) {
  nb::handle np = numpy_module();
  nb::object arr = np.attr("asarray")(h);
  const std::string kind = nb::cast<std::string>(arr.attr("dtype").attr("kind"));
  if (kind == "b") {
    // bool
  } else if (kind == "i" || kind == "u") {
    if (!nb::isinstance(h, np.attr("ndarray"))) arr = arr.attr("astype")("int64");
  } else if (nb::cast<std::int64_t>(arr.attr("size")) == 0 && !nb::isinstance(h, np.attr("ndarray"))) {
    arr = arr.attr("astype")("int64");
  } else {
    throw tessel::IndexError("arrays used as indices must be of integer (or boolean) type, got " +
                             nb::cast<std::string>(arr.attr("dtype").attr("name")) + " from " +
                             nb::cast<std::string>(nb::repr(h)));
  }
  return array_item(to_array(arr, x.device()), x);
}

// A slice bound: None, or an integer clipped to the int64 range (as Python's slice.indices).
std::optional<std::int64_t> optional_index(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  const Py_ssize_t v = PyNumber_AsSsize_t(h.ptr(), nullptr);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return static_cast<std::int64_t>(v);
}

IndexItem index_item(nb::handle h, const Array& x) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) {
    return IndexItem(full({}, Scalar(o == Py_True), DType::bool_, x.device()));
  }
  if (PyLong_Check(o)) return IndexItem(nb::cast<std::int64_t>(h));
  if (PySlice_Check(o)) {
    const auto step = optional_index(h.attr("step"));
    // -2^63 has no negation; Python's slice.indices clamps the step the same way.
    const std::int64_t s = step ? std::max<std::int64_t>(*step, -std::numeric_limits<std::int64_t>::max()) : 1;
    return IndexItem(Slice(optional_index(h.attr("start")), optional_index(h.attr("stop")), s));
  }
  if (h.is_none()) return IndexItem(newaxis);
  if (o == Py_Ellipsis) return IndexItem(ellipsis);
  if (is_array(h)) return array_item(as_array(h), x);
  nb::handle np = numpy_module();
  if (nb::isinstance(h, np.attr("bool_"))) return IndexItem(full({}, Scalar(nb::cast<bool>(h)), DType::bool_, x.device()));
  // NumPy integer scalars (they have a shape, (), but are no arrays) and other __index__ objects
  if (PyIndex_Check(o) && (!nb::hasattr(h, "shape") || nb::isinstance(h, np.attr("integer")))) {
    const Py_ssize_t v = PyNumber_AsSsize_t(o, PyExc_IndexError);
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    return IndexItem(static_cast<std::int64_t>(v));
  }
  if (PyList_Check(o) || PyTuple_Check(o) || nb::isinstance(h, np.attr("ndarray"))) return host_array_item(h, x);
  if (nb::hasattr(h, "__dlpack__") || nb::hasattr(h, "__cuda_array_interface__")) {
    return array_item(to_array(h, x.device()), x);
  }
  invalid_index(h);
}

// The bindings of an indexing row, by its shape (indexing_list.hpp); f is the row's C++ function.
template <class F>
auto gather_call(F f) {
  return [f](const Array& x, nb::handle indices, std::optional<std::int64_t> axis) {
    const Array i = to_array(indices, x.device());
    nb::gil_scoped_release release;  // may wait for the device (the bounds flag)
    return f(x, i, axis);
  };
}

template <class F>
void bind_gather(nb::module_& m, const char* name, F f, const char* doc) {
  m.def(name, gather_call(f), "x"_a, "indices"_a, nb::kw_only(), "axis"_a = nb::none(), doc);
}

template <class F>
void bind_gather_along(nb::module_& m, const char* name, F f, const char* doc) {
  m.def(name, gather_call(f), "x"_a, "indices"_a, nb::kw_only(), "axis"_a.none() = -1, doc);
}

template <class F>
void bind_scatter_along(nb::module_& m, const char* name, F f, const char* doc) {
  m.def(name, [f](const Array& arr, nb::handle indices, nb::handle values, nb::handle axis) {
    const Array i = to_array(indices, arr.device());
    const std::optional<std::int64_t> a = axis.is_none() ? std::nullopt : std::optional<std::int64_t>(nb::cast<std::int64_t>(axis));
    Scalar s;
    if (to_scalar(values, s)) {
      nb::gil_scoped_release release;
      f(arr, i, s, a);
      return;
    }
    const Array v = to_array(values, arr.device());
    nb::gil_scoped_release release;
    f(arr, i, v, a);
  }, "arr"_a, "indices"_a, "values"_a, "axis"_a.none(), doc);
}

template <class F>
void bind_per_axis(nb::module_& m, const char* name, F f, const char* doc) {
  m.def(name, [f](const Array& x) {
    std::vector<Array> r;
    {
      nb::gil_scoped_release release;
      r = f(x);
    }
    nb::list l;
    for (auto& a : r) l.append(nb::cast(std::move(a)));
    return nb::tuple(l);
  }, "x"_a, doc);
}

}  // namespace

std::vector<IndexItem> index_items(nb::handle key, const Array& x) {
  std::vector<IndexItem> items;
  if (PyTuple_Check(key.ptr())) {
    for (nb::handle h : key) items.push_back(index_item(h, x));
  } else {
    items.push_back(index_item(key, x));
  }
  return items;
}

void register_indexing(nb::module_& m) {
  // ---- the indexing functions: the rows of indexing_list.hpp ----
  // Each row's C++ function goes to its shape's binder as one callable over all its overloads
  // (put_along_axis takes an array or a scalar of values).
#define TESSEL_BIND_INDEXING(name, python_name, shape, doc) \
  bind_##shape(m, python_name, [](const auto&... args) { return tessel::name(args...); }, doc);
  TESSEL_INDEXING_OPS(TESSEL_BIND_INDEXING)
#undef TESSEL_BIND_INDEXING

  m.def("_take_unchecked", [](const Array& x, const Array& indices, std::optional<std::int64_t> axis) {
    return internal::take_unchecked(x, indices, axis);
  }, "x"_a, "indices"_a, "axis"_a = nb::none());
  m.def("_setitem_unchecked", [](const Array& x, nb::handle key, nb::handle value) {
    const std::vector<IndexItem> items = index_items(key, x);
    Scalar s;
    if (!to_scalar(value, s)) throw nb::type_error("_setitem_unchecked: the value must be a Python scalar");
    nb::gil_scoped_release release;
    internal::setitem_unchecked(x, items, s);
  }, "x"_a, "key"_a, "value"_a);
}

}  // namespace tessel::python
