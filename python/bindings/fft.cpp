// FFT layer: the native half of ts.fft (python/tessel/fft.py re-exports these functions as they
// are, with no Python wrapper): the Array API fft extension plus NumPy's fft2 family, the
// stateful plan ts.fft.Plan (tessel::fft::Plan) and the cuFFT plan cache controls.
//
// Hot path (ts.fft.fft(x) on a CUDA array): one nanobind call with typed defaults, a type check
// of x, and the C++ function; no Python frames, no string building. CUDA transforms only launch,
// so the GIL stays held; CPU transforms run to completion, so they release it.
#include <nanobind/stl/string_view.h>

#include "common.hpp"
#include "tessel/ops/fft_list.hpp"

namespace tessel::python {
namespace {

// Runs f(x) with x an Array (converted from NumPy arrays, lists, DLPack producers when needed).
template <class F>
Array with_array(nb::handle h, F&& f) {
  if (is_array(h)) {
    const Array& x = as_array(h);
    if (x.device().is_cuda()) return f(x);
    nb::gil_scoped_release release;
    return f(x);
  }
  const Array x = to_array(h);
  nb::gil_scoped_release release;
  return f(x);
}

const char* transform_name(fft::Transform t) {
  switch (t) {
    case fft::Transform::fft: return "fft";
    case fft::Transform::ifft: return "ifft";
    case fft::Transform::rfft: return "rfft";
    default: return "irfft";
  }
}

Device device_or_default(nb::handle h) { return to_device_or_default(h); }

// The bindings of an fft row, by its shape (fft_list.hpp).
using OneAxis = Array (*)(const Array&, fft::OptionalLength, std::int64_t, std::string_view, const OptionalStream&);
using ManyAxes = Array (*)(const Array&, const fft::OptionalAxes&, const fft::OptionalAxes&, std::string_view,
                           const OptionalStream&);
using Frequencies = Array (*)(std::int64_t, double, DType, Device, const OptionalStream&);
using Shift = Array (*)(const Array&, const fft::OptionalAxes&, const OptionalStream&);

void bind_one_axis(nb::module_& m, const char* name, OneAxis f, const char* doc) {
  m.def(name, [f](nb::handle x, std::optional<std::int64_t> n, std::int64_t axis, std::string_view norm) {
    return with_array(x, [&](const Array& a) { return f(a, n, axis, norm, std::nullopt); });
  }, "x"_a, nb::kw_only(), "n"_a = nb::none(), "axis"_a = -1, "norm"_a = "backward", doc);
}

auto many_axes(ManyAxes f) {
  return [f](nb::handle x, nb::handle s, nb::handle axes, std::string_view norm) {
    const fft::OptionalAxes s_v = to_axes(s), axes_v = to_axes(axes);
    return with_array(x, [&](const Array& a) { return f(a, s_v, axes_v, norm, std::nullopt); });
  };
}

void bind_n_axes(nb::module_& m, const char* name, ManyAxes f, const char* doc) {
  m.def(name, many_axes(f), "x"_a, nb::kw_only(), "s"_a = nb::none(), "axes"_a = nb::none(), "norm"_a = "backward",
        doc);
}

// The 2-D forms default to axes (-2, -1), as NumPy.
void bind_two_axes(nb::module_& m, const char* name, ManyAxes f, const char* doc) {
  m.def(name, many_axes(f), "x"_a, nb::kw_only(), "s"_a = nb::none(), "axes"_a = nb::make_tuple(-2, -1),
        "norm"_a = "backward", doc);
}

// Array API: the default real floating dtype (tessel's is float32); dtype= as in 2024.12.
void bind_freq(nb::module_& m, const char* name, Frequencies f, const char* doc) {
  m.def(name, [f](std::int64_t n, double d, nb::handle dtype, nb::handle device) {
    return f(n, d, to_optional_dtype(dtype).value_or(DType::float32), device_or_default(device), std::nullopt);
  }, "n"_a, nb::kw_only(), "d"_a = 1.0, "dtype"_a = nb::none(), "device"_a = nb::none(), doc);
}

void bind_shift(nb::module_& m, const char* name, Shift f, const char* doc) {
  m.def(name, [f](nb::handle x, nb::handle axes) {
    const fft::OptionalAxes a = to_axes(axes);
    return with_array(x, [&](const Array& v) { return f(v, a, std::nullopt); });
  }, "x"_a, nb::kw_only(), "axes"_a = nb::none(), doc);
}

}  // namespace

void register_fft(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_fft", "Native half of tessel.fft (use tessel.fft).");

  // ---- the transforms and their helpers: the rows of fft_list.hpp ----
  nb::dict functions;
#define TESSEL_BIND_FFT(name, python_name, shape, doc) \
  bind_##shape(m, python_name, &fft::name, doc);       \
  functions[python_name] = doc;
  TESSEL_FFT_OPS(TESSEL_BIND_FFT)
#undef TESSEL_BIND_FFT
  // The rows' Python names and docstrings, in row order: tessel.fft exports these names.
  m.attr("_fft_functions") = functions;

  nb::class_<fft::Plan>(m, "Plan",
                        "A stateful FFT plan (nvmath-python's model): plan once for x's layout (shape, strides, dtype,\n"
                        "device), then execute(x) on new arrays of that layout. transform: fft, ifft, rfft or irfft\n"
                        "over `axes` (default all; the real axis is the last one) with lengths `s`.")
      .def("__init__", [](fft::Plan* self, const Array& like, std::string_view transform, nb::handle s, nb::handle axes,
                          std::string_view norm) {
        const fft::Transform t = fft::parse_transform(transform);
        const fft::OptionalAxes s_v = to_axes(s), axes_v = to_axes(axes);
        nb::gil_scoped_release release;  // creates the cuFFT plans
        new (self) fft::Plan(like, t, s_v, axes_v, norm);
      }, "x"_a, "transform"_a = "fft", nb::kw_only(), "s"_a = nb::none(), "axes"_a = nb::none(), "norm"_a = "backward")
      .def("execute", [](const fft::Plan& self, nb::handle x) {
        return with_array(x, [&](const Array& a) { return self.execute(a); });
      }, "x"_a, "Transforms x, which must have the planned layout (ValueError naming both layouts otherwise).")
      .def("__call__", [](const fft::Plan& self, nb::handle x) {
        return with_array(x, [&](const Array& a) { return self.execute(a); });
      }, "x"_a)
      .def_prop_ro("layout", &fft::Plan::layout)
      .def_prop_ro("transform", [](const fft::Plan& self) { return transform_name(self.transform()); })
      .def("__repr__", [](const fft::Plan& self) {
        return std::string("fft.Plan(") + transform_name(self.transform()) + ", " + self.layout() + ")";
      });

  // ---- the cuFFT plan cache of a CUDA device ----
  m.def("plan_cache_info", [](nb::handle device) {
    const fft::PlanCacheInfo i = fft::plan_cache_info(device_or_default(device));
    nb::dict d;
    d["plans"] = i.plans;
    d["max_plans"] = i.max_plans;
    d["workspace_bytes"] = i.workspace_bytes;
    d["max_workspace_bytes"] = i.max_workspace_bytes;
    d["hits"] = i.hits;
    d["misses"] = i.misses;
    d["evictions"] = i.evictions;
    return d;
  }, "device"_a = nb::none(), "The cuFFT plan cache of a CUDA device (all zero on the CPU or without CUDA).");
  m.def("set_plan_cache_limits", [](std::size_t max_plans, std::size_t max_workspace_bytes, nb::handle device) {
    fft::set_plan_cache_limits(device_or_default(device), max_plans, max_workspace_bytes);
  }, "max_plans"_a, "max_workspace_bytes"_a, "device"_a = nb::none());
  m.def("clear_plan_cache", [](nb::handle device) { fft::clear_plan_cache(device_or_default(device)); },
        "device"_a = nb::none());
}

}  // namespace tessel::python
