// Core layer: the exception hierarchy, dtypes, devices and streams.
#include <array>
#include <string>

#include "common.hpp"

namespace tessel::python {
namespace {

// Python exception classes, created once (module lifetime).
PyObject* tessel_error = nullptr;
PyObject* value_error = nullptr;
PyObject* shape_error = nullptr;
PyObject* dtype_error = nullptr;
PyObject* index_error = nullptr;
PyObject* device_error = nullptr;
PyObject* out_of_memory = nullptr;
PyObject* cuda_error = nullptr;
PyObject* compile_error = nullptr;

PyObject* new_exception(nb::module_& m, const char* name, nb::handle bases, const char* doc) {
  const std::string qualified = std::string("tessel.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

void register_errors(nb::module_& m) {
  nb::module_ builtins = nb::module_::import_("builtins");
  tessel_error = new_exception(m, "TesselError", builtins.attr("Exception"), "Base of every tessel error.");
  nb::handle base(tessel_error);
  auto with = [&](const char* builtin) { return nb::make_tuple(base, builtins.attr(builtin)); };
  value_error = new_exception(m, "ValueError", with("ValueError"), "An invalid argument value.");
  shape_error = new_exception(m, "ShapeError", with("ValueError"), "Shapes that do not fit (broadcasting, reshape...).");
  dtype_error = new_exception(m, "DTypeError", with("TypeError"), "An unsupported dtype or a forbidden cast.");
  index_error = new_exception(m, "IndexError", with("IndexError"), "An index or axis out of range.");
  device_error = new_exception(m, "DeviceError", with("RuntimeError"), "A missing device or arrays on different devices.");
  out_of_memory = new_exception(m, "OutOfMemory", with("MemoryError"), "The allocator could not serve a request.");
  cuda_error = new_exception(m, "CudaError", with("RuntimeError"), "A CUDA runtime/driver error (.code holds the code).");
  compile_error = new_exception(m, "CompileError", with("RuntimeError"), "NVRTC compilation failed (.log holds the log).");

  // Most specific first: every tessel error derives from tessel::Error.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tessel::ShapeError& e) {
      PyErr_SetString(shape_error, e.what());
    } catch (const tessel::DTypeError& e) {
      PyErr_SetString(dtype_error, e.what());
    } catch (const tessel::IndexError& e) {
      PyErr_SetString(index_error, e.what());
    } catch (const tessel::DeviceError& e) {
      PyErr_SetString(device_error, e.what());
    } catch (const tessel::OutOfMemory& e) {
      PyErr_SetString(out_of_memory, e.what());
    } catch (const tessel::ValueError& e) {
      PyErr_SetString(value_error, e.what());
    } catch (const tessel::CudaError& e) {
      nb::object exc = nb::steal(PyObject_CallFunction(cuda_error, "s", e.what()));
      if (!exc.is_valid()) return;
      exc.attr("code") = e.code();
      exc.attr("fatal") = e.fatal();
      PyErr_SetObject(cuda_error, exc.ptr());
    } catch (const tessel::CompileError& e) {
      nb::object exc = nb::steal(PyObject_CallFunction(compile_error, "s", e.what()));
      if (!exc.is_valid()) return;
      exc.attr("log") = e.log();
      PyErr_SetObject(compile_error, exc.ptr());
    } catch (const tessel::Error& e) {
      PyErr_SetString(tessel_error, e.what());
    }
  });
}

std::array<nb::object, num_dtypes>& dtype_objects() {
  static auto* objects = new std::array<nb::object, num_dtypes>();  // leaked: lives with the module
  return *objects;
}

void register_dtypes(nb::module_& m) {
  nb::class_<PyDType>(m, "dtype", "An element type: tessel.float32, tessel.bool, ...")
      .def_prop_ro("name", [](const PyDType& d) { return dtype_name(d.value); })
      .def_prop_ro("itemsize", [](const PyDType& d) { return itemsize(d.value); })
      .def_prop_ro("kind", [](const PyDType& d) {
        switch (dtype_kind(d.value)) {
          case DTypeKind::boolean: return "b";
          case DTypeKind::signed_int: return "i";
          case DTypeKind::unsigned_int: return "u";
          case DTypeKind::floating: return "f";
          default: return "c";
        }
      })
      .def("__repr__", [](const PyDType& d) { return std::string("ts.") + dtype_name(d.value); })
      .def("__str__", [](const PyDType& d) { return std::string(dtype_name(d.value)); })
      .def("__hash__", [](const PyDType& d) { return static_cast<int>(d.value) + 7919; })
      // __eq__ and __ne__ (names, NumPy dtypes and types, never raising): python/tessel/_dtype_protocol.py
      .def("__reduce__", [](const PyDType& d) {
        return nb::make_tuple(nb::module_::import_("tessel").attr("_dtype_from_name"),
                              nb::make_tuple(dtype_name(d.value)));
      });
  for (int i = 0; i < num_dtypes; ++i) {
    const DType d = static_cast<DType>(i);
    nb::object obj = nb::cast(PyDType{d});
    dtype_objects()[static_cast<std::size_t>(i)] = obj;
    m.attr(dtype_name(d)) = obj;  // "bool" is a valid attribute name here
  }
  m.def("_dtype_from_name", [](const std::string& name) { return dtype_object(parse_dtype(name)); });
  m.def("_result_type_dtypes", [](nb::handle a, nb::handle b) { return dtype_object(result_type(to_dtype(a), to_dtype(b))); });
  m.def("_result_type_scalar", [](nb::handle a, nb::handle scalar) {
    Scalar s;
    if (!to_scalar(scalar, s)) throw nb::type_error("_result_type_scalar: not a Python scalar");
    return dtype_object(result_type(to_dtype(a), s.scalar_kind()));
  });
  m.def("_can_cast", [](nb::handle from, nb::handle to, const std::string& casting) {
    const DType f = to_dtype(from), t = to_dtype(to);
    if (casting == "safe") return can_cast_safely(f, t);
    if (casting == "same_kind") return can_cast_same_kind(f, t);
    if (casting == "unsafe") return true;
    if (casting == "no" || casting == "equiv") return f == t;
    throw tessel::ValueError("can_cast: casting must be 'no', 'safe', 'same_kind' or 'unsafe', got '" + casting + "'");
  });
}

void register_devices(nb::module_& m) {
  nb::class_<Device>(m, "Device", "A device: Device('cpu'), Device('cuda:0').")
      .def("__init__", [](Device* self, const std::string& text) { new (self) Device(Device::parse(text)); }, "name"_a)
      .def_prop_ro("type", [](const Device& d) { return d.is_cuda() ? "cuda" : "cpu"; })
      .def_ro("index", &Device::index)
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) { return "Device('" + d.str() + "')"; })
      .def("__eq__", [](const Device& d, nb::handle other) {
        if (nb::isinstance<Device>(other)) return nb::cast<const Device&>(other) == d;
        if (nb::isinstance<nb::str>(other)) {
          try {
            return Device::parse(nb::cast<std::string>(other)) == d;
          } catch (const tessel::Error&) {
            return false;
          }
        }
        return false;
      })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1024 + d.index; });

  m.def("cuda_available", &cuda_available, "True when a CUDA driver and device are usable.");
  m.def("cuda_unavailable_reason", &cuda_unavailable_reason);
  m.def("device_count", &device_count);
  m.def("default_device", &default_device);
  m.def("current_device", &current_device);
  m.def("set_current_device", &set_current_device, "index"_a);
  m.def("driver_version", &driver_version);
  m.def("runtime_version", &runtime_version);
  m.def("device_name", [](int index) { return device_properties(index).name; }, "index"_a = 0);
  m.def("synchronize", [](nb::handle device) {
    const Device d = to_device_or_default(device);
    nb::gil_scoped_release release;
    synchronize(d);
  }, "device"_a = nb::none(), "The host waits for all work on the device.");
  m.def("version", [] { return std::string(tessel::version()); });
  m.def("num_threads", &tessel::num_threads,
        "The threads every CPU op may use (TESSEL_NUM_THREADS, else the CPUs of the affinity mask).");
  m.def("set_num_threads", &tessel::set_num_threads, "threads"_a,
        "Sets the threads of every CPU op for this process; ValueError outside 1..4096.");
}

void register_streams(nb::module_& m) {
  nb::class_<Stream>(m, "Stream", "A CUDA stream (or the CPU's in-order stream).")
      .def("__init__", [](Stream* self, nb::handle device, int priority) {
        new (self) Stream(Stream::create(to_device_or_default(device), priority));
      }, "device"_a = nb::none(), "priority"_a = 0,
      "A new non-blocking stream. Lower numbers are higher priorities (clamped to the device's range).")
      .def_static("from_handle", [](std::uintptr_t handle, nb::handle device) {
        return Stream::from_handle(reinterpret_cast<void*>(handle), to_device_or_default(device));
      }, "handle"_a, "device"_a = nb::none(),
      "Adopts a stream created elsewhere (torch.cuda.Stream.cuda_stream, cupy Stream.ptr). Not owned: "
      "the creator must keep it alive.")
      .def_static("default", [](nb::handle device) { return Stream::default_stream(to_device_or_default(device)); },
                  "device"_a = nb::none())
      .def_static("cpu", &Stream::cpu)
      .def_static("priority_range", [](nb::handle device) { return Stream::priority_range(to_device_or_default(device)); },
                  "device"_a = nb::none())
      .def_prop_ro("device", &Stream::device)
      .def_prop_ro("handle", [](const Stream& s) { return reinterpret_cast<std::uintptr_t>(s.handle()); },
                   "The cudaStream_t as an int (0 for the default and CPU streams).")
      .def_prop_ro("ptr", [](const Stream& s) { return reinterpret_cast<std::uintptr_t>(s.handle()); })
      .def_prop_ro("id", &Stream::id)
      .def_prop_ro("priority", &Stream::priority)
      .def_prop_ro("owned", &Stream::owned)
      .def("synchronize", [](const Stream& s) {
        nb::gil_scoped_release release;
        s.synchronize();
      })
      .def("query", [](const Stream& s) { return s.query(); })
      .def("wait_stream", [](const Stream& self, const Stream& other) {
        if (self.device().is_cpu() || other.device().is_cpu()) return;
        Event e(other.device(), false);
        e.record(other);
        self.wait(e);
      }, "other"_a, "Later work on this stream waits for the work queued on `other` so far (no host sync).")
      .def("__eq__", [](const Stream& a, nb::handle b) { return nb::isinstance<Stream>(b) && nb::cast<const Stream&>(b) == a; })
      .def("__hash__", [](const Stream& s) { return static_cast<std::int64_t>(s.id()); })
      .def("__repr__", [](const Stream& s) {
        return "Stream(device='" + s.device().str() + "', handle=" +
               std::to_string(reinterpret_cast<std::uintptr_t>(s.handle())) + ")";
      });
  m.def("current_stream", [](nb::handle device) {
    const Device d = to_device_or_default(device);
    return d.is_cuda() ? current_stream(d) : Stream::cpu();
  }, "device"_a = nb::none());
  m.def("set_current_stream", [](const Stream& s) { if (s.device().is_cuda()) set_current_stream(s); }, "stream"_a);
}

}  // namespace

nb::object dtype_object(DType dtype) { return dtype_objects()[static_cast<std::size_t>(dtype)]; }

DType to_dtype(nb::handle h) {
  if (nb::isinstance<PyDType>(h)) return nb::cast<const PyDType&>(h).value;
  if (nb::isinstance<nb::str>(h)) return parse_dtype(nb::cast<std::string>(h));
  if (h.is(reinterpret_cast<PyObject*>(&PyBool_Type))) return DType::bool_;
  if (h.is(reinterpret_cast<PyObject*>(&PyLong_Type))) return DType::int64;
  if (h.is(reinterpret_cast<PyObject*>(&PyFloat_Type))) return DType::float64;
  if (h.is(reinterpret_cast<PyObject*>(&PyComplex_Type))) return DType::complex128;
  // NumPy dtypes and scalar types: their dtype's name ("float32").
  if (nb::hasattr(h, "dtype") && !is_array(h)) {
    nb::object dt = h.attr("dtype");
    if (nb::hasattr(dt, "name")) return parse_dtype(nb::cast<std::string>(nb::str(dt.attr("name"))));
  }
  if (nb::hasattr(h, "name") && nb::hasattr(h, "itemsize") && nb::hasattr(h, "kind")) {
    return parse_dtype(nb::cast<std::string>(nb::str(h.attr("name"))));
  }
  // NumPy scalar types (x.astype(np.float32)): the class's dtype attribute is a descriptor, so
  // ask numpy.dtype for the name.
  if (PyType_Check(h.ptr()) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(h.ptr()),
                                                  reinterpret_cast<PyTypeObject*>(numpy_module().attr("generic").ptr()))) {
    return parse_dtype(nb::cast<std::string>(nb::str(numpy_module().attr("dtype")(h).attr("name"))));
  }
  throw tessel::DTypeError("tessel: not a dtype: " + nb::cast<std::string>(nb::repr(h)));
}

std::optional<DType> to_optional_dtype(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return to_dtype(h);
}

std::optional<Device> to_optional_device(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  if (nb::isinstance<nb::str>(h)) return Device::parse(nb::cast<std::string>(h));
  if (nb::isinstance<Stream>(h)) return nb::cast<const Stream&>(h).device();
  // torch.device and similar: "cuda:0" / "cpu" in str().
  if (nb::hasattr(h, "type")) return Device::parse(nb::cast<std::string>(nb::str(h)));
  throw nb::type_error(("tessel: not a device: " + nb::cast<std::string>(nb::repr(h))).c_str());
}

std::optional<Stream> to_optional_stream(nb::handle h, Device device) {
  if (h.is_none()) return std::nullopt;
  if (nb::isinstance<Stream>(h)) return nb::cast<Stream>(h);
  if (PyLong_Check(h.ptr())) return Stream::from_handle(reinterpret_cast<void*>(nb::cast<std::uintptr_t>(h)), device);
  // torch.cuda.Stream (.cuda_stream, .device) and CuPy streams (.ptr, .device_id): a stream
  // object knows its device, which need not be `device` (the caller checks they match).
  if (nb::hasattr(h, "cuda_stream")) {
    const Device d = nb::hasattr(h, "device") ? to_optional_device(h.attr("device")).value_or(device) : device;
    return Stream::from_handle(reinterpret_cast<void*>(nb::cast<std::uintptr_t>(h.attr("cuda_stream"))), d);
  }
  if (nb::hasattr(h, "ptr")) {
    Device d = device;
    if (nb::hasattr(h, "device_id")) {
      const int index = nb::cast<int>(h.attr("device_id"));
      if (index >= 0) d = Device::cuda(index);
    }
    return Stream::from_handle(reinterpret_cast<void*>(nb::cast<std::uintptr_t>(h.attr("ptr"))), d);
  }
  throw nb::type_error("stream must be a tessel.Stream, an int handle, a torch.cuda.Stream or a CuPy stream");
}

std::shared_ptr<void> python_keep_alive(nb::handle owner) {
  PyObject* o = owner.ptr();
  Py_INCREF(o);
  return std::shared_ptr<void>(o, [](void* p) {
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than crash
    PyGILState_STATE state = PyGILState_Ensure();  // the last view may die on a thread without the GIL
    Py_DECREF(static_cast<PyObject*>(p));
    PyGILState_Release(state);
  });
}

nb::handle numpy_module() {
  static nb::object* np = new nb::object(nb::module_::import_("numpy"));  // leaked: lives until exit
  return *np;
}

Device to_device_or_default(nb::handle h) {
  auto d = to_optional_device(h);
  return d ? *d : default_device();
}

Shape to_shape(nb::handle h) {
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) return Shape{nb::cast<std::int64_t>(h)};
  // One __index__ object that is not a sequence: a NumPy integer scalar (np.argmax's result, a
  // shape's entry), as NumPy takes it for an axis or a shape.
  if (PyIndex_Check(h.ptr()) && !PyBool_Check(h.ptr()) && !PySequence_Check(h.ptr())) {
    const Py_ssize_t v = PyNumber_AsSsize_t(h.ptr(), PyExc_OverflowError);
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    return Shape{static_cast<std::int64_t>(v)};
  }
  if (!PySequence_Check(h.ptr()) || nb::isinstance<nb::str>(h)) {
    throw nb::type_error(("tessel: a shape must be an int or a sequence of ints, got " +
                          nb::cast<std::string>(nb::repr(h))).c_str());
  }
  Shape shape;
  for (nb::handle item : h) {
    if (!PyIndex_Check(item.ptr()) || PyBool_Check(item.ptr())) {
      throw nb::type_error(("tessel: a shape must hold ints, got " + nb::cast<std::string>(nb::repr(h))).c_str());
    }
    shape.push_back(PyNumber_AsSsize_t(item.ptr(), PyExc_OverflowError));
    if (PyErr_Occurred()) throw nb::python_error();
  }
  return shape;
}

std::optional<std::vector<std::int64_t>> to_axes(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return to_shape(h);
}

bool to_scalar(nb::handle h, Scalar& out) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) {
    out = Scalar(o == Py_True);
    return true;
  }
  if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) {
      if (v == -1 && PyErr_Occurred()) throw nb::python_error();
      out = Scalar(static_cast<std::int64_t>(v));
      return true;
    }
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(o);
      if (!PyErr_Occurred()) {
        out = Scalar(static_cast<std::uint64_t>(u));
        return true;
      }
      PyErr_Clear();
    }
    PyErr_SetString(PyExc_OverflowError, "tessel: Python int out of the range of int64/uint64");
    throw nb::python_error();
  }
  // Exact types: NumPy's float64/complex128 scalars subclass float/complex but are strongly
  // typed in NumPy 2 (NEP 50); they go through asarray as 0-d arrays instead.
  if (PyFloat_CheckExact(o)) {
    out = Scalar(PyFloat_AS_DOUBLE(o));
    return true;
  }
  if (PyComplex_CheckExact(o)) {
    out = Scalar(std::complex<double>(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)));
    return true;
  }
  return false;
}

Array to_array(nb::handle h, std::optional<Device> device, bool without_copy) {
  if (is_array(h)) return as_array(h);
  // Leaked on purpose: a static nb::object would be released after the interpreter is gone.
  static nb::object* asarray = new nb::object(nb::module_::import_("tessel").attr("asarray"));
  const nb::object copy = without_copy ? nb::object(nb::bool_(false)) : nb::none();
  nb::object result = device ? (*asarray)(h, "device"_a = *device, "copy"_a = copy) : (*asarray)(h, "copy"_a = copy);
  return nb::cast<Array>(result);
}

namespace {
// The C++ exception a type slot caught, rethrown by _rethrow_pending inside nanobind's dispatch so
// that every registered translator (tessel errors, nanobind's builtins, std exceptions) applies.
thread_local std::exception_ptr pending_exception;
PyObject* rethrow_function = nullptr;
}  // namespace

PyObject* set_python_error_from_current_exception() noexcept {
  pending_exception = std::current_exception();
  PyObject* r = PyObject_CallNoArgs(rethrow_function);  // always raises
  Py_XDECREF(r);
  pending_exception = nullptr;
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "tessel: an exception could not be translated");
  return nullptr;
}

void register_core(nb::module_& m) {
  m.def("_rethrow_pending", [] {
    std::exception_ptr e = pending_exception;
    pending_exception = nullptr;
    if (e) std::rethrow_exception(e);
  });
  rethrow_function = nb::object(m.attr("_rethrow_pending")).release().ptr();  // module lifetime
  register_errors(m);
  register_dtypes(m);
  register_devices(m);
  register_streams(m);
}

}  // namespace tessel::python
