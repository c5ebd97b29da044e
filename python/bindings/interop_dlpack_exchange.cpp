// The DLPack C exchange API (DLPack 1.2/1.3, dlpack_exchange.hpp): tensors handed over through C
// function tables instead of Python calls. tessel is a consumer (the fast path of ts.from_dlpack)
// and a producer (tessel.Array.__dlpack_c_exchange_api__, and ts.export_to into another library).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "interop.hpp"

namespace tessel::python {

using namespace dlpack;

const char* python_error_kind(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return "MemoryError";
  if (dynamic_cast<const tessel::DTypeError*>(&e)) return "TypeError";
  if (dynamic_cast<const tessel::ValueError*>(&e) || dynamic_cast<const tessel::ShapeError*>(&e)) return "ValueError";
  if (dynamic_cast<const tessel::OutOfMemory*>(&e)) return "MemoryError";
  return "RuntimeError";
}

namespace {

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
    set_error(error_ctx, python_error_kind(e), e.what());
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


}  // namespace

nb::object exchange_import_if_available(nb::handle x, nb::handle device, nb::handle copy) {
  if (!exchange_enabled.load(std::memory_order_relaxed)) return {};
  const DLPackExchangeAPI* api = exchange_api_of(Py_TYPE(x.ptr()));
  if (api == nullptr) return {};
  return exchange_import(api, x, device, copy);
}

void register_dlpack_exchange(nb::module_& m) {
  nb::class_<Array>& cls = array_class();
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
}

}  // namespace tessel::python
