// Interop: what every protocol shares (wrapping foreign memory, device checks, stream
// hand-over), zero-copy views of host memory (NumPy arrays, from tessel.asarray), and the
// registration of the protocols: DLPack (interop_dlpack.cpp), the DLPack C exchange API
// (interop_dlpack_exchange.cpp) and __cuda_array_interface__ (interop_cuda_array_interface.cpp).
#include <string>
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

void register_interop(nb::module_& m) {
  register_dlpack(m);
  register_dlpack_exchange(m);
  register_cuda_array_interface(m);
  m.def("_check_cuda_device", [](int index) { check_cuda_device(index, "from_dlpack"); });
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
