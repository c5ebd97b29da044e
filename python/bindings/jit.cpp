// JIT layer: fused kernels from Python traces (ts.fuse), ElementwiseKernel and RawKernel
// (CuPy-style), and the host compiler of the CPU backend (_get_host_kernel / _HostKernel, for
// tessel.kernel). Compiles go through the C++ kernel caches; the GIL is released around them.
#include <cstring>
#include <optional>
#include <string>

#include "common.hpp"
#include "fused_c_api.hpp"
#include "interop.hpp"
#include "tessel/jit/host_compiler.hpp"
#include "tessel/profile/checks.hpp"

namespace tessel::python {
namespace {

jit::Dim3 to_dim3(nb::handle h, const char* what) {
  if (PyLong_Check(h.ptr())) return jit::Dim3(nb::cast<unsigned int>(h));
  std::vector<unsigned int> v;
  for (nb::handle x : h) v.push_back(nb::cast<unsigned int>(x));
  if (v.empty() || v.size() > 3) {
    throw tessel::ValueError(std::string("RawKernel: ") + what + " must be an int or a tuple of 1 to 3 ints");
  }
  v.resize(3, 1);
  return jit::Dim3(v[0], v[1], v[2]);
}

// A launch shape of 1 to 3 ints (an int alone is one), for the host kernels' grid and block.
void to_uint3(nb::handle h, const char* what, std::uint32_t out[3]) {
  out[0] = out[1] = out[2] = 1;
  if (PyLong_Check(h.ptr())) {
    out[0] = nb::cast<std::uint32_t>(h);
    return;
  }
  std::size_t n = 0;
  for (nb::handle x : h) {
    if (n == 3) break;
    out[n++] = nb::cast<std::uint32_t>(x);
  }
  if (n == 0 || nb::len(h) > 3) {
    throw tessel::ValueError(std::string("_HostKernel.launch: ") + what + " must be an int or a tuple of 1 to 3 ints");
  }
}

// _HostKernel.launch: one packed value per parameter (bytes), the launch record filled from the
// grid, block and shared bytes; runs on this thread with the GIL released.
void host_kernel_launch(const jit::HostKernel& k, nb::handle grid, nb::handle block, std::uint64_t shared_bytes,
                        nb::handle params, int num_threads) {
  jit::TsHostLaunch record{};
  to_uint3(grid, "grid", record.grid);
  to_uint3(block, "block", record.block);
  record.shared_bytes = shared_bytes;
  record.num_threads = num_threads;
  // A tuple of the values holds them while the GIL is released (a list could lose them).
  nb::object held = nb::steal(PySequence_Tuple(params.ptr()));
  if (!held.is_valid()) throw nb::python_error();
  const Py_ssize_t count = PyTuple_GET_SIZE(held.ptr());
  std::vector<void*> pointers(static_cast<std::size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* item = PyTuple_GET_ITEM(held.ptr(), i);
    if (!PyBytes_Check(item)) {
      throw nb::type_error(("_HostKernel.launch: parameter " + std::to_string(i) + " must be bytes (its packed value), got " +
                            std::string(Py_TYPE(item)->tp_name)).c_str());
    }
    pointers[static_cast<std::size_t>(i)] = PyBytes_AS_STRING(item);
  }
  nb::gil_scoped_release release;
  k.launch(record, pointers.data());
}

}  // namespace

// The dtype of a NumPy scalar of one of NumPy's own sized types (np.float32, np.int64, ...), by
// its type object, from a table built once; nullopt for anything else (or without NumPy). A
// pointer comparison instead of the attribute lookups (dtype, item, ndim) that cost
// microseconds per argument.
std::optional<DType> numpy_scalar_dtype(nb::handle h) {
  struct Entry {
    PyTypeObject* type;
    DType dtype;
  };
  static const std::vector<Entry>* table = [] {
    auto* t = new std::vector<Entry>();  // leaked with the numpy module it points into
    try {
      nb::handle np = numpy_module();
      const std::pair<const char*, DType> names[] = {
          {"bool_", DType::bool_},     {"int8", DType::int8},       {"int16", DType::int16},
          {"int32", DType::int32},     {"int64", DType::int64},     {"uint8", DType::uint8},
          {"uint16", DType::uint16},   {"uint32", DType::uint32},   {"uint64", DType::uint64},
          {"float16", DType::float16}, {"float32", DType::float32}, {"float64", DType::float64},
          {"complex64", DType::complex64}, {"complex128", DType::complex128}};
      for (const auto& [name, dtype] : names) {
        t->push_back({reinterpret_cast<PyTypeObject*>(np.attr(name).ptr()), dtype});
      }
    } catch (const nb::python_error&) {
      t->clear();  // no NumPy: no NumPy scalars to recognize
    }
    return t;
  }();
  PyTypeObject* type = Py_TYPE(h.ptr());
  for (const Entry& e : *table) {
    if (e.type == type) return e.dtype;
  }
  return std::nullopt;
}

namespace {

// Checked mode `bounds`: every element of an array argument must lie inside its buffer.
void check_extent(const Array& a, const char* kernel_kind, std::size_t index) {
  if (!(profile::checks() & profile::check_bounds) || !a.storage() || !a.storage()->buffer() || a.size() == 0) return;
  std::int64_t lo = a.offset(), hi = a.offset();
  for (std::size_t d = 0; d < a.shape().size(); ++d) {
    const std::int64_t span = (a.shape()[d] - 1) * a.strides()[d];
    (span < 0 ? lo : hi) += span;
  }
  const std::int64_t bytes = a.storage()->buffer()->size();
  if (lo < 0 || (hi + 1) * a.itemsize() > bytes) {
    throw tessel::IndexError(std::string("checked mode (bounds): ") + kernel_kind + " argument " + std::to_string(index) +
                             " (" + dtype_name(a.dtype()) + shape_str(a.shape()) + ") reaches elements " +
                             std::to_string(lo) + ".." + std::to_string(hi) + " of a buffer of " +
                             std::to_string(bytes / a.itemsize()) + " elements");
  }
}

// A kernel argument from a Python value: arrays pass their data pointer; Python bool/int/float
// pass bool/int64/float64 (CuPy's convention); NumPy scalars pass their exact type.
jit::KernelArg kernel_arg(nb::handle h, const Stream& stream, std::size_t index) {
  if (is_array(h)) {
    const Array& a = as_array(h);
    check_extent(a, "RawKernel", index);
    if (a.device() != stream.device()) {
      throw tessel::DeviceError("RawKernel: an argument is on " + a.device().str() + " but the launch is on " +
                                stream.device().str());
    }
    if (a.storage()) a.storage()->wait_on_stream(stream);
    return jit::KernelArg(a.data());
  }
  if (PyBool_Check(h.ptr())) return jit::KernelArg(static_cast<bool>(h.ptr() == Py_True));
  if (PyLong_Check(h.ptr())) return jit::KernelArg(nb::cast<std::int64_t>(h));
  if (PyFloat_Check(h.ptr())) return jit::KernelArg(PyFloat_AS_DOUBLE(h.ptr()));
  if (const std::optional<DType> d = numpy_scalar_dtype(h)) {
    // The value's bytes through the buffer protocol: no Python objects made per call.
    Py_buffer view;
    if (PyObject_GetBuffer(h.ptr(), &view, PyBUF_SIMPLE) == 0) {
      const bool fits = view.len == static_cast<Py_ssize_t>(itemsize(*d));
      std::optional<jit::KernelArg> arg;
      if (fits) {
        arg = dispatch_dtype(*d, [&](auto tag) -> jit::KernelArg {
          using T = typename decltype(tag)::type;
          T value;
          std::memcpy(&value, view.buf, sizeof(T));
          return jit::KernelArg(value);
        });
      }
      PyBuffer_Release(&view);
      if (arg) return *arg;
    } else {
      PyErr_Clear();  // the generic path below decides
    }
  }
  if (nb::hasattr(h, "dtype") && nb::hasattr(h, "item") && nb::cast<std::int64_t>(h.attr("ndim")) == 0 &&
      !nb::hasattr(h, "__cuda_array_interface__")) {
    const DType d = to_dtype(h.attr("dtype"));
    Scalar s;
    if (!to_scalar(h.attr("item")(), s)) throw nb::type_error("RawKernel: unsupported scalar argument");
    return dispatch_dtype(d, [&](auto tag) -> jit::KernelArg {
      using T = typename decltype(tag)::type;
      T value;
      s.store(d, &value);
      return jit::KernelArg(value);
    });
  }
  if (nb::hasattr(h, "__cuda_array_interface__")) {
    return jit::KernelArg(reinterpret_cast<void*>(
        nb::cast<std::uintptr_t>(h.attr("__cuda_array_interface__")["data"][0])));
  }
  throw nb::type_error(("RawKernel: unsupported argument type " + nb::cast<std::string>(nb::type_name(h.type()))).c_str());
}

nb::object elementwise_call(const jit::ElementwiseKernel& k, nb::args args, nb::handle size, nb::handle stream_arg) {
  const auto& operands = k.spec().operands;
  std::size_t n_in = 0, n_out = 0;
  for (const auto& o : operands) (o.is_output ? n_out : n_in)++;
  if (args.size() != n_in && args.size() != n_in + n_out) {
    throw nb::type_error(("ElementwiseKernel '" + k.name() + "': expected " + std::to_string(n_in) + " inputs (and optionally " +
                          std::to_string(n_out) + " outputs), got " + std::to_string(args.size()) + " arguments")
                             .c_str());
  }
  // The device from the tessel arrays (else the default); then every argument resolved to a
  // scalar or an array: tessel arrays are borrowed from `args` (which holds them while the GIL is
  // released), other array-likes converted onto that device. Conversions, casts, broadcast views
  // and new outputs live in `made`, reserved once for all of them so pointers into it stay valid.
  std::optional<Device> device;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!is_array(args[i])) continue;
    const Device d = as_array(args[i]).device();
    if (!device) {
      device = d;
    } else if (*device != d) {
      throw tessel::DeviceError("ElementwiseKernel '" + k.name() + "': operands on " + device->str() + " and " + d.str());
    }
  }
  if (!device) device = default_device();
  const std::size_t count = operands.size();
  std::vector<Array> made;
  auto hold = [&](Array a) -> const Array* {
    if (made.empty()) made.reserve(3 * count);  // at most 3 per operand: a conversion, a cast, a broadcast
    made.push_back(std::move(a));
    return &made.back();
  };
  struct alignas(16) ScalarBytes {
    unsigned char bytes[16];
  };
  std::vector<ScalarBytes> scalars(count);
  std::vector<const Array*> given(args.size(), nullptr);  // nullptr: a scalar input
  std::vector<const Shape*> shapes;
  shapes.reserve(args.size());
  for (std::size_t j = 0; j < args.size(); ++j) {
    nb::handle h = args[j];  // args follow the operands: the inputs, then the outputs
    Scalar value;
    if (is_array(h)) {
      given[j] = &as_array(h);
    } else if (j < n_in && to_scalar(h, value)) {
      value.store(operands[j].dtype, scalars[j].bytes);
      continue;
    } else if (j < n_in) {
      given[j] = hold(to_array(h, *device));
    } else {
      // An output is written in place: a foreign array only as a view of its own memory, never
      // as a copy that would take the results away from the caller.
      try {
        given[j] = hold(to_array(h, *device, /*without_copy=*/true));
      } catch (const nb::python_error& e) {
        throw tessel::ValueError("ElementwiseKernel '" + k.name() + "': output '" + operands[j].name +
                                 "' must be an array on " + device->str() + " that can be written in place; got " +
                                 nb::cast<std::string>(nb::type_name(h.type())) + " (" + nb::cast<std::string>(nb::str(e.value())) + ")");
      }
    }
    shapes.push_back(&given[j]->shape());
  }
  Shape shape = broadcast_shape_list(shapes.data(), shapes.size(), "ElementwiseKernel");
  if (!size.is_none()) {
    if (!shapes.empty()) throw tessel::ValueError("ElementwiseKernel '" + k.name() + "': size= only without array operands");
    shape = Shape{nb::cast<std::int64_t>(size)};
  }
  const Stream stream = to_optional_stream(stream_arg, *device).value_or(device->is_cuda() ? current_stream(*device) : Stream::cpu());
  if (stream.device() != *device) {
    throw tessel::DeviceError("ElementwiseKernel '" + k.name() + "': the stream is on " + stream.device().str() +
                              " but the arrays are on " + device->str());
  }
  std::vector<jit::ElementwiseArgView> views(count);
  std::vector<const Array*> outputs;
  outputs.reserve(n_out);
  for (std::size_t i = 0; i < count; ++i) {
    const auto& o = operands[i];
    const Array* a = nullptr;
    if (o.is_output) {
      if (args.size() == n_in + n_out) {
        a = given[i];
        check_writable(*a, "ElementwiseKernel");
        if (a->dtype() != o.dtype) {
          throw tessel::DTypeError("ElementwiseKernel '" + k.name() + "': output '" + o.name + "' is " + dtype_name(a->dtype()) +
                                   ", declared " + dtype_name(o.dtype));
        }
        if (a->shape() != shape) {
          throw tessel::ShapeError("ElementwiseKernel '" + k.name() + "': output '" + o.name + "' has shape " + shape_str(a->shape()) +
                                   ", the launch shape is " + shape_str(shape));
        }
      } else {
        a = hold(empty(shape, o.dtype, *device, stream));
      }
      outputs.push_back(a);
    } else {
      a = given[i];
      if (a == nullptr) {
        views[i] = {nullptr, nullptr, 0, scalars[i].bytes};
        continue;
      }
      if (a->dtype() != o.dtype) a = hold(astype(*a, o.dtype, stream));
      if (a->shape() != shape) a = hold(a->broadcast_to(shape));
    }
    check_extent(*a, "ElementwiseKernel", i);
    if (a->storage()) a->storage()->wait_on_stream(stream);
    views[i] = {a->data(), a->strides().data(), a->strides().size(), nullptr};
  }
  {
    nb::gil_scoped_release release;  // may compile
    k.launch(shape, views.data(), views.size(), *device, stream);
  }
  for (const Array* out : outputs) {
    if (out->storage() && device->is_cuda()) out->storage()->record_pending_write(stream);
  }
  // Outputs the caller passed come back as the same objects; new ones as new arrays.
  auto result = [&](std::size_t j) -> nb::object {
    if (args.size() == n_in + n_out && is_array(args[n_in + j])) return nb::borrow(args[n_in + j]);
    return wrap_array(Array(*outputs[j]));
  };
  if (outputs.size() == 1) return result(0);
  nb::list l;
  for (std::size_t j = 0; j < outputs.size(); ++j) l.append(result(j));
  return nb::tuple(l);
}

// Calls a fused kernel on a list or tuple of tessel arrays, borrowed (no Array copies). An
// invalid object when the inputs are not that; ValueError/TypeError for the wrong count.
nb::object call_fused(const FusedKernel& k, nb::handle inputs) {
  // A tuple holds its items while the GIL is released below; a list could lose them to another thread.
  nb::object held = nb::borrow(inputs);
  if (PyList_Check(inputs.ptr())) {
    held = nb::steal(PyList_AsTuple(inputs.ptr()));
  } else if (!PyTuple_Check(inputs.ptr())) {
    return nb::object();
  }
  PyObject* seq = held.ptr();
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  std::vector<const Array*> arrays(static_cast<std::size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (!is_array(items[i])) return nb::object();
    arrays[static_cast<std::size_t>(i)] = &as_array(items[i]);
  }
  if (static_cast<int>(count) != k.num_inputs()) {
    throw nb::type_error(("fused kernel: expected " + std::to_string(k.num_inputs()) + " arrays, got " +
                          std::to_string(count)).c_str());
  }
  if (k.multi_output()) {
    std::vector<Array> results;
    {
      nb::gil_scoped_release release;
      results = k.call_outputs(arrays.data(), arrays.size());
    }
    nb::list l;
    for (Array& r : results) l.append(wrap_array(std::move(r)));
    return nb::tuple(l);
  }
  Array result;
  {
    nb::gil_scoped_release release;  // may compile; `held` keeps the arrays alive
    result = k(arrays.data(), arrays.size());
  }
  return wrap_array(std::move(result));
}


// ---- the C table of fused_c_api.hpp ----
// Stream::from_handle registers the handle (a lock and a driver call): once per thread and
// stream here. A cached entry stays right when its stream goes: the registry keeps the handle's id.
Stream adopted_stream(void* handle, Device device) {
  struct Entry {
    void* handle;
    int device;
    Stream stream;
  };
  thread_local std::vector<Entry> cache;
  for (const Entry& e : cache) {
    if (e.handle == handle && e.device == device.index) return e.stream;
  }
  Stream stream = Stream::from_handle(handle, device);
  if (cache.size() < 16) cache.push_back({handle, device.index, stream});
  return stream;
}

Array borrowed_array(const dlpack::DLTensor& t, const char* op) {
  const DType dtype = dtype_from_dl(t.dtype, op);
  Device device = Device::cpu();
  if (t.device.device_type == dlpack::kDLCUDA) {
    device = Device::cuda(t.device.device_id);
  } else if (t.device.device_type != dlpack::kDLCPU) {
    throw tessel::DeviceError(std::string(op) + ": tensors must be on the CPU or a CUDA device, got DLPack device type " +
                              std::to_string(t.device.device_type));
  }
  Shape shape(t.shape, t.shape + t.ndim);
  Strides strides = t.strides != nullptr ? Strides(t.strides, t.strides + t.ndim) : contiguous_strides(shape);
  return wrap_foreign(static_cast<char*>(t.data) + t.byte_offset, shape, strides, dtype, device, nullptr, op, false);
}

int fused_c_run(const void* kernel, const dlpack::DLTensor* inputs, std::int32_t count, void* stream,
                const dlpack::DLDataType* sum_dtype, dlpack::DLManagedTensorVersioned** outputs,
                std::int32_t output_count, void* error_ctx, FusedCErrorSink set_error) noexcept {
  const char* op = "fused kernel";
  try {
    const auto& k = *static_cast<const FusedKernel*>(kernel);
    if (count != k.num_inputs() || output_count != (sum_dtype != nullptr ? 1 : k.num_outputs()) ||
        (sum_dtype != nullptr && k.num_outputs() != 1)) {
      throw tessel::ValueError(std::string(op) + ": " + std::to_string(count) + " inputs and " +
                               std::to_string(output_count) + (sum_dtype != nullptr ? " outputs (a sum)" : " outputs") +
                               " for a kernel of " + std::to_string(k.num_inputs()) + " inputs and " +
                               std::to_string(k.num_outputs()) + " outputs");
    }
    std::vector<Array> arrays;
    arrays.reserve(static_cast<std::size_t>(count));
    for (std::int32_t i = 0; i < count; ++i) arrays.push_back(borrowed_array(inputs[i], op));
    std::vector<const Array*> pointers;
    for (const Array& a : arrays) pointers.push_back(&a);
    const Device device = count > 0 ? arrays[0].device() : Device::cpu();
    OptionalStream on;
    if (device.is_cuda()) on = adopted_stream(stream, device);
    std::vector<Array> results;
    if (sum_dtype != nullptr) {
      const DType dtype = dtype_from_dl(*sum_dtype, op);
      Array values = k(pointers.data(), pointers.size(), std::nullopt, on);
      if (values.dtype() != dtype) values = astype(values, dtype, on);
      Array total = tessel::sum(values, std::nullopt, false, on);
      if (total.dtype() != dtype) total = astype(total, dtype, on);
      results.push_back(std::move(total));
    } else if (k.multi_output()) {
      results = k.call_outputs(pointers.data(), pointers.size(), on);
    } else {
      results.push_back(k(pointers.data(), pointers.size(), std::nullopt, on));
    }
    for (std::size_t j = 0; j < results.size(); ++j) {
      if (on && results[j].storage()) results[j].storage()->wait_on_stream(*on);
      outputs[j] = new_versioned(results[j], false);
    }
    return 0;
  } catch (const std::exception& e) {
    set_error(error_ctx, python_error_kind(e), e.what());
  } catch (...) {
    set_error(error_ctx, "RuntimeError", "fused kernel: unknown error");
  }
  return -1;
}

const FusedCApi fused_c_api{kFusedCApiVersion, &fused_c_run};

}  // namespace

void register_jit(nb::module_& m) {
  // The address of the C table (fused_c_api.hpp), and a kernel's address for it.
  m.def("_fused_c_api", [] { return reinterpret_cast<std::uintptr_t>(&fused_c_api); });
  m.def("_sym_input", [](int index) { return Sym::input(index); });
  nb::class_<FusedKernel>(m, "FusedKernel", "An elementwise kernel fused from a Python trace (see tessel.fuse).")
      // `root`: one Sym, or a tuple or list of them (a kernel of several outputs, called to a tuple).
      .def("__init__", [](FusedKernel* self, nb::handle root, int num_inputs) {
        if (PyTuple_Check(root.ptr()) || PyList_Check(root.ptr())) {
          std::vector<Sym> roots;
          std::size_t i = 0;
          for (nb::handle h : root) {
            if (!nb::isinstance<Sym>(h)) {
              throw nb::type_error(("fuse: output " + std::to_string(i) +
                                    " of the function must be an expression of its array arguments, got " +
                                    std::string(nb::type_name(h.type()).c_str())).c_str());
            }
            roots.push_back(nb::cast<Sym>(h));
            ++i;
          }
          if (roots.empty()) throw nb::value_error("fuse: the function returned an empty tuple");
          new (self) FusedKernel(std::move(roots), num_inputs);
          return;
        }
        if (!nb::isinstance<Sym>(root)) {
          throw nb::type_error("fuse: the function must return an expression of its array arguments");
        }
        new (self) FusedKernel(nb::cast<Sym>(root), num_inputs);
      }, "root"_a, "num_inputs"_a)
      .def("__call__", [](const FusedKernel& k, nb::handle inputs) {
        nb::object result = call_fused(k, inputs);
        if (!result.is_valid()) {
          throw nb::type_error("fused kernel: the inputs must be a list or tuple of tessel arrays");
        }
        return result;
      }, "inputs"_a)
      // ts.fuse's fast path: None (instead of an error) when an input is not a tessel array, so
      // that the caller can fall back to the path that converts or traces constants.
      .def("_call_if_arrays", [](const FusedKernel& k, nb::handle inputs) {
        nb::object result = call_fused(k, inputs);
        return result.is_valid() ? result : nb::none();
      }, "inputs"_a)
      .def("source", [](const FusedKernel& k, nb::list dtypes) {
        std::vector<DType> d;
        for (nb::handle h : dtypes) d.push_back(to_dtype(h));
        return k.source(d);
      })
      .def_prop_ro("num_inputs", &FusedKernel::num_inputs)
      .def_prop_ro("num_outputs", &FusedKernel::num_outputs)
      .def_prop_ro("_address", [](const FusedKernel& k) { return reinterpret_cast<std::uintptr_t>(&k); });
  m.def("set_fusion_enabled", &set_fusion_enabled, "enabled"_a);
  m.def("fusion_enabled", &fusion_enabled);

  nb::class_<jit::ElementwiseKernel>(m, "ElementwiseKernel",
                                     "A CuPy-style elementwise kernel: ElementwiseKernel('float32 x, float32 y', "
                                     "'float32 z', 'z = x * y + 1', 'mul_add').")
      .def(nb::init<const std::string&, const std::string&, std::string, std::string, std::string>(), "in_params"_a,
           "out_params"_a, "operation"_a, "name"_a = "elementwise_kernel", "preamble"_a = "")
      .def_prop_ro("name", &jit::ElementwiseKernel::name)
      .def("source", [](const jit::ElementwiseKernel& k) { return k.source(); })
      .def("host_source", [](const jit::ElementwiseKernel& k) { return k.host_source(); },
           "The host C++ source the CPU backend compiles (contiguous layout).")
      .def("__call__", &elementwise_call, "args"_a, nb::kw_only(), "size"_a = nb::none(), "stream"_a = nb::none());

  // The host compiler (CPU backend), for tessel.kernel: None when there is none.
  m.def("_host_compiler", []() -> nb::object {
    std::string c;
    {
      nb::gil_scoped_release release;  // may run `<compiler> --version` once
      c = jit::host_compiler();
    }
    return c.empty() ? nb::none() : nb::cast(c);
  });
  nb::class_<jit::HostKernel>(m, "_HostKernel",
                              "A loaded host C++ kernel, int symbol(TsHostLaunch*, void**); from _get_host_kernel.")
      .def_prop_ro("symbol", &jit::HostKernel::symbol)
      .def_prop_ro("entry_address", [](const jit::HostKernel& k) { return reinterpret_cast<std::uintptr_t>(k.entry()); })
      .def("launch", &host_kernel_launch, "grid"_a, "block"_a, "shared_bytes"_a, "params"_a, "num_threads"_a = 0,
           "Calls the kernel on this thread (GIL released): params holds each parameter's packed bytes. "
           "Raises IndexError or TesselError with the kernel's message when it reports an error.");
  m.def("_get_host_kernel", [](std::string source, std::string symbol, std::vector<std::string> options) {
    jit::HostCompileRequest request{std::move(source), std::move(symbol), std::move(options)};
    nb::gil_scoped_release release;  // may compile
    return jit::get_host_kernel(request);
  }, "source"_a, "symbol"_a, "options"_a = std::vector<std::string>{},
        "Compiles (or finds in the memory and disk caches) host C++ source and loads its extern \"C\" entry.");

  nb::class_<jit::RawKernel>(m, "RawKernel", "A CUDA C++ kernel compiled with NVRTC: RawKernel(source, name).")
      .def(nb::init<std::string, std::string, std::vector<std::string>>(), "code"_a, "name"_a,
           "options"_a = std::vector<std::string>{})
      .def_prop_ro("name", &jit::RawKernel::name)
      .def_prop_ro("code", &jit::RawKernel::source)
      .def("compile", [](const jit::RawKernel& k, nb::handle device) {
        const Device d = to_device_or_default(device);
        nb::gil_scoped_release release;
        (void)k.kernel(d);
      }, "device"_a = nb::none(), "Compiles now (else the first launch compiles).")
      .def("__call__", [](const jit::RawKernel& k, nb::handle grid, nb::handle block, nb::handle args,
                          std::size_t shared_mem, nb::handle stream_arg) {
        const Device device = cuda_available() ? current_device() : Device::cpu();
        const std::optional<Stream> stream = to_optional_stream(stream_arg, device);
        const Stream launch_stream = stream.value_or(device.is_cuda() ? current_stream(device) : Stream::cpu());
        std::vector<jit::KernelArg> kernel_args;
        if (PyTuple_Check(args.ptr()) || PyList_Check(args.ptr())) kernel_args.reserve(nb::len(args));
        for (nb::handle h : args) kernel_args.push_back(kernel_arg(h, launch_stream, kernel_args.size()));
        const jit::Dim3 g = to_dim3(grid, "grid"), b = to_dim3(block, "block");
        nb::gil_scoped_release release;  // may compile
        k.launch(g, b, kernel_args, shared_mem, stream);
      }, "grid"_a, "block"_a, "args"_a, nb::kw_only(), "shared_mem"_a = 0, "stream"_a = nb::none());
}

}  // namespace tessel::python
