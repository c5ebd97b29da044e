// Array layer: the Array class (a thin nb::class_ over tessel::Array), indexing (keys in indexing.cpp), host
// conversion, creation, manipulation, reductions and sorting.
#include <algorithm>
#include <limits>
#include <string>

#include "common.hpp"
#include "indexing.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/indexing.hpp"
#include "tessel/ops/sort_list.hpp"

namespace tessel::python {
namespace {

nb::tuple to_tuple(const std::vector<std::int64_t>& v) {
  nb::list l;
  for (auto x : v) l.append(x);
  return nb::tuple(l);
}

// A Python scalar of the array's single element.
nb::object item_object(const Array& a) {
  if (a.size() != 1) {
    throw tessel::ValueError("item: can only convert an array of size 1 to a Python scalar, got shape " +
                             shape_str(a.shape()));
  }
  const DType d = a.dtype();
  // Read the element with the GIL released (it may wait for device work), then box it.
  bool b = false;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  std::complex<double> c;
  double f = 0;
  {
    nb::gil_scoped_release release;
    if (is_bool(d)) b = a.item<bool>();
    else if (is_signed_integer(d)) i = a.item<std::int64_t>();
    else if (is_unsigned_integer(d)) u = a.item<std::uint64_t>();
    else if (is_complex(d)) c = a.item<std::complex<double>>();
    else f = a.item<double>();
  }
  if (is_bool(d)) return nb::bool_(b);
  if (is_signed_integer(d)) return nb::int_(i);
  if (is_unsigned_integer(d)) return nb::int_(u);
  if (is_complex(d)) return nb::steal(PyComplex_FromDoubles(c.real(), c.imag()));
  return nb::float_(f);
}

// A NumPy copy (bfloat16 becomes float32: NumPy has no bfloat16).
nb::object to_numpy(const Array& a, nb::handle dtype, nb::handle copy) {
  if (!copy.is_none() && !nb::cast<bool>(copy)) {
    // NumPy 2 semantics: copy=False must not copy. Zero-copy host views go through DLPack.
    throw tessel::ValueError("Array.__array__: copy=False is not supported (it always copies); use numpy.from_dlpack(x) "
                             "for a zero-copy view of a CPU array");
  }
  nb::handle np = numpy_module();
  Array src = a.dtype() == DType::bfloat16 ? astype(a, DType::float32) : a;
  nb::object out = np.attr("empty")(to_tuple(src.shape()), dtype_name(src.dtype()));
  const auto ptr = nb::cast<std::uintptr_t>(out.attr("__array_interface__")["data"][0]);
  {
    nb::gil_scoped_release release;  // waits for pending device work
    src.to_host(reinterpret_cast<void*>(ptr));
  }
  if (!dtype.is_none()) out = out.attr("astype")(dtype);
  return out;
}

double correction_to_ddof(double correction) {
  if (!(correction >= 0)) {
    throw tessel::ValueError("var/std: the correction must be a non-negative number, got " + std::to_string(correction));
  }
  return correction;
}

Array cast_if(const Array& a, nb::handle dtype) {
  auto d = to_optional_dtype(dtype);
  return d && *d != a.dtype() ? astype(a, *d) : a;
}

// The bindings of a reduction row, by its shape (reduce_list.hpp): the function, then the Array
// method, which takes axis positionally.
using Reduction = Array (*)(const Array&, const Axes&, bool, const OptionalStream&);
using Variance = Array (*)(const Array&, const Axes&, double, bool, const OptionalStream&);
using ArgReduction = Array (*)(const Array&, std::optional<std::int64_t>, bool, const OptionalStream&);
using Scan = Array (*)(const Array&, std::optional<std::int64_t>, const OptionalStream&);

void bind_dtype(nb::module_& m, nb::class_<Array>& cls, const char* name, Reduction fn, const char* doc) {
  // A given dtype is the result's too, as NumPy's (int32 sums are int64 otherwise).
  const auto call = [fn](const Array& a, nb::handle axis, nb::handle dtype, bool keepdims) {
    return cast_if(fn(cast_if(a, dtype), to_axes(axis), keepdims, std::nullopt), dtype);
  };
  m.def(name, call, "x"_a, nb::kw_only(), "axis"_a = nb::none(), "dtype"_a = nb::none(), "keepdims"_a = false, doc);
  cls.def(name, call, "axis"_a = nb::none(), nb::kw_only(), "dtype"_a = nb::none(), "keepdims"_a = false, doc);
}

void bind_plain(nb::module_& m, nb::class_<Array>& cls, const char* name, Reduction fn, const char* doc) {
  const auto call = [fn](const Array& a, nb::handle axis, bool keepdims) {
    return fn(a, to_axes(axis), keepdims, std::nullopt);
  };
  m.def(name, call, "x"_a, nb::kw_only(), "axis"_a = nb::none(), "keepdims"_a = false, doc);
  cls.def(name, call, "axis"_a = nb::none(), nb::kw_only(), "keepdims"_a = false, doc);
}

// The function's correction is the method's ddof (NumPy's name).
void bind_variance(nb::module_& m, nb::class_<Array>& cls, const char* name, Variance fn, const char* doc) {
  const auto call = [fn](const Array& a, nb::handle axis, double correction, bool keepdims) {
    return fn(a, to_axes(axis), correction_to_ddof(correction), keepdims, std::nullopt);
  };
  m.def(name, call, "x"_a, nb::kw_only(), "axis"_a = nb::none(), "correction"_a = 0.0, "keepdims"_a = false, doc);
  cls.def(name, call, "axis"_a = nb::none(), nb::kw_only(), "ddof"_a = 0.0, "keepdims"_a = false, doc);
}

void bind_arg(nb::module_& m, nb::class_<Array>& cls, const char* name, ArgReduction fn, const char* doc) {
  const auto call = [fn](const Array& a, std::optional<std::int64_t> axis, bool keepdims) {
    return fn(a, axis, keepdims, std::nullopt);
  };
  m.def(name, call, "x"_a, nb::kw_only(), "axis"_a = nb::none(), "keepdims"_a = false, doc);
  cls.def(name, call, "axis"_a = nb::none(), nb::kw_only(), "keepdims"_a = false, doc);
}

void bind_scan(nb::module_& m, nb::class_<Array>& cls, const char* name, Scan fn, const char* doc) {
  const auto call = [fn](const Array& a, std::optional<std::int64_t> axis) { return fn(a, axis, std::nullopt); };
  m.def(name, call, "x"_a, "axis"_a = nb::none(), doc);
  cls.def(name, call, "axis"_a = nb::none(), doc);
}

}  // namespace

namespace {
nb::class_<Array>* array_class_object = nullptr;
}

nb::class_<Array>& array_class() { return *array_class_object; }
PyTypeObject* array_type_object = nullptr;

void register_array(nb::module_& m) {
  array_class_object = new nb::class_<Array>(m, "Array", "An N-d array on a device (Array API 2023.12 array object).",
                                             nb::type_slots(array_operator_slots()));
  nb::class_<Array>& cls = *array_class_object;
  array_type_object = reinterpret_cast<PyTypeObject*>(cls.ptr());
  cls.def_prop_ro("shape", [](const Array& a) { return to_tuple(a.shape()); })
      .def_prop_ro("ndim", &Array::ndim)
      .def_prop_ro("size", &Array::size)
      .def_prop_ro("dtype", [](const Array& a) { return dtype_object(a.dtype()); })
      .def_prop_ro("device", &Array::device)
      .def_prop_ro("itemsize", &Array::itemsize)
      .def_prop_ro("nbytes", &Array::nbytes)
      .def_prop_ro("strides", [](const Array& a) {  // bytes, as NumPy
        std::vector<std::int64_t> s = a.strides();
        for (auto& x : s) x *= a.itemsize();
        return to_tuple(s);
      })
      .def_prop_ro("data_ptr", [](const Array& a) { return reinterpret_cast<std::uintptr_t>(a.data()); },
                   "Address of element (0, ..., 0) as an int.")
      .def_prop_ro("T", [](const Array& a) {
        if (a.ndim() != 2) throw tessel::ShapeError("Array.T: needs a 2-d array (Array API), got shape " + shape_str(a.shape()) + "; use permute_dims");
        return a.T();
      })
      .def_prop_ro("mT", [](const Array& a) {
        if (a.ndim() < 2) throw tessel::ShapeError("Array.mT: needs at least 2 dimensions, got shape " + shape_str(a.shape()));
        return a.swapaxes(-1, -2);
      })
      .def("is_contiguous", &Array::is_contiguous)
      .def("__len__", [](const Array& a) {
        if (a.ndim() == 0) throw nb::type_error("len() of a 0-d array");
        return a.shape()[0];
      })
      .def("__getitem__", [](const Array& a, nb::handle key) {
        const std::vector<IndexItem> items = index_items(key, a);
        const bool basic = std::none_of(items.begin(), items.end(), [](const IndexItem& i) { return i.array() != nullptr; });
        if (basic) return a.index(items);
        nb::gil_scoped_release release;  // advanced indexing may wait for the device (one read)
        return getitem(a, items);
      }, "key"_a.none())
      .def("__setitem__", [](const Array& a, nb::handle key, nb::handle value) {
        check_writable(a, "Array.__setitem__");
        const std::vector<IndexItem> items = index_items(key, a);
        Scalar s;
        if (to_scalar(value, s)) {
          nb::gil_scoped_release release;
          setitem(a, items, s);
        } else {
          const Array v = to_array(value, a.device());
          nb::gil_scoped_release release;
          setitem(a, items, v);
        }
      }, "key"_a.none(), "value"_a)
      .def("item", &item_object)
      .def("__bool__", [](const Array& a) {
        nb::object v = item_object(a);
        return PyObject_IsTrue(v.ptr()) == 1;
      })
      .def("__int__", [](const Array& a) { return nb::int_(item_object(a)); })
      .def("__index__", [](const Array& a) {
        if (!is_integer(a.dtype())) throw nb::type_error("only integer arrays can be used as an index");
        return nb::int_(item_object(a));
      })
      .def("__float__", [](const Array& a) { return nb::float_(item_object(a)); })
      .def("__complex__", [](const Array& a) {
        nb::object v = item_object(a);
        return nb::steal(PyObject_CallFunctionObjArgs(reinterpret_cast<PyObject*>(&PyComplex_Type), v.ptr(), nullptr));
      })
      .def("__repr__", [](const Array& a) {
        nb::gil_scoped_release release;
        return a.str();
      })
      .def("__array__", &to_numpy, "dtype"_a = nb::none(), "copy"_a = nb::none())
      .def("numpy", [](const Array& a) { return to_numpy(a, nb::none(), nb::none()); })
      .def("tolist", [](const Array& a) { return to_numpy(a, nb::none(), nb::none()).attr("tolist")(); })
      .def("to_device", [](const Array& a, nb::handle device, nb::handle stream) {
        const Device d = *to_optional_device(device);
        OptionalStream s;
        if (!stream.is_none()) s = nb::cast<Stream>(stream);
        return a.to(d, s);
      }, "device"_a, nb::kw_only(), "stream"_a = nb::none())
      .def("astype", [](const Array& a, nb::handle dtype, bool copy) {
        const DType d = to_dtype(dtype);
        if (!copy && d == a.dtype()) return a;
        return astype(a, d);
      }, "dtype"_a, nb::kw_only(), "copy"_a = true)
      .def("copy", [](const Array& a) { return a.copy(); })
      .def("contiguous", [](const Array& a) { return a.contiguous(); })
      .def("reshape", [](const Array& a, nb::args shape) {
        return a.reshape(shape.size() == 1 ? to_shape(shape[0]) : to_shape(shape));
      })
      .def("ravel", [](const Array& a) { return a.ravel(); })
      .def("flatten", [](const Array& a) { return a.flatten(); })
      .def("transpose", [](const Array& a, nb::args axes) {
        if (axes.size() == 0) return a.T();
        return a.permute(axes.size() == 1 ? to_shape(axes[0]) : to_shape(axes));
      })
      .def("swapaxes", &Array::swapaxes)
      .def("squeeze", [](const Array& a, nb::handle axis) {
        auto axes = to_axes(axis);
        return axes ? a.squeeze(*axes) : a.squeeze();
      }, "axis"_a = nb::none())
      .def("wait", [](const Array& a) {
        nb::gil_scoped_release release;
        a.wait();
      }, "The host waits for pending asynchronous writes to this array.")
      .def("__copy__", [](const Array& a) { return a.copy(); })
      .def("__deepcopy__", [](const Array& a, nb::handle) { return a.copy(); }, "memo"_a);

  // ---- reductions and scans: the rows of reduce_list.hpp, also as methods (NumPy style) ----
  nb::dict reductions;
#define TESSEL_BIND_REDUCTION(name, python_name, shape, doc) \
  bind_##shape(m, cls, python_name, &tessel::name, doc);     \
  reductions[python_name] = doc;
  TESSEL_REDUCTION_OPS(TESSEL_BIND_REDUCTION)
#undef TESSEL_BIND_REDUCTION
  // The rows' Python names and docstrings, for code that follows the list (the namespace functions
  // written in Python take their docstrings from here).
  m.attr("_reduction_functions") = reductions;

  // ---- sorting and searching ----
  // The rows of sort_list.hpp, in row order: sorting.py's and searching.py's docstrings.
  nb::dict rows;
  TESSEL_SORT_OPS(TESSEL_PYTHON_ROW_DOC)
  m.attr("_sorting_functions") = rows;
  m.def("_sort", [](const Array& a, std::int64_t axis) { return sort(a, axis); }, "x"_a, "axis"_a);
  m.def("_argsort", [](const Array& a, std::int64_t axis) { return argsort(a, axis); }, "x"_a, "axis"_a);
  m.def("searchsorted", [](const Array& sorted, nb::handle values, const std::string& side, nb::handle sorter) {
    if (!sorter.is_none()) throw tessel::ValueError("searchsorted: sorter is not supported; sort x1 first");
    if (side != "left" && side != "right") throw tessel::ValueError("searchsorted: side must be 'left' or 'right', got '" + side + "'");
    return searchsorted(sorted, to_array(values, sorted.device()), side == "right");
  }, "x1"_a, "x2"_a, nb::kw_only(), "side"_a = "left", "sorter"_a = nb::none());
  m.def("_unique", [](const Array& a, bool counts) {
    auto r = unique(a, counts);
    return nb::make_tuple(r.values, counts ? nb::cast(r.counts) : nb::none());
  }, "x"_a, "return_counts"_a = false);

  // ---- creation ----
  // full's and full_like's fill_value: a Python scalar, or, as NumPy takes them, a 0-d array (a
  // tessel or NumPy one, or a NumPy scalar), whose value fills and whose dtype is full's default.
  const auto fill_scalar = [](nb::handle fill_value, const char* op, std::optional<DType>* array_dtype) {
    Scalar s;
    if (to_scalar(fill_value, s)) return s;
    if (nb::hasattr(fill_value, "ndim") && nb::hasattr(fill_value, "item") && nb::hasattr(fill_value, "dtype")) {
      const auto ndim = nb::cast<std::int64_t>(fill_value.attr("ndim"));
      if (ndim != 0) {
        throw nb::type_error((std::string(op) + ": fill_value must be a Python scalar or a 0-d array, got an array of " +
                              std::to_string(ndim) + " dimensions").c_str());
      }
      if (to_scalar(fill_value.attr("item")(), s)) {
        if (array_dtype != nullptr) *array_dtype = to_dtype(fill_value.attr("dtype"));
        return s;
      }
    }
    throw nb::type_error((std::string(op) + ": fill_value must be a Python bool, int, float or complex, or a 0-d "
                          "array; got " + nb::cast<std::string>(nb::str(fill_value.type().attr("__name__")))).c_str());
  };
  m.def("empty", [](nb::handle shape, nb::handle dtype, nb::handle device) {
    return empty(to_shape(shape), to_optional_dtype(dtype).value_or(DType::float32), to_device_or_default(device));
  }, "shape"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("zeros", [](nb::handle shape, nb::handle dtype, nb::handle device) {
    return zeros(to_shape(shape), to_optional_dtype(dtype).value_or(DType::float32), to_device_or_default(device));
  }, "shape"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("ones", [](nb::handle shape, nb::handle dtype, nb::handle device) {
    return ones(to_shape(shape), to_optional_dtype(dtype).value_or(DType::float32), to_device_or_default(device));
  }, "shape"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("full", [fill_scalar](nb::handle shape, nb::handle fill_value, nb::handle dtype, nb::handle device) {
    std::optional<DType> array_dtype;
    const Scalar s = fill_scalar(fill_value, "full", &array_dtype);
    const DType d = to_optional_dtype(dtype).value_or(array_dtype ? *array_dtype
                                                      : s.kind() == Scalar::Kind::float_ ? DType::float32
                                                      : s.kind() == Scalar::Kind::complex_ ? DType::complex64
                                                                                          : s.default_dtype());
    return full(to_shape(shape), s, d, to_device_or_default(device));
  }, "shape"_a, "fill_value"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none());
#define TESSEL_LIKE(name)                                                                                \
  m.def(#name, [](const Array& x, nb::handle dtype, nb::handle device) {                                \
    return name(x, to_optional_dtype(dtype), to_optional_device(device));                               \
  }, "x"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none());
  TESSEL_LIKE(empty_like)
  TESSEL_LIKE(zeros_like)
  TESSEL_LIKE(ones_like)
#undef TESSEL_LIKE
  m.def("full_like", [fill_scalar](const Array& x, nb::handle fill_value, nb::handle dtype, nb::handle device) {
    const Scalar s = fill_scalar(fill_value, "full_like", nullptr);  // x's dtype is the default
    return full_like(x, s, to_optional_dtype(dtype), to_optional_device(device));
  }, "x"_a, "fill_value"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("_arange", [](nb::handle start, nb::handle stop, nb::handle step, nb::handle dtype, nb::handle device) {
    Scalar a, b, c;
    if (!to_scalar(start, a) || !to_scalar(stop, b) || !to_scalar(step, c)) {
      throw nb::type_error("arange: start, stop and step must be Python numbers");
    }
    return arange(a, b, c, to_optional_dtype(dtype), to_device_or_default(device));
  }, "start"_a, "stop"_a, "step"_a, "dtype"_a.none(), "device"_a.none());
  m.def("_linspace", [](nb::handle start, nb::handle stop, std::int64_t num, bool endpoint, nb::handle dtype, nb::handle device) {
    Scalar a, b;
    if (!to_scalar(start, a) || !to_scalar(stop, b)) throw nb::type_error("linspace: start and stop must be Python numbers");
    return linspace(a, b, num, endpoint, to_optional_dtype(dtype).value_or(DType::float32), to_device_or_default(device));
  }, "start"_a, "stop"_a, "num"_a, "endpoint"_a, "dtype"_a.none(), "device"_a.none());
  m.def("eye", [](std::int64_t n_rows, std::optional<std::int64_t> n_cols, nb::int_ k, nb::handle dtype, nb::handle device) {
    // Any Python int: a diagonal past an edge is all zeros, so k is clamped to one past each edge.
    int overflow = 0;
    std::int64_t diagonal = PyLong_AsLongLongAndOverflow(k.ptr(), &overflow);
    if (overflow != 0) diagonal = overflow > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
    const std::int64_t cols = n_cols.value_or(n_rows);
    if (n_rows >= 0 && cols >= 0) diagonal = std::clamp(diagonal, -n_rows, cols);
    return eye(n_rows, n_cols, diagonal, to_optional_dtype(dtype).value_or(DType::float32), to_device_or_default(device));
  }, "n_rows"_a, "n_cols"_a = nb::none(), nb::kw_only(), "k"_a = 0, "dtype"_a = nb::none(), "device"_a = nb::none());
  // C-contiguous host memory at `ptr` (a NumPy array's buffer): copied before this returns.
  m.def("_from_host_ptr", [](std::uintptr_t ptr, nb::handle shape, nb::handle dtype, nb::handle device) {
    const Shape s = to_shape(shape);
    const DType d = to_dtype(dtype);
    const Device dev = to_device_or_default(device);
    nb::gil_scoped_release release;
    return from_host(reinterpret_cast<const void*>(ptr), s, d, dev);
  }, "ptr"_a, "shape"_a, "dtype"_a, "device"_a.none());

  // ---- manipulation ----
  m.def("reshape", [](const Array& x, nb::handle shape, std::optional<bool> copy) {
    const Shape s = to_shape(shape);
    if (copy && *copy) return x.copy().reshape(s);
    if (copy && !*copy) return x.view(s);
    return x.reshape(s);
  }, "x"_a, "shape"_a, nb::kw_only(), "copy"_a = nb::none());
  m.def("permute_dims", [](const Array& x, nb::handle axes) { return x.permute(to_shape(axes)); }, "x"_a, "axes"_a);
  m.def("expand_dims", [](const Array& x, std::int64_t axis) { return x.expand_dims(axis); }, "x"_a, nb::kw_only(), "axis"_a = 0);
  m.def("squeeze", [](const Array& x, nb::handle axis) { return x.squeeze(to_shape(axis)); }, "x"_a, "axis"_a);
  m.def("broadcast_to", [](const Array& x, nb::handle shape) { return x.broadcast_to(to_shape(shape)); }, "x"_a, "shape"_a);
  m.def("concat", [](const std::vector<Array>& arrays, nb::handle axis) {
    if (axis.is_none()) {
      std::vector<Array> flat;
      for (const auto& a : arrays) flat.push_back(a.ravel());
      return concatenate(flat, 0);
    }
    return concatenate(arrays, nb::cast<std::int64_t>(axis));
  }, "arrays"_a, nb::kw_only(), nb::arg("axis").none() = 0);
  m.def("stack", [](const std::vector<Array>& arrays, std::int64_t axis) { return stack(arrays, axis); },
        "arrays"_a, nb::kw_only(), "axis"_a = 0);
  m.def("copyto", [](const Array& dst, nb::handle src) {
    Scalar s;
    if (to_scalar(src, s)) return fill(dst, s);
    copyto(dst, to_array(src, dst.device()));
  }, "dst"_a, "src"_a, "dst[...] = src with broadcasting and casting (asynchronous on the current stream).");
  m.def("_copy_to_host", [](const Array& a, std::uintptr_t ptr) {
    nb::gil_scoped_release release;
    a.to_host(reinterpret_cast<void*>(ptr));
  });
  // On the current stream; asynchronous into page-locked memory (Numba's copy_to_host(ary, stream)).
  m.def("_copy_to_host_async", [](const Array& a, std::uintptr_t ptr) {
    nb::gil_scoped_release release;
    a.to_host_async(reinterpret_cast<void*>(ptr));
  });
  m.def("_as_strided", [](const Array& a, nb::handle shape, nb::handle strides, std::int64_t offset) {
    return a.as_strided(to_shape(shape), to_shape(strides), offset);
  });

  // ---- random ----
  m.def("_random_seed", [](std::uint64_t s) { random::seed(s); });
  m.def("_random_uniform", [](nb::handle shape, double low, double high, nb::handle dtype, nb::handle device) {
    return random::uniform(to_shape(shape), low, high, to_optional_dtype(dtype).value_or(DType::float32), to_device_or_default(device));
  }, "shape"_a, "low"_a, "high"_a, "dtype"_a.none(), "device"_a.none());
  m.def("_random_normal", [](nb::handle shape, double mean, double stddev, nb::handle dtype, nb::handle device) {
    return random::normal(to_shape(shape), mean, stddev, to_optional_dtype(dtype).value_or(DType::float32), to_device_or_default(device));
  }, "shape"_a, "mean"_a, "stddev"_a, "dtype"_a.none(), "device"_a.none());
  m.def("_random_integers", [](nb::handle shape, std::int64_t low, std::int64_t high, nb::handle dtype, nb::handle device) {
    return random::integers(to_shape(shape), low, high, to_optional_dtype(dtype).value_or(DType::int64), to_device_or_default(device));
  }, "shape"_a, "low"_a, "high"_a, "dtype"_a.none(), "device"_a.none());
}

}  // namespace tessel::python
