// Memory layer: allocator statistics, emptying the cache, pinned host memory.
#include "common.hpp"

namespace tessel::python {
namespace {

nb::dict stats_dict(const MemoryStats& s) {
  nb::dict d;
  d["allocated_bytes"] = s.allocated_bytes;
  d["requested_bytes"] = s.requested_bytes;
  d["allocated_peak"] = s.allocated_peak;
  d["reserved_bytes"] = s.reserved_bytes;
  d["reserved_peak"] = s.reserved_peak;
  d["active_allocations"] = s.active_allocations;
  d["allocation_count"] = s.allocation_count;
  d["free_count"] = s.free_count;
  d["cache_hits"] = s.cache_hits;
  d["cache_misses"] = s.cache_misses;
  d["raw_allocations"] = s.raw_allocations;
  d["raw_frees"] = s.raw_frees;
  d["segments"] = s.segments;
  d["oom_count"] = s.oom_count;
  d["cache_flushes"] = s.cache_flushes;
  d["inactive_split_bytes"] = s.inactive_split_bytes;
  d["largest_free_block"] = s.largest_free_block;
  d["fragmentation"] = s.fragmentation();
  return d;
}

int cuda_index(nb::handle device, const char* op) {
  const Device d = device.is_none() ? Device::cuda(cuda_available() ? current_device().index : 0)
                                    : *to_optional_device(device);
  if (!d.is_cuda()) throw tessel::DeviceError(std::string(op) + ": needs a CUDA device, got " + d.str());
  check_device_index(d.index, op);
  return d.index;
}

}  // namespace

void register_memory(nb::module_& m) {
  m.def("_memory_stats", [](nb::handle device) {
    return stats_dict(device_allocator(cuda_index(device, "memory_stats")).stats());
  }, "device"_a = nb::none());
  m.def("_host_memory_stats", [] { return stats_dict(host_memory_stats()); });
  m.def("_pinned_memory_stats", [] { return stats_dict(pinned_allocator().stats()); });
  m.def("_empty_cache", [](nb::handle device) {
    if (!cuda_available()) return;  // nothing cached without a device
    const int index = cuda_index(device, "empty_cache");
    nb::gil_scoped_release release;  // may synchronize to release blocks
    device_allocator(index).empty_cache();
  }, "device"_a = nb::none());
  m.def("_reset_peak_stats", [](nb::handle device) {
    device_allocator(cuda_index(device, "reset_peak_stats")).reset_peak_stats();
  }, "device"_a = nb::none());
  m.def("_set_memory_fraction", [](double fraction, nb::handle device) {
    device_allocator(cuda_index(device, "set_memory_fraction")).set_memory_fraction(fraction);
  }, "fraction"_a, "device"_a = nb::none());
  // A C-contiguous CPU array over page-locked memory from the pinned pool (needs CUDA).
  m.def("_pinned_empty", [](nb::handle shape, nb::handle dtype) {
    const Shape s = to_shape(shape);
    const DType d = to_dtype(dtype);
    return empty_pinned(s, d);
  }, "shape"_a, "dtype"_a);
}

}  // namespace tessel::python
