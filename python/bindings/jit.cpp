// JIT layer: fused kernels from Python traces (ts.fuse), ElementwiseKernel and RawKernel
// (CuPy-style). Compiles go through the C++ kernel caches; the GIL is released around them.
#include <string>

#include "common.hpp"

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


// A kernel argument from a Python value: arrays pass their data pointer; Python bool/int/float
// pass bool/int64/float64 (CuPy's convention); NumPy scalars pass their exact type.
jit::KernelArg kernel_arg(nb::handle h, const Stream& stream) {
  if (is_array(h)) {
    const Array& a = as_array(h);
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
  // Launch shape and device from the array operands.
  std::vector<Shape> shapes;
  std::optional<Device> device;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (is_array(args[i])) {
      const Array& a = as_array(args[i]);
      shapes.push_back(a.shape());
      if (!device) device = a.device();
      else if (*device != a.device()) {
        throw tessel::DeviceError("ElementwiseKernel '" + k.name() + "': operands on " + device->str() + " and " + a.device().str());
      }
    }
  }
  Shape shape = shapes.empty() ? Shape{} : broadcast_shapes(shapes, "ElementwiseKernel");
  if (!size.is_none()) {
    if (!shapes.empty()) throw tessel::ValueError("ElementwiseKernel '" + k.name() + "': size= only without array operands");
    shape = Shape{nb::cast<std::int64_t>(size)};
  }
  if (!device) device = default_device();
  const Stream stream = to_optional_stream(stream_arg, *device).value_or(device->is_cuda() ? current_stream(*device) : Stream::cpu());
  if (stream.device() != *device) {
    throw tessel::DeviceError("ElementwiseKernel '" + k.name() + "': the stream is on " + stream.device().str() +
                              " but the arrays are on " + device->str());
  }
  std::vector<Array> keep;  // arrays (and casts) alive until the launch is queued
  std::vector<jit::ElementwiseArg> launch_args;
  std::vector<Array> outputs;
  std::size_t arg_index = 0;
  for (const auto& o : operands) {
    if (o.is_output) {
      Array out;
      if (args.size() == n_in + n_out) {
        out = to_array(args[n_in + (outputs.size())], *device);
        check_writable(out, "ElementwiseKernel");
        if (out.dtype() != o.dtype) {
          throw tessel::DTypeError("ElementwiseKernel '" + k.name() + "': output '" + o.name + "' is " + dtype_name(out.dtype()) +
                                   ", declared " + dtype_name(o.dtype));
        }
        if (out.shape() != shape) {
          throw tessel::ShapeError("ElementwiseKernel '" + k.name() + "': output '" + o.name + "' has shape " + shape_str(out.shape()) +
                                   ", the launch shape is " + shape_str(shape));
        }
      } else {
        out = empty(shape, o.dtype, *device, stream);
      }
      if (out.storage()) out.storage()->wait_on_stream(stream);
      outputs.push_back(out);
      launch_args.push_back(jit::ElementwiseArg::array(out.data(), out.strides()));
      continue;
    }
    nb::handle h = args[arg_index++];
    Scalar s;
    if (to_scalar(h, s)) {
      jit::ElementwiseArg a;
      a.is_scalar = true;
      s.store(o.dtype, a.scalar);
      launch_args.push_back(a);
      continue;
    }
    Array in = to_array(h, *device);
    if (in.dtype() != o.dtype) in = in.astype(o.dtype, stream);
    in = in.broadcast_to(shape);
    if (in.storage()) in.storage()->wait_on_stream(stream);
    keep.push_back(in);
    launch_args.push_back(jit::ElementwiseArg::array(in.data(), in.strides()));
  }
  {
    nb::gil_scoped_release release;  // may compile
    k.launch(shape, launch_args, *device, stream);
  }
  for (auto& out : outputs) {
    if (out.storage() && device->is_cuda()) out.storage()->record_pending_write(stream);
  }
  if (outputs.size() == 1) return nb::cast(outputs[0]);
  nb::list l;
  for (auto& o : outputs) l.append(nb::cast(o));
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
  Array result;
  {
    nb::gil_scoped_release release;  // may compile; `held` keeps the arrays alive
    result = k(arrays.data(), arrays.size());
  }
  return wrap_array(std::move(result));
}

}  // namespace

void register_jit(nb::module_& m) {
  m.def("_sym_input", [](int index) { return Sym::input(index); });
  nb::class_<FusedKernel>(m, "FusedKernel", "An elementwise kernel fused from a Python trace (see tessel.fuse).")
      .def("__init__", [](FusedKernel* self, nb::handle root, int num_inputs) {
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
      .def_prop_ro("num_inputs", &FusedKernel::num_inputs);
  m.def("set_fusion_enabled", &set_fusion_enabled, "enabled"_a);
  m.def("fusion_enabled", &fusion_enabled);

  nb::class_<jit::ElementwiseKernel>(m, "ElementwiseKernel",
                                     "A CuPy-style elementwise kernel: ElementwiseKernel('float32 x, float32 y', "
                                     "'float32 z', 'z = x * y + 1', 'mul_add').")
      .def(nb::init<const std::string&, const std::string&, std::string, std::string, std::string>(), "in_params"_a,
           "out_params"_a, "operation"_a, "name"_a = "elementwise_kernel", "preamble"_a = "")
      .def_prop_ro("name", &jit::ElementwiseKernel::name)
      .def("source", [](const jit::ElementwiseKernel& k) { return k.source(); })
      .def("__call__", &elementwise_call, "args"_a, nb::kw_only(), "size"_a = nb::none(), "stream"_a = nb::none());

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
        for (nb::handle h : args) kernel_args.push_back(kernel_arg(h, launch_stream));
        const jit::Dim3 g = to_dim3(grid, "grid"), b = to_dim3(block, "block");
        nb::gil_scoped_release release;  // may compile
        k.launch(g, b, kernel_args, shared_mem, stream);
      }, "grid"_a, "block"_a, "args"_a, nb::kw_only(), "shared_mem"_a = 0, "stream"_a = nb::none());
}

}  // namespace tessel::python
