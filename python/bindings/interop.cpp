// Interop layer: DLPack 1.x (versioned and legacy capsules) and __cuda_array_interface__ v3.
//
// Ownership model: an exported capsule holds a tessel::Array (so the storage lives until the
// consumer calls the deleter); an imported array wraps the foreign memory in a Buffer whose
// keep-alive releases the producer (calls its DLPack deleter, or drops the reference to the
// object that exposed __cuda_array_interface__) when the last tessel view dies.
//
// Streams: data produced on tessel's current stream is handed over by recording an event there
// and making the consumer's stream wait on it (cudaStreamWaitEvent); never a device-wide sync.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <string>

#include "common.hpp"
#include "dlpack_exchange.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace tessel::python {
namespace {

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

// What an exported capsule owns: the array (keeps the storage alive) and the shape/strides
// arrays the DLTensor points into.
struct ExportContext {
  Array array;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

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
void fill_tensor(DLTensor& t, ExportContext& ctx) { fill_tensor(t, ctx.array, ctx.shape.data(), ctx.strides.data()); }

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

// A versioned managed tensor that owns a reference to `a` (the storage lives until the deleter).
DLManagedTensorVersioned* new_versioned(const Array& a, bool copied) {
  auto ctx = std::make_unique<ExportContext>(ExportContext{a, a.shape(), a.strides()});
  auto* m = new DLManagedTensorVersioned{};
  m->version = {1, 0};
  m->manager_ctx = ctx.get();
  m->deleter = &delete_managed<DLManagedTensorVersioned>;
  m->flags = copied ? kFlagIsCopied : (is_read_only(a) ? kFlagReadOnly : 0);
  fill_tensor(m->dl_tensor, *ctx.release());
  return m;
}

// One reusable event per device and thread for the stream hand-overs (creating a CUDA event per
// call costs more than the rest of an export). Reuse is safe: cudaStreamWaitEvent waits for the
// record made before it, later records do not change that wait. Leaked on purpose: destroying
// events at thread or process exit could run after the CUDA context is gone.
Event& handover_event(Device dev) {
  thread_local auto* events = new std::vector<std::unique_ptr<Event>>();
  const auto index = static_cast<std::size_t>(dev.index);
  if (events->size() <= index) events->resize(index + 1);
  if (!(*events)[index]) (*events)[index] = std::make_unique<Event>(dev, false);
  return *(*events)[index];
}

// Tessel's current stream of `dev` waits for the work queued so far on a foreign stream (a
// protocol integer: 1 is the legacy default stream, 2 the per-thread one, else a cudaStream_t).
// Nothing to do when both are the same stream.
void wait_for_foreign_stream(Device dev, std::intptr_t foreign) {
  const Stream mine = current_stream(dev);
  const auto mine_handle = reinterpret_cast<std::intptr_t>(mine.handle());
  if (mine_handle == foreign || (mine_handle == 0 && foreign == 1)) return;
  // The stream belongs to the array's device, which need not be the current one: the legacy
  // default stream (1, a null handle) resolves against the current device.
  DeviceGuard guard(dev);
  Event& event = handover_event(dev);
  event.record(Stream::from_handle(foreign == 1 ? nullptr : reinterpret_cast<void*>(foreign), dev));
  mine.wait(event);
}

// Makes the consumer's stream (a DLPack/CAI stream integer) wait for work queued so far on
// tessel's current stream of `device`, and for the array's pending write.
// `consumer` is a DLPack stream integer: 1 the legacy default stream, 2 the per-thread one, -1 no
// synchronization, else a cudaStream_t.
void hand_over_to_consumer_stream(const Array& a, std::intptr_t consumer) {
  if (!a.device().is_cuda()) return;
  const Device dev = a.device();
  const Stream producer = current_stream(dev);
  a.storage()->wait_on_stream(producer);
  if (consumer == -1) return;  // the consumer asked for no synchronization
  const auto producer_handle = reinterpret_cast<std::intptr_t>(producer.handle());
  if (producer_handle == consumer || (producer_handle == 0 && consumer == 1)) return;  // same stream
  // The handle 1 means the legacy default stream of the array's device: CUDA resolves a null
  // stream against the current device, so that device is made current for the wait.
  DeviceGuard guard(dev);
  Event& event = handover_event(dev);
  event.record(producer);
  Stream::from_handle(consumer == 1 ? nullptr : reinterpret_cast<void*>(consumer), dev).wait(event);
}

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
  if (!versioned && !copied && is_read_only(a)) {
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

void check_cuda_device(int index, const char* op) {
  if (!cuda_available()) {
    throw tessel::DeviceError(std::string(op) + ": the array is on cuda:" + std::to_string(index) +
                              " but CUDA is unavailable (" + cuda_unavailable_reason() + ")");
  }
  if (index < 0 || index >= device_count()) {
    throw tessel::DeviceError(std::string(op) + ": the array is on cuda:" + std::to_string(index) + " but this process sees " +
                              std::to_string(device_count()) + " CUDA device(s)");
  }
}

// Wraps foreign memory (element 0 at `data`) as an Array without copying.
// A null data pointer is only valid for an empty array (numel also rejects negative dimensions).
void check_data_pointer(const void* data, const Shape& shape, const char* op) {
  if (data == nullptr && numel(shape) > 0) {
    throw tessel::ValueError(std::string(op) + ": null data pointer for shape " + shape_str(shape));
  }
}

// ---- read-only imports ----
// Buffers that wrap read-only foreign memory. The core Array has no read-only flag, so the
// bindings keep this set: a buffer is registered when wrapped and removed by its keep-alive's
// destructor (which runs when the Buffer dies, maybe on a thread without the GIL: a mutex).
std::mutex read_only_mutex;
std::unordered_set<const void*>& read_only_buffers() {
  static auto* set = new std::unordered_set<const void*>();  // leaked: buffers may die at exit
  return *set;
}
std::atomic<std::size_t> read_only_count{0};  // lets is_read_only skip the lock when none exist

struct ReadOnlyKeepAlive {
  std::shared_ptr<void> producer;  // the producer's own keep-alive (released after unregistering)
  const void* buffer = nullptr;
  ~ReadOnlyKeepAlive() {
    if (buffer == nullptr) return;
    std::lock_guard<std::mutex> lock(read_only_mutex);
    read_only_buffers().erase(buffer);
    read_only_count.store(read_only_buffers().size());
  }
};

Array wrap_foreign(void* data, const Shape& shape, const Strides& strides, DType dtype, Device device,
                   std::shared_ptr<void> keep_alive, const char* op, bool read_only = false) {
  check_data_pointer(data, shape, op);
  const std::int64_t item = itemsize(dtype);
  if (data != nullptr && reinterpret_cast<std::uintptr_t>(data) % static_cast<std::uintptr_t>(item) != 0) {
    throw tessel::ValueError(std::string(op) + ": data pointer is not aligned to the itemsize " + std::to_string(item) +
                             " of " + dtype_name(dtype));
  }
  if (strides.size() != shape.size()) {
    throw tessel::ValueError(std::string(op) + ": strides and shape have different lengths");
  }
  const ElementExtent extent = element_extent(shape, strides);
  const std::int64_t count = numel(shape);
  auto* base = static_cast<unsigned char*>(data) + (count == 0 ? 0 : extent.lowest * item);
  const std::int64_t bytes = count == 0 ? 0 : (extent.highest - extent.lowest + 1) * item;
  const MemoryKind kind = device.is_cuda() ? MemoryKind::device : MemoryKind::host;
  std::shared_ptr<ReadOnlyKeepAlive> read_only_owner;
  if (read_only) {
    read_only_owner = std::make_shared<ReadOnlyKeepAlive>();
    read_only_owner->producer = std::move(keep_alive);
    keep_alive = read_only_owner;
  }
  auto buffer = Buffer::wrap(base, bytes, device, kind, std::move(keep_alive));
  if (read_only_owner) {
    std::lock_guard<std::mutex> lock(read_only_mutex);
    read_only_buffers().insert(buffer.get());
    read_only_owner->buffer = buffer.get();
    read_only_count.store(read_only_buffers().size());
  }
  return Array(std::make_shared<detail::Storage>(buffer), shape, strides, count == 0 ? 0 : -extent.lowest, dtype);
}

Array finish_import(Array a, nb::handle device, nb::handle copy, const char* op) {
  const auto target = to_optional_device(device);
  const std::optional<bool> copy_flag = copy.is_none() ? std::nullopt : std::optional<bool>(nb::cast<bool>(copy));
  if (target && *target != a.device()) {
    if (copy_flag && !*copy_flag) {
      throw tessel::ValueError(std::string(op) + ": the array is on " + a.device().str() + ", device=" + target->str() +
                               " needs a copy but copy=False");
    }
    return a.to(*target);
  }
  if (copy_flag && *copy_flag) return a.copy();
  return a;
}

// Runs a DLPack deleter with the GIL held (NumPy's deleter touches Python objects).
template <class Managed>
std::shared_ptr<void> dlpack_keep_alive(Managed* m) {
  return std::shared_ptr<void>(m, [](void* p) {
    auto* managed = static_cast<Managed*>(p);
    if (managed->deleter == nullptr) return;
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than crash
    PyGILState_STATE state = PyGILState_Ensure();
    managed->deleter(managed);
    PyGILState_Release(state);
  });
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

// ---- the DLPack C exchange API (dlpack_exchange.hpp) ----
// Consumer: ts.from_dlpack(x) looks up type(x).__dlpack_c_exchange_api__ once per type and, when
// the producer has one, takes the tensor through its C functions: no __dlpack_device__ or
// __dlpack__ call, no capsule, no Python stream objects in the producer. The stream handshake is
// then tessel's: its current stream waits for the producer's current work stream.
// TESSEL_DLPACK_EXCHANGE=0 (or ts._tessel._dlpack_exchange(False)) turns it off.
std::atomic<bool> exchange_enabled{[] {
  const char* value = std::getenv("TESSEL_DLPACK_EXCHANGE");
  return value == nullptr || std::strcmp(value, "0") != 0;
}()};
std::atomic<std::uint64_t> exchange_import_hits{0};  // imports done through a producer's table

// The producer's table behind one attribute of a type, or null: the attribute must be a capsule
// named "dlpack_exchange_api" whose table (or one on its prev_api chain) has major version 1 and
// the functions a consumer needs.
const DLPackExchangeAPI* exchange_api_from_attribute(PyTypeObject* type, const char* attribute) {
  PyObject* value = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), attribute);
  if (value == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  void* pointer = PyCapsule_IsValid(value, kExchangeCapsuleName) ? PyCapsule_GetPointer(value, kExchangeCapsuleName) : nullptr;
  Py_DECREF(value);  // the table lives as long as the process (DLPack's rule for producers)
  auto* header = static_cast<const DLPackExchangeAPIHeader*>(pointer);
  while (header != nullptr && header->version.major != 1) header = header->prev_api;
  const auto* api = reinterpret_cast<const DLPackExchangeAPI*>(header);
  if (api == nullptr || api->managed_tensor_from_py_object_no_sync == nullptr || api->current_work_stream == nullptr) {
    return nullptr;
  }
  return api;
}

// type -> table (or null), looked up once per type. Only touched with the GIL held. An entry
// holds a reference to its type, so a freed type's address cannot come back as a stale hit; the
// cache is bounded (types made in a loop would otherwise pile up): past it, types are looked up
// on every call.
struct ExchangeTypeEntry {
  PyTypeObject* type;
  const DLPackExchangeAPI* api;
};
constexpr std::size_t kExchangeCacheEntries = 32;

const DLPackExchangeAPI* exchange_api_of(PyTypeObject* type) {
  static auto* cache = new std::vector<ExchangeTypeEntry>();  // leaked: module lifetime
  for (const ExchangeTypeEntry& entry : *cache) {
    if (entry.type == type) return entry.api;
  }
  const DLPackExchangeAPI* api = exchange_api_from_attribute(type, kExchangeAttribute);
  if (api == nullptr) api = exchange_api_from_attribute(type, kExchangeAttributeOld);
  if (cache->size() < kExchangeCacheEntries) {
    Py_INCREF(type);
    cache->push_back({type, api});
  }
  return api;
}

// A C exchange function failed: its Python error (or a plain one if it set none).
[[noreturn]] void throw_exchange_error(const char* what) {
  if (PyErr_Occurred()) throw nb::python_error();
  throw tessel::Error(std::string("from_dlpack: the producer's ") + what + " failed without an error");
}

// ts.from_dlpack(x) through the producer's table. An invalid object means "not handled here"
// (the producer refused or speaks another major version): the caller falls back to __dlpack__,
// which then reports the producer's own error if there is one.
nb::object exchange_import(const DLPackExchangeAPI* api, nb::handle x, nb::handle device, nb::handle copy) {
  DLManagedTensorVersioned* m = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(x.ptr(), &m) != 0 || m == nullptr) {
    PyErr_Clear();
    return {};
  }
  // From here tessel owns m: keep_alive calls the producer's deleter on every path (the deleter
  // sits at the same place in every 1.x-and-later layout).
  std::shared_ptr<void> keep_alive = dlpack_keep_alive(m);
  if (m->version.major != 1) return {};
  const DLTensor& t = m->dl_tensor;
  if (t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged) {
    check_cuda_device(t.device.device_id, "from_dlpack");
    void* producer_stream = nullptr;
    if (api->current_work_stream(kDLCUDA, t.device.device_id, &producer_stream) != 0) {
      throw_exchange_error("current_work_stream");
    }
    // A null cudaStream_t is the legacy default stream (the protocol's 1).
    wait_for_foreign_stream(Device::cuda(t.device.device_id),
                            producer_stream == nullptr ? 1 : reinterpret_cast<std::intptr_t>(producer_stream));
  }
  const bool read_only = (m->flags & kFlagReadOnly) != 0;
  nb::object result = import_dltensor(t, std::move(keep_alive), read_only, device, copy);
  exchange_import_hits.fetch_add(1, std::memory_order_relaxed);
  return result;
}

// Producer: tessel's own table, the class attribute __dlpack_c_exchange_api__ of tessel.Array.
// Its stream contract is the one of __dlpack__ without a consumer stream: tessel's current
// stream of the array's device is the work stream, and a pending write of the array on another
// stream is first made part of it; CPU arrays wait for a pending device -> host copy.
void settle_for_export(const Array& a) {
  if (a.device().is_cuda()) {
    a.storage()->wait_on_stream(current_stream(a.device()));
    return;
  }
  nb::gil_scoped_release release;
  a.wait();
}

// The array behind py_object, or TypeError (the table belongs to tessel.Array and its subclasses).
const Array& exchange_array(void* py_object) {
  nb::handle h(static_cast<PyObject*>(py_object));
  if (h.ptr() == nullptr || !is_array(h)) {
    throw nb::type_error(("DLPack exchange: expected a tessel.Array, got " +
                          std::string(h.ptr() == nullptr ? "NULL" : nb::inst_name(h).c_str()))
                             .c_str());
  }
  return *nb::inst_ptr<Array>(h);
}

// The C functions of the table must not throw: errors become a Python exception (taking the GIL,
// as the allocator and current_work_stream may be called without it) and -1.
int exchange_failed() noexcept {
  PyGILState_STATE state = PyGILState_Ensure();
  set_python_error_from_current_exception();
  PyGILState_Release(state);
  return -1;
}

int exchange_allocate(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                      void (*set_error)(void* error_ctx, const char* kind, const char* message)) noexcept {
  try {
    if (prototype == nullptr || out == nullptr) throw tessel::ValueError("DLPack allocator: null prototype or output");
    const DType dtype = dtype_from_dl(prototype->dtype, "DLPack allocator");
    Device dev;
    if (prototype->device.device_type == kDLCUDA) {
      check_cuda_device(prototype->device.device_id, "DLPack allocator");
      dev = Device::cuda(prototype->device.device_id);
    } else if (prototype->device.device_type != kDLCPU) {
      throw tessel::DeviceError("DLPack allocator: unsupported device type " +
                                std::to_string(prototype->device.device_type) + " (tessel allocates CPU and CUDA memory)");
    }
    if (prototype->ndim < 0 || (prototype->ndim > 0 && prototype->shape == nullptr)) {
      throw tessel::ValueError("DLPack allocator: bad ndim or null shape");
    }
    const Shape shape(prototype->shape, prototype->shape + prototype->ndim);
    *out = new_versioned(tessel::empty(shape, dtype, dev), false);
    return 0;
  } catch (const std::bad_alloc&) {
    set_error(error_ctx, "MemoryError", "DLPack allocator: out of host memory");
  } catch (const std::exception& e) {
    // The Python exception each tessel error maps to elsewhere in the bindings.
    const char* kind = "RuntimeError";
    if (dynamic_cast<const tessel::DTypeError*>(&e)) {
      kind = "TypeError";
    } else if (dynamic_cast<const tessel::ValueError*>(&e) || dynamic_cast<const tessel::ShapeError*>(&e)) {
      kind = "ValueError";
    } else if (dynamic_cast<const tessel::OutOfMemory*>(&e)) {
      kind = "MemoryError";
    }
    set_error(error_ctx, kind, e.what());
  } catch (...) {
    set_error(error_ctx, "RuntimeError", "DLPack allocator: unknown error");
  }
  return -1;
}

int exchange_from_py_object(void* py_object, DLManagedTensorVersioned** out) noexcept {
  try {
    const Array& a = exchange_array(py_object);
    settle_for_export(a);
    *out = new_versioned(a, false);
    return 0;
  } catch (...) {
    return exchange_failed();
  }
}

int exchange_to_py_object(DLManagedTensorVersioned* tensor, void** out_py_object) noexcept {
  try {
    if (tensor == nullptr) throw tessel::ValueError("DLPack import: null managed tensor");
    std::shared_ptr<void> keep_alive = dlpack_keep_alive(tensor);  // ownership is ours, on failure too
    if (tensor->version.major != 1) {
      throw nb::buffer_error(("from_dlpack: unsupported DLPack major version " + std::to_string(tensor->version.major)).c_str());
    }
    const bool read_only = (tensor->flags & kFlagReadOnly) != 0;
    nb::object result = import_dltensor(tensor->dl_tensor, std::move(keep_alive), read_only, nb::none(), nb::none());
    *out_py_object = result.release().ptr();
    return 0;
  } catch (...) {
    return exchange_failed();
  }
}

// Shape and strides point into the Array held by py_object: valid while it lives (tessel arrays
// never change shape in place).
int exchange_dltensor_from_py_object(void* py_object, DLTensor* out) noexcept {
  try {
    const Array& a = exchange_array(py_object);
    settle_for_export(a);
    fill_tensor(*out, a, a.shape().data(), a.strides().data());
    return 0;
  } catch (...) {
    return exchange_failed();
  }
}

int exchange_current_work_stream(std::int32_t device_type, std::int32_t device_id, void** out_current_stream) noexcept {
  try {
    void* stream = nullptr;  // CPU devices have none
    if (device_type == kDLCUDA || device_type == kDLCUDAManaged) {
      check_cuda_device(device_id, "current_work_stream");
      stream = current_stream(Device::cuda(device_id)).handle();  // null: the legacy default stream
    }
    *out_current_stream = stream;
    return 0;
  } catch (...) {
    return exchange_failed();
  }
}

const DLPackExchangeAPI tessel_exchange_api{
    {kExchangeVersion, nullptr},
    &exchange_allocate,
    &exchange_from_py_object,
    &exchange_to_py_object,
    &exchange_dltensor_from_py_object,
    &exchange_current_work_stream,
};

// ts.export_to(x, cls): x as an object of cls's library through cls's exchange table
// (managed_tensor_to_py_object_no_sync): the reverse of the fast ts.from_dlpack, without the
// consumer's Python from_dlpack. The consumer's current work stream waits for tessel's current
// stream (and the array's pending write); CPU arrays wait for a pending device -> host copy.
nb::object export_to(nb::handle x, nb::handle cls) {
  if (!is_array(x)) throw nb::type_error(("export_to: x must be a tessel.Array, got " + std::string(nb::inst_name(x).c_str())).c_str());
  const Array& a = as_array(x);
  if (!PyType_Check(cls.ptr())) throw nb::type_error("export_to: cls must be a type (such as torch.Tensor)");
  const DLPackExchangeAPI* api = exchange_api_of(reinterpret_cast<PyTypeObject*>(cls.ptr()));
  if (api == nullptr || api->managed_tensor_to_py_object_no_sync == nullptr) {
    throw nb::type_error(("export_to: " + std::string(nb::type_name(cls).c_str()) +
                          " has no DLPack C exchange API (__dlpack_c_exchange_api__); use its from_dlpack")
                             .c_str());
  }
  if (a.device().is_cuda()) {
    void* consumer_stream = nullptr;
    if (api->current_work_stream(kDLCUDA, a.device().index, &consumer_stream) != 0) {
      throw_exchange_error("current_work_stream");
    }
    hand_over_to_consumer_stream(a, consumer_stream == nullptr ? 1 : reinterpret_cast<std::intptr_t>(consumer_stream));
  } else {
    nb::gil_scoped_release release;
    a.wait();
  }
  DLManagedTensorVersioned* m = new_versioned(a, false);
  void* result = nullptr;
  if (api->managed_tensor_to_py_object_no_sync(m, &result) != 0 || result == nullptr) {  // m is theirs now
    throw_exchange_error("managed_tensor_to_py_object_no_sync");
  }
  return nb::steal(static_cast<PyObject*>(result));
}

// ts.from_dlpack: the whole import in one C++ call (device query, stream handshake, capsule).
// On CUDA the producer is passed tessel's current stream of the array's device (1 for the legacy
// default stream, which spares producers like PyTorch an event when theirs is the default too);
// the producer makes that stream wait for its pending work (DLPack's stream contract).
nb::object from_dlpack_object(nb::handle x, nb::handle device, nb::handle copy) {
  if (PyCapsule_CheckExact(x.ptr())) return dlpack_import(x, device, copy);
  if (exchange_enabled.load(std::memory_order_relaxed)) {
    if (const DLPackExchangeAPI* api = exchange_api_of(Py_TYPE(x.ptr()))) {
      nb::object result = exchange_import(api, x, device, copy);
      if (result.is_valid()) return result;
    }
  }
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

// ---- __cuda_array_interface__ ----
std::string typestr(DType d) {
  if (d == DType::bfloat16) {
    throw tessel::DTypeError("__cuda_array_interface__: bfloat16 has no typestr; use DLPack (__dlpack__) instead");
  }
  const char order = itemsize(d) == 1 ? '|' : '<';
  char kind = 'f';
  switch (dtype_kind(d)) {
    case DTypeKind::boolean: kind = 'b'; break;
    case DTypeKind::signed_int: kind = 'i'; break;
    case DTypeKind::unsigned_int: kind = 'u'; break;
    case DTypeKind::floating: kind = 'f'; break;
    default: kind = 'c'; break;
  }
  return std::string(1, order) + kind + std::to_string(itemsize(d));
}

DType dtype_from_typestr(const std::string& s, const char* op) {
  auto fail = [&]() -> DType {
    throw tessel::DTypeError(std::string(op) + ": unsupported typestr '" + s + "'");
  };
  if (s.size() < 3) return fail();
  const char order = s[0], kind = s[1];
  int size = 0;
  for (std::size_t i = 2; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9' || size > 64) return fail();
    size = size * 10 + (s[i] - '0');
  }
  if (order == '>' && size > 1) {
    throw tessel::DTypeError(std::string(op) + ": big-endian typestr '" + s + "' is not supported");
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') return fail();
  const std::string name = kind == 'b' && size == 1 ? "bool"
                           : kind == 'i'             ? "int" + std::to_string(size * 8)
                           : kind == 'u'             ? "uint" + std::to_string(size * 8)
                           : kind == 'f'             ? "float" + std::to_string(size * 8)
                           : kind == 'c'             ? "complex" + std::to_string(size * 8)
                                                     : "";
  if (name.empty()) return fail();
  try {
    return parse_dtype(name);
  } catch (const tessel::Error&) {
    return fail();
  }
}

nb::dict cuda_array_interface(const Array& a) {
  if (!a.device().is_cuda()) {
    throw nb::attribute_error("__cuda_array_interface__: only CUDA arrays export it (this array is on the CPU)");
  }
  nb::dict d;
  nb::list shape;
  for (auto s : a.shape()) shape.append(s);
  d["shape"] = nb::tuple(shape);
  d["typestr"] = typestr(a.dtype());
  d["descr"] = nb::make_tuple(nb::make_tuple("", typestr(a.dtype())));
  d["data"] = nb::make_tuple(a.size() == 0 ? std::uintptr_t{0} : reinterpret_cast<std::uintptr_t>(a.data()),
                             is_read_only(a));
  if (a.is_contiguous()) {
    d["strides"] = nb::none();
  } else {
    nb::list strides;
    for (auto s : a.strides()) strides.append(s * a.itemsize());
    d["strides"] = nb::tuple(strides);
  }
  d["version"] = 3;
  // The consumer synchronizes with tessel's current stream, which first waits for any pending
  // write of the array on another stream.
  const Stream producer = current_stream(a.device());
  a.storage()->wait_on_stream(producer);
  const auto handle = reinterpret_cast<std::uintptr_t>(producer.handle());
  d["stream"] = handle == 0 ? std::uintptr_t{1} : handle;
  return d;
}

int pointer_device(std::uintptr_t ptr, const char* op) {
#if defined(TESSEL_HAVE_CUDA)
  if (!cuda_available()) check_cuda_device(0, op);
  if (ptr == 0) return current_device().index;
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, reinterpret_cast<void*>(ptr));
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state
    throw tessel::ValueError(std::string(op) + ": cannot query the pointer: " + cudaGetErrorString(status));
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    throw tessel::ValueError(std::string(op) + ": the data pointer is not CUDA device memory");
  }
  check_cuda_device(attributes.device, op);
  return attributes.device;
#else
  (void)ptr;
  check_cuda_device(0, op);
  return 0;
#endif
}

nb::object cai_import(nb::handle obj, nb::handle device, nb::handle copy) {
  const char* op = "asarray(__cuda_array_interface__)";
  nb::object iface = obj.attr("__cuda_array_interface__");
  if (!nb::isinstance<nb::dict>(iface)) throw nb::type_error("__cuda_array_interface__ must be a dict");
  nb::dict d = nb::borrow<nb::dict>(iface);
  if (d.contains("mask") && !d["mask"].is_none()) throw tessel::ValueError(std::string(op) + ": masked arrays are not supported");
  const DType dtype = dtype_from_typestr(nb::cast<std::string>(d["typestr"]), op);
  const Shape shape = to_shape(d["shape"]);
  const std::int64_t item = itemsize(dtype);
  Strides strides;
  if (!d.contains("strides") || d["strides"].is_none()) {
    strides = contiguous_strides(shape);
  } else {
    for (nb::handle s : d["strides"]) {
      const auto bytes = nb::cast<std::int64_t>(s);
      if (bytes % item != 0) {
        throw tessel::ValueError(std::string(op) + ": stride of " + std::to_string(bytes) +
                                 " bytes is not a multiple of the itemsize " + std::to_string(item));
      }
      strides.push_back(bytes / item);
    }
  }
  const auto data = nb::cast<nb::tuple>(d["data"]);
  const auto ptr = nb::cast<std::uintptr_t>(data[0]);
  const bool read_only = data.size() > 1 && nb::cast<bool>(data[1]);
  check_data_pointer(reinterpret_cast<const void*>(ptr), shape, op);  // before asking CUDA about it
  const int index = pointer_device(ptr, op);
  const Device dev = Device::cuda(index);
  if (d.contains("stream") && !d["stream"].is_none()) {
    const auto foreign = nb::cast<std::intptr_t>(d["stream"]);
    if (foreign == 0) throw tessel::ValueError(std::string(op) + ": stream 0 is disallowed by the protocol");
    wait_for_foreign_stream(dev, foreign);
  }
  // The producer object stays alive while any tessel view of its memory does.
  Array a = wrap_foreign(numel(shape) == 0 ? nullptr : reinterpret_cast<void*>(ptr), shape, strides, dtype, dev,
                         python_keep_alive(obj), op, read_only);
  return nb::cast(finish_import(a, device, copy, op));
}

}  // namespace

bool is_read_only(const Array& a) {
  if (read_only_count.load(std::memory_order_relaxed) == 0 || !a.defined()) return false;
  std::lock_guard<std::mutex> lock(read_only_mutex);
  return read_only_buffers().count(a.buffer().get()) != 0;
}

void check_writable(const Array& a, const char* op) {
  if (is_read_only(a)) {
    throw tessel::ValueError(std::string(op) + ": the destination is a read-only view of foreign memory (imported "
                             "from a read-only DLPack capsule, a non-writeable NumPy array or a read-only "
                             "__cuda_array_interface__); copy it first (x.copy())");
  }
}

void register_interop(nb::module_& m) {
  nb::class_<Array>& cls = array_class();
  cls.def("__dlpack__", &dlpack_export, nb::kw_only(), "stream"_a = nb::none(), "max_version"_a = nb::none(),
          "dl_device"_a = nb::none(), "copy"_a = nb::none(),
          "A DLPack capsule (versioned when max_version >= (1, 0)). On CUDA the consumer's stream waits "
          "for tessel's current stream through an event.");
  cls.def("__dlpack_device__", [](const Array& a) {
    return a.device().is_cuda() ? nb::make_tuple(int(kDLCUDA), a.device().index) : nb::make_tuple(int(kDLCPU), 0);
  });
  cls.def_prop_ro("__cuda_array_interface__", &cuda_array_interface);
  // The DLPack C exchange API (the table lives for the process; the capsule has no destructor).
  nb::object exchange_capsule = nb::steal(
      PyCapsule_New(const_cast<DLPackExchangeAPI*>(&tessel_exchange_api), kExchangeCapsuleName, nullptr));
  if (!exchange_capsule.is_valid()) throw nb::python_error();
  cls.attr(kExchangeAttribute) = exchange_capsule;
  cls.attr(kExchangeAttributeOld) = exchange_capsule;  // the name of DLPack 1.2 and early tvm-ffi
  m.def("_dlpack_exchange", [](nb::handle enabled) {
    const bool before = exchange_enabled.load();
    if (!enabled.is_none()) exchange_enabled.store(nb::cast<bool>(enabled));
    return before;
  }, "enabled"_a = nb::none(),
     "Whether ts.from_dlpack uses a producer's DLPack C exchange API (__dlpack_c_exchange_api__); "
     "sets it when enabled is a bool and returns the previous setting (TESSEL_DLPACK_EXCHANGE=0 starts it off).");
  m.def("export_to", &export_to, "x"_a, "cls"_a,
        "x as an object of cls's library (e.g. export_to(x, torch.Tensor)), zero-copy, through cls's DLPack C "
        "exchange API (__dlpack_c_exchange_api__): no Python protocol calls. cls's current stream waits for "
        "tessel's current stream. TypeError when cls has no exchange API.");
  m.def("_dlpack_fast_path_hits", [] { return exchange_import_hits.load(); },
        "How many ts.from_dlpack imports went through a producer's DLPack C exchange API.");
  m.def("from_dlpack", &from_dlpack_object, "x"_a, nb::kw_only(), "device"_a = nb::none(), "copy"_a = nb::none(),
        "A tessel array sharing memory with x (an object with __dlpack__, or a DLPack capsule).\n\n"
        "Zero-copy unless device differs from x's device or copy=True. The producer's memory stays alive as "
        "long as any tessel view of it does. On CUDA, tessel's current stream is passed to the producer, "
        "which makes it wait for its pending work. Read-only producers give read-only arrays.");
  m.def("_from_dlpack_capsule", &dlpack_import, "capsule"_a, "device"_a = nb::none(), "copy"_a = nb::none());
  m.def("_from_cuda_array_interface", &cai_import, "obj"_a, "device"_a = nb::none(), "copy"_a = nb::none());
  m.def("_check_cuda_device", [](int index) { check_cuda_device(index, "from_dlpack"); });
  // The DLPack stream integer of tessel's current stream on cuda:index (checks the device first).
  m.def("_dlpack_consumer_stream", [](int index) {
    check_cuda_device(index, "from_dlpack");
    const auto handle = reinterpret_cast<std::uintptr_t>(current_stream(Device::cuda(index)).handle());
    return handle == 0 ? std::uintptr_t{1} : handle;
  });
  m.def("_wrap_host_pointer", [](std::uintptr_t ptr, nb::handle shape, nb::handle strides_bytes, nb::handle dtype,
                                  nb::handle owner, bool read_only) {
    // Zero-copy view of host memory (a NumPy array's buffer); `owner` stays alive with it.
    const DType d = to_dtype(dtype);
    const Shape s = to_shape(shape);
    Strides strides;
    for (auto b : to_shape(strides_bytes)) {
      if (b % itemsize(d) != 0) throw tessel::ValueError("asarray: a stride is not a multiple of the itemsize");
      strides.push_back(b / itemsize(d));
    }
    return wrap_foreign(numel(s) == 0 ? nullptr : reinterpret_cast<void*>(ptr), s, strides, d, Device::cpu(),
                        python_keep_alive(owner), "asarray", read_only);
  }, "ptr"_a, "shape"_a, "strides_bytes"_a, "dtype"_a, "owner"_a, "read_only"_a = false);
}

}  // namespace tessel::python
