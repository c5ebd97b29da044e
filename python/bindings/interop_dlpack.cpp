// DLPack 1.x (versioned and legacy capsules): Array.__dlpack__ and __dlpack_device__ (export),
// ts.from_dlpack (import: through the producer's C exchange API when it has one, else through
// __dlpack_device__ and __dlpack__). Ownership and streams: see interop.hpp.
#include <cstring>
#include <string>
#include <vector>

#include "interop.hpp"

namespace tessel::python {

using namespace dlpack;

DLDataType dl_dtype(DType d) {
  const auto bits = static_cast<std::uint8_t>(itemsize(d) * 8);
  switch (dtype_kind(d)) {
    case DTypeKind::boolean: return {kDLBool, 8, 1};
    case DTypeKind::signed_int: return {kDLInt, bits, 1};
    case DTypeKind::unsigned_int: return {kDLUInt, bits, 1};
    case DTypeKind::floating: return {d == DType::bfloat16 ? std::uint8_t{kDLBfloat} : std::uint8_t{kDLFloat}, bits, 1};
    default: return {kDLComplex, bits, 1};
  }
}

DType dtype_from_dl(DLDataType t, const char* op) {
  auto fail = [&]() -> DType {
    throw tessel::DTypeError(std::string(op) + ": unsupported DLPack dtype (code " + std::to_string(t.code) +
                             ", bits " + std::to_string(t.bits) + ", lanes " + std::to_string(t.lanes) + ")");
  };
  if (t.lanes != 1) return fail();
  switch (t.code) {
    case kDLBool: return t.bits == 8 ? DType::bool_ : fail();
    case kDLInt:
      switch (t.bits) { case 8: return DType::int8; case 16: return DType::int16; case 32: return DType::int32; case 64: return DType::int64; default: return fail(); }
    case kDLUInt:
      switch (t.bits) { case 1: return fail(); case 8: return DType::uint8; case 16: return DType::uint16; case 32: return DType::uint32; case 64: return DType::uint64; default: return fail(); }
    case kDLFloat:
      switch (t.bits) { case 16: return DType::float16; case 32: return DType::float32; case 64: return DType::float64; default: return fail(); }
    case kDLBfloat: return t.bits == 16 ? DType::bfloat16 : fail();
    case kDLComplex:
      switch (t.bits) { case 64: return DType::complex64; case 128: return DType::complex128; default: return fail(); }
    default: return fail();
  }
}

// Describes `a` in t; shape and strides point to storage the caller keeps alive.
void fill_tensor(DLTensor& t, const Array& a, const std::int64_t* shape, const std::int64_t* strides) {
  t.data = a.size() == 0 ? nullptr : a.data();
  // Pinned host memory goes out as kDLCPU: NumPy and most consumers import only that, and it is
  // ordinary host memory to them.
  t.device = a.device().is_cuda() ? DLDevice{kDLCUDA, a.device().index} : DLDevice{kDLCPU, 0};
  t.ndim = static_cast<std::int32_t>(a.ndim());
  t.dtype = dl_dtype(a.dtype());
  t.shape = const_cast<std::int64_t*>(shape);
  t.strides = const_cast<std::int64_t*>(strides);
  t.byte_offset = 0;
}

namespace {

// What an exported capsule owns: the array (keeps the storage alive) and the shape/strides
// arrays the DLTensor points into.
struct ExportContext {
  Array array;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

void fill_tensor(DLTensor& t, ExportContext& ctx) {
  python::fill_tensor(t, ctx.array, ctx.shape.data(), ctx.strides.data());
}

template <class Managed>
void delete_managed(Managed* m) {
  delete static_cast<ExportContext*>(m->manager_ctx);
  delete m;
}

template <class Managed>
void capsule_destructor(PyObject* capsule) {
  constexpr bool versioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  const char* name = versioned ? kVersionedName : kLegacyName;
  if (!PyCapsule_IsValid(capsule, name)) return;  // consumed: the consumer owns it now
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  PyErr_Restore(type, value, traceback);
}

}  // namespace

// A versioned managed tensor that owns a reference to `a` (the storage lives until the deleter).
DLManagedTensorVersioned* new_versioned(const Array& a, bool copied) {
  auto ctx = std::make_unique<ExportContext>(ExportContext{a, a.shape(), a.strides()});
  auto* m = new DLManagedTensorVersioned{};
  m->version = {1, 0};
  m->manager_ctx = ctx.get();
  m->deleter = &delete_managed<DLManagedTensorVersioned>;
  m->flags = copied ? kFlagIsCopied : (a.is_read_only() ? kFlagReadOnly : 0);
  fill_tensor(m->dl_tensor, *ctx.release());
  return m;
}

// Wraps a DLTensor the caller owns through keep_alive (which runs the producer's deleter when the
// last view dies, or at once when this throws) as a tessel array; then device=/copy=.
nb::object import_dltensor(const DLTensor& tensor, std::shared_ptr<void> keep_alive, bool read_only, nb::handle device,
                           nb::handle copy) {
  const DLTensor* t = &tensor;
  const DType dtype = dtype_from_dl(t->dtype, "from_dlpack");
  Device dev;
  switch (t->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: dev = Device::cpu(); break;
    case kDLCUDA:
    case kDLCUDAManaged:
      check_cuda_device(t->device.device_id, "from_dlpack");
      dev = Device::cuda(t->device.device_id);
      break;
    default:
      throw tessel::DeviceError("from_dlpack: unsupported DLPack device type " + std::to_string(t->device.device_type) +
                                " (tessel handles CPU and CUDA memory)");
  }
  if (t->ndim < 0) throw tessel::ValueError("from_dlpack: negative ndim");
  Shape shape(t->shape, t->shape + t->ndim);
  Strides strides = t->strides != nullptr ? Strides(t->strides, t->strides + t->ndim) : contiguous_strides(shape);
  const std::int64_t item = itemsize(dtype);
  if (t->byte_offset % static_cast<std::uint64_t>(item) != 0) {
    throw tessel::ValueError("from_dlpack: byte_offset " + std::to_string(t->byte_offset) + " is not a multiple of the itemsize");
  }
  void* data = static_cast<unsigned char*>(t->data) + t->byte_offset;
  Array a = wrap_foreign(numel(shape) == 0 ? nullptr : data, shape, strides, dtype, dev, std::move(keep_alive),
                         "from_dlpack", read_only);
  return wrap_array(finish_import(a, device, copy, "from_dlpack"));
}

namespace {

void hand_over_to_consumer(const Array& a, nb::handle stream, const char* op) {
  if (!a.device().is_cuda()) return;
  std::intptr_t consumer = 1;  // None: the legacy default stream (DLPack)
  if (!stream.is_none()) {
    if (!is_python_int(stream)) throw nb::type_error((std::string(op) + ": stream must be None or an int").c_str());
    consumer = nb::cast<std::intptr_t>(stream);
  }
  if (consumer == 0) {
    throw tessel::ValueError(std::string(op) + ": stream 0 is ambiguous for CUDA; use 1 (legacy default) or 2 (per-thread)");
  }
  hand_over_to_consumer_stream(a, consumer);
}

nb::object dlpack_export(const Array& self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                         nb::handle copy) {
  Array a = self;
  bool copied = false;
  const std::optional<bool> copy_flag = copy.is_none() ? std::nullopt : std::optional<bool>(nb::cast<bool>(copy));
  if (!dl_device.is_none()) {
    const auto pair = nb::cast<nb::tuple>(dl_device);
    const int type = nb::cast<int>(pair[0]), id = nb::cast<int>(pair[1]);
    Device target = type == kDLCUDA ? Device::cuda(id) : Device::cpu();
    if (type != kDLCPU && type != kDLCUDA && type != kDLCUDAHost) {
      throw nb::buffer_error(("__dlpack__: unsupported dl_device type " + std::to_string(type)).c_str());
    }
    if (target != a.device()) {
      if (copy_flag && !*copy_flag) {
        throw nb::buffer_error(("__dlpack__: the array is on " + a.device().str() + ", dl_device asks for " +
                                target.str() + " and copy=False")
                                   .c_str());
      }
      a = a.to(target);
      copied = true;
    }
  }
  if (copy_flag && *copy_flag && !copied) {
    a = a.copy();
    copied = true;
  }
  hand_over_to_consumer(a, stream, "__dlpack__");
  // CPU consumers read at once: wait for a pending write (a device -> host copy in flight).
  if (a.device().is_cpu()) {
    nb::gil_scoped_release release;
    a.wait();
  }
  bool versioned = false;
  if (!max_version.is_none()) {
    const auto v = nb::cast<nb::tuple>(max_version);
    versioned = nb::cast<int>(v[0]) >= 1;
  }
  if (!versioned && !copied && a.is_read_only()) {
    // As NumPy: a legacy capsule cannot say read-only, and the consumer would write into it.
    throw nb::buffer_error("__dlpack__: the array is read-only and a pre-1.0 DLPack capsule cannot mark it so; "
                           "pass max_version=(1, 0) or copy=True");
  }
  if (versioned) {
    DLManagedTensorVersioned* m = new_versioned(a, copied);
    PyObject* cap = PyCapsule_New(m, kVersionedName, &capsule_destructor<DLManagedTensorVersioned>);
    if (cap == nullptr) {
      delete_managed(m);
      throw nb::python_error();
    }
    return nb::steal(cap);
  }
  auto* ctx = new ExportContext{a, a.shape(), a.strides()};
  auto* m = new DLManagedTensor{};
  m->manager_ctx = ctx;
  m->deleter = &delete_managed<DLManagedTensor>;
  fill_tensor(m->dl_tensor, *ctx);
  PyObject* cap = PyCapsule_New(m, kLegacyName, &capsule_destructor<DLManagedTensor>);
  if (cap == nullptr) {
    delete_managed(m);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

nb::object dlpack_import(nb::handle capsule, nb::handle device, nb::handle copy) {
  PyObject* cap = capsule.ptr();
  if (!PyCapsule_CheckExact(cap)) throw nb::type_error("from_dlpack: expected a DLPack capsule");
  const char* name = PyCapsule_GetName(cap);
  if (name != nullptr && (std::strcmp(name, kUsedVersionedName) == 0 || std::strcmp(name, kUsedLegacyName) == 0)) {
    throw tessel::ValueError("from_dlpack: this DLPack capsule was already consumed (a capsule can be imported once)");
  }
  DLTensor* t = nullptr;
  std::shared_ptr<void> keep_alive;
  bool read_only = false;  // only versioned capsules carry flags
  if (name != nullptr && std::strcmp(name, kVersionedName) == 0) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, kVersionedName));
    if (m == nullptr) throw nb::python_error();
    if (m->version.major != 1) {
      throw nb::buffer_error(("from_dlpack: unsupported DLPack major version " + std::to_string(m->version.major)).c_str());
    }
    t = &m->dl_tensor;
    read_only = (m->flags & kFlagReadOnly) != 0;
    dtype_from_dl(t->dtype, "from_dlpack");  // validate before taking ownership
    keep_alive = dlpack_keep_alive(m);
    PyCapsule_SetName(cap, kUsedVersionedName);
  } else if (name != nullptr && std::strcmp(name, kLegacyName) == 0) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kLegacyName));
    if (m == nullptr) throw nb::python_error();
    t = &m->dl_tensor;
    dtype_from_dl(t->dtype, "from_dlpack");
    keep_alive = dlpack_keep_alive(m);
    PyCapsule_SetName(cap, kUsedLegacyName);
  } else {
    throw nb::type_error(("from_dlpack: not a DLPack capsule (name '" + std::string(name ? name : "") + "')").c_str());
  }
  // From here the capsule is consumed; keep_alive calls the producer's deleter on every path.
  return import_dltensor(*t, std::move(keep_alive), read_only, device, copy);
}

// Interned attribute and keyword names, and the (1, 0) max_version tuple: created once.
struct DLPackNames {
  PyObject* dlpack = PyUnicode_InternFromString("__dlpack__");
  PyObject* dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
  PyObject* stream_and_max_version = Py_BuildValue("(ss)", "stream", "max_version");
  PyObject* stream_only = Py_BuildValue("(s)", "stream");
  PyObject* version_1_0 = Py_BuildValue("(ii)", 1, 0);
};
const DLPackNames& dlpack_names() {
  static const DLPackNames* names = new DLPackNames();  // leaked: module lifetime
  return *names;
}

// x.__dlpack__(stream=..., max_version=(1, 0)); producers of the pre-1.0 protocol that reject
// max_version with a TypeError are asked again without it.
nb::object call_dlpack(nb::handle x, nb::handle stream) {
  const DLPackNames& n = dlpack_names();
  PyObject* args[3] = {x.ptr(), stream.ptr(), n.version_1_0};
  PyObject* r = PyObject_VectorcallMethod(n.dlpack, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, n.stream_and_max_version);
  if (r != nullptr) return nb::steal(r);
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
  PyErr_Clear();
  r = stream.is_none() ? PyObject_VectorcallMethod(n.dlpack, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr)
                       : PyObject_VectorcallMethod(n.dlpack, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, n.stream_only);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

// ts.from_dlpack: the whole import in one C++ call (device query, stream handshake, capsule).
// On CUDA the producer is passed tessel's current stream of the array's device (1 for the legacy
// default stream, which spares producers like PyTorch an event when theirs is the default too);
// the producer makes that stream wait for its pending work (DLPack's stream contract).
nb::object from_dlpack_object(nb::handle x, nb::handle device, nb::handle copy) {
  if (PyCapsule_CheckExact(x.ptr())) return dlpack_import(x, device, copy);
  nb::object fast = exchange_import_if_available(x, device, copy);
  if (fast.is_valid()) return fast;
  const DLPackNames& n = dlpack_names();
  PyObject* dev_args[1] = {x.ptr()};
  PyObject* dev = PyObject_VectorcallMethod(n.dlpack_device, dev_args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (dev == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();
    PyErr_Clear();
    throw nb::type_error(("from_dlpack: " + std::string(nb::inst_name(x).c_str()) +
                          " does not implement the DLPack protocol (__dlpack__ and __dlpack_device__)")
                             .c_str());
  }
  nb::object dev_pair = nb::steal(dev);
  int dev_type = 0, dev_id = 0;
  if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2) {
    dev_type = nb::cast<int>(nb::handle(PyTuple_GET_ITEM(dev, 0)));  // IntEnum members cast too
    dev_id = nb::cast<int>(nb::handle(PyTuple_GET_ITEM(dev, 1)));
  } else {
    dev_type = nb::cast<int>(dev_pair[0]);
    dev_id = nb::cast<int>(dev_pair[1]);
  }
  nb::object stream = nb::none();
  if (dev_type == kDLCUDA) {
    check_cuda_device(dev_id, "from_dlpack");
    const auto handle = reinterpret_cast<std::uintptr_t>(current_stream(Device::cuda(dev_id)).handle());
    stream = nb::int_(handle == 0 ? std::uintptr_t{1} : handle);
  } else if (dev_type != kDLCPU && dev_type != kDLCUDAHost) {
    throw tessel::DeviceError("from_dlpack: unsupported DLPack device type " + std::to_string(dev_type) +
                              " (tessel handles CPU and CUDA)");
  }
  return dlpack_import(call_dlpack(x, stream), device, copy);
}

}  // namespace

void register_dlpack(nb::module_& m) {
  nb::class_<Array>& cls = array_class();
  cls.def("__dlpack__", &dlpack_export, nb::kw_only(), "stream"_a = nb::none(), "max_version"_a = nb::none(),
          "dl_device"_a = nb::none(), "copy"_a = nb::none(),
          "A DLPack capsule (versioned when max_version >= (1, 0)). On CUDA the consumer's stream waits "
          "for tessel's current stream through an event.");
  cls.def("__dlpack_device__", [](const Array& a) {
    return a.device().is_cuda() ? nb::make_tuple(int(kDLCUDA), a.device().index) : nb::make_tuple(int(kDLCPU), 0);
  });
  m.def("from_dlpack", &from_dlpack_object, "x"_a, nb::kw_only(), "device"_a = nb::none(), "copy"_a = nb::none(),
        "A tessel array sharing memory with x (an object with __dlpack__, or a DLPack capsule).\n\n"
        "Zero-copy unless device differs from x's device or copy=True. The producer's memory stays alive as "
        "long as any tessel view of it does. On CUDA, tessel's current stream is passed to the producer, "
        "which makes it wait for its pending work. Read-only producers give read-only arrays.");
  m.def("_from_dlpack_capsule", &dlpack_import, "capsule"_a, "device"_a = nb::none(), "copy"_a = nb::none());
  // The DLPack stream integer of tessel's current stream on cuda:index (checks the device first).
  m.def("_dlpack_consumer_stream", [](int index) {
    check_cuda_device(index, "from_dlpack");
    const auto handle = reinterpret_cast<std::uintptr_t>(current_stream(Device::cuda(index)).handle());
    return handle == 0 ? std::uintptr_t{1} : handle;
  });
}

}  // namespace tessel::python
