// Interop: what every protocol shares (wrapping foreign memory, device checks, stream
// hand-over), zero-copy views of host memory (NumPy arrays, from tessel.asarray), and the
// registration of the protocols: DLPack (interop_dlpack.cpp), the DLPack C exchange API
// (interop_dlpack_exchange.cpp) and __cuda_array_interface__ (interop_cuda_array_interface.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "interop.hpp"

namespace tessel::python {
namespace {

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

}  // namespace

void check_data_pointer(const void* data, const Shape& shape, const char* op) {
  if (data == nullptr && numel(shape) > 0) {
    throw tessel::ValueError(std::string(op) + ": null data pointer for shape " + shape_str(shape));
  }
}

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

Array wrap_foreign(void* data, const Shape& shape, const Strides& strides, DType dtype, Device device,
                   std::shared_ptr<void> keep_alive, const char* op, bool read_only) {
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
  auto buffer = Buffer::wrap(base, bytes, device, kind, std::move(keep_alive));
  return Array(std::make_shared<detail::Storage>(std::move(buffer), read_only), shape, strides,
               count == 0 ? 0 : -extent.lowest, dtype);
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

namespace {

// The tessel dtype of a buffer's struct-module format ("f", "<d", "Zf", "q", ...): one native
// little-endian item; nullopt for anything else.
std::optional<DType> buffer_format_dtype(const char* format, Py_ssize_t size) {
  if (format == nullptr) return DType::uint8;  // PEP 3118: no format means unsigned bytes
  std::string_view f(format);
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f.remove_prefix(1);
  if (f == "?") return DType::bool_;
  if (f == "e") return DType::float16;
  if (f == "f") return DType::float32;
  if (f == "d") return DType::float64;
  if (f == "Zf") return DType::complex64;
  if (f == "Zd") return DType::complex128;
  if (f.size() != 1) return std::nullopt;
  const bool is_signed = std::string_view("bhilq").find(f[0]) != std::string_view::npos;
  const bool is_unsigned = std::string_view("BHILQ").find(f[0]) != std::string_view::npos;
  if (!is_signed && !is_unsigned) return std::nullopt;
  switch (size) {
    case 1: return is_signed ? DType::int8 : DType::uint8;
    case 2: return is_signed ? DType::int16 : DType::uint16;
    case 4: return is_signed ? DType::int32 : DType::uint32;
    case 8: return is_signed ? DType::int64 : DType::uint64;
    default: return std::nullopt;
  }
}

}  // namespace

void register_interop(nb::module_& m) {
  register_dlpack(m);
  register_dlpack_exchange(m);
  register_cuda_array_interface(m);
  m.def("_check_cuda_device", [](int index) { check_cuda_device(index, "from_dlpack"); });
  m.def("_wrap_host_buffer", [](nb::handle obj) -> nb::object {
    // A zero-copy CPU view of obj's buffer (a NumPy array's), which keeps obj alive; a read-only
    // buffer gives a read-only array. None where tessel has no view of it: no buffer, a dtype or
    // byte order tessel lacks, a stride that is not whole elements, a misaligned first element.
    Py_buffer view;
    if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      return nb::none();
    }
    struct Release {
      Py_buffer* view;
      ~Release() { PyBuffer_Release(view); }
    } release{&view};
    const std::optional<DType> d = buffer_format_dtype(view.format, view.itemsize);
    if (!d || reinterpret_cast<std::uintptr_t>(view.buf) % static_cast<std::uintptr_t>(view.itemsize) != 0) return nb::none();
    Shape shape(view.shape, view.shape + view.ndim);
    Strides strides;
    for (int i = 0; i < view.ndim; ++i) {
      if (view.strides[i] % view.itemsize != 0) return nb::none();
      strides.push_back(view.strides[i] / view.itemsize);
    }
    void* data = numel(shape) == 0 ? nullptr : view.buf;
    return nb::cast(wrap_foreign(data, shape, strides, *d, Device::cpu(), python_keep_alive(obj), "asarray",
                                 view.readonly != 0));
  }, "obj"_a);
}

}  // namespace tessel::python
