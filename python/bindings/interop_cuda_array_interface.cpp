// __cuda_array_interface__ v3: Array.__cuda_array_interface__ (export) and the import of objects
// that expose it (tessel.asarray). Ownership and streams: see interop.hpp.
#include <string>

#include "interop.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace tessel::python {
namespace {

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
                             a.is_read_only());
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

void register_cuda_array_interface(nb::module_& m) {
  array_class().def_prop_ro("__cuda_array_interface__", &cuda_array_interface);
  m.def("_from_cuda_array_interface", &cai_import, "obj"_a, "device"_a = nb::none(), "copy"_a = nb::none());
}

}  // namespace tessel::python
