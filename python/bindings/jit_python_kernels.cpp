// JIT layer: the launch path of kernels written in Python (tessel.kernel). A launch's argument
// types make a small key; the compiled kernel per (key, device) is kept here, so a launch with
// tessel arrays and numbers never calls Python: it packs the flattened parameters (an array is its
// data pointer, its shape, its strides in elements) on the stack and launches through
// jit::Kernel (CUDA) or jit::HostKernel (the CPU backend). Anything else (NumPy arrays, foreign
// arrays, debug mode) goes to the Python launcher, which converts and compiles, or to the launch's
// fallback where it has one (tessel.numba's launches: its device arrays' `_launch_array`, a tessel
// array, also take this path).
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common.hpp"
#include "tessel/jit/compiler.hpp"
#include "tessel/jit/host_compiler.hpp"
#include "tessel/jit/kernel.hpp"
#include "tessel/profile/checks.hpp"
#include "tessel/profile/range.hpp"

namespace tessel::python {
namespace {

// A buffer on the stack for small launches, on the heap beyond N.
template <class T, std::size_t N>
class StackBuffer {
 public:
  explicit StackBuffer(std::size_t size) : size_(size) {
    if (size > N) {
      heap_.resize(size);
      data_ = heap_.data();
    }
  }
  StackBuffer(const StackBuffer&) = delete;
  StackBuffer& operator=(const StackBuffer&) = delete;
  T& operator[](std::size_t i) { return data_[i]; }
  T* data() { return data_; }
  std::size_t size() const { return size_; }

 private:
  T inline_[N];
  std::vector<T> heap_;
  T* data_ = inline_;
  std::size_t size_;
};

// One argument's type: arrays (dtype, ndim, C-contiguous) and scalars (dtype) never collide.
std::uint32_t array_code(const Array& a) {
  return 0x10000u | (static_cast<std::uint32_t>(a.dtype()) << 8) | (static_cast<std::uint32_t>(a.ndim()) << 1) |
         (a.is_contiguous() ? 1u : 0u);
}
std::uint32_t scalar_code(DType d) { return 0x100u | static_cast<std::uint32_t>(d); }

struct LaunchKey {
  std::vector<std::uint32_t> codes;
  int device = -1;  // -1: the CPU
  bool operator==(const LaunchKey& o) const { return device == o.device && codes == o.codes; }
};
struct LaunchKeyHash {
  std::size_t operator()(const LaunchKey& k) const {
    std::size_t h = static_cast<std::size_t>(k.device + 1) * 0x9e3779b97f4a7c15ull;
    for (std::uint32_t c : k.codes) h = (h ^ c) * 0x100000001b3ull;
    return h;
  }
};

// What a key compiled to; `python_only`: this signature always takes the Python launcher.
struct Compiled {
  bool python_only = false;
  bool grid_sync = false;  // CUDA: a trailing parameter, the grid barrier's counters
  jit::Kernel cuda;
  jit::HostKernel host;
  std::string name;
};

class Launcher {
 public:
  explicit Launcher(nb::object kernel) : kernel_(std::move(kernel)) {
    name_ = nb::cast<std::string>(kernel_.attr("__name__"));
  }

  // The compiled entry for `key`, compiling through the Python kernel on a miss.
  std::shared_ptr<const Compiled> lookup(const LaunchKey& key, nb::handle args, Device device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = compiled_.find(key);
      if (it != compiled_.end()) return it->second;
    }
    // (target, source, symbol, options) or None for "always through Python"
    nb::object spec = kernel_.attr("_compile_entry")(args, device.str());
    auto entry = std::make_shared<Compiled>();
    entry->name = name_;
    if (spec.is_none()) {
      entry->python_only = true;
    } else {
      auto target = nb::cast<std::string>(spec[0]);
      auto source = nb::cast<std::string>(spec[1]);
      auto symbol = nb::cast<std::string>(spec[2]);
      auto options = nb::cast<std::vector<std::string>>(spec[3]);
      entry->grid_sync = nb::cast<bool>(spec[4]);
      nb::gil_scoped_release release;  // may compile
      if (target == "cuda") {
        jit::CompileRequest request;
        request.source = std::move(source);
        request.name = std::move(symbol);
        request.options = std::move(options);
        entry->cuda = jit::get_kernel(request, device);
      } else {
        entry->host = jit::get_host_kernel(jit::HostCompileRequest{std::move(source), std::move(symbol),
                                                                   std::move(options)});
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    return compiled_.emplace(key, std::move(entry)).first->second;
  }

  const nb::object& kernel() const { return kernel_; }
  const std::string& name() const { return name_; }

 private:
  nb::object kernel_;
  std::string name_;
  std::mutex mutex_;
  std::unordered_map<LaunchKey, std::shared_ptr<const Compiled>, LaunchKeyHash> compiled_;
};

// kernel[grid, block, stream, shared_bytes]: validated once by the Python side.
struct ConfiguredLaunch {
  nb::object launcher_object;  // keeps the launcher alive
  Launcher* launcher = nullptr;
  jit::LaunchConfig config;
  nb::object stream_object;  // as given (None: the current stream)
  nb::object python_config;  // (grid, block, stream, shared) for the Python launcher
  nb::object fallback;       // None, or what takes the launches this path does not
};

// Bytes of one scalar parameter; false when h is not a number this path packs.
bool pack_scalar(nb::handle h, std::uint32_t& code, unsigned char* out, std::size_t& size) {
  PyObject* o = h.ptr();
  if (PyFloat_CheckExact(o)) {
    const double v = PyFloat_AS_DOUBLE(o);
    std::memcpy(out, &v, 8);
    size = 8;
    code = scalar_code(DType::float64);
    return true;
  }
  if (PyBool_Check(o)) {
    out[0] = o == Py_True ? 1 : 0;
    size = 1;
    code = scalar_code(DType::bool_);
    return true;
  }
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) return false;  // the Python path reports it
    std::memcpy(out, &v, 8);
    size = 8;
    code = scalar_code(DType::int64);
    return true;
  }
  if (PyComplex_CheckExact(o)) {
    const double v[2] = {PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)};
    std::memcpy(out, v, 16);
    size = 16;
    code = scalar_code(DType::complex128);
    return true;
  }
  if (const std::optional<DType> d = numpy_scalar_dtype(h)) {
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) != 0) {
      PyErr_Clear();
      return false;
    }
    const bool fits = view.len == static_cast<Py_ssize_t>(itemsize(*d)) && view.len <= 16;
    if (fits) std::memcpy(out, view.buf, static_cast<std::size_t>(view.len));
    size = static_cast<std::size_t>(view.len);
    PyBuffer_Release(&view);
    code = scalar_code(*d);
    return fits;
  }
  return false;
}

nb::object launch_python(const ConfiguredLaunch& c, nb::args args) {
  if (!c.fallback.is_none()) return c.fallback(*args);
  return c.launcher->kernel().attr("_launch")(c.python_config[0], c.python_config[1], c.python_config[2],
                                             c.python_config[3], args);
}

nb::object launch(const ConfiguredLaunch& c, nb::args args) {
  const std::size_t n = args.size();
  // Offsets of each argument's packed bytes: an array takes 8 (data) + 16 per axis.
  struct Slot {
    const Array* array;
    std::size_t offset;
    std::size_t size;
  };
  StackBuffer<Slot, 16> slots(n);
  StackBuffer<unsigned char, 512> bytes(n * 16 + 8 * 64 + 16);
  LaunchKey key;
  key.codes.resize(n);
  std::size_t used = 0, params = 0;
  std::optional<Device> device;
  // tessel.numba's device arrays: the tessel array in `_launch_array` (kept alive by the wrapper,
  // which args holds), or None for those the fallback converts.
  static PyObject* const launch_array_name = PyUnicode_InternFromString("_launch_array");
  for (std::size_t i = 0; i < n; ++i) {
    nb::handle h = args[i];
    if (!is_array(h)) {
      const std::size_t at = (used + 15) & ~std::size_t(15);
      if (at + 16 > bytes.size()) return launch_python(c, args);
      std::size_t size = 0;
      if (pack_scalar(h, key.codes[i], bytes.data() + at, size)) {
        slots[i] = {nullptr, at, size};
        used = at + 16;
        params += 1;
        continue;
      }
      if (c.fallback.is_none()) return launch_python(c, args);
      PyObject* inner = PyObject_GetAttr(h.ptr(), launch_array_name);
      if (!inner) {
        PyErr_Clear();
        return launch_python(c, args);
      }
      h = nb::handle(inner);
      Py_DECREF(inner);
      if (!is_array(h)) return launch_python(c, args);
    }
    const Array& a = as_array(h);
    if (device && a.device() != *device) return launch_python(c, args);  // the Python path names them
    device = a.device();
    key.codes[i] = array_code(a);
    slots[i] = {&a, used, 8 + 16 * static_cast<std::size_t>(a.ndim())};
    used += slots[i].size;
    params += 1 + 2 * static_cast<std::size_t>(a.ndim());
  }
  if (used > bytes.size() || params > 1024) return launch_python(c, args);
  if (!device && !c.fallback.is_none()) return launch_python(c, args);  // numbers only: the fallback picks the device
  const Device dev = device ? *device : (cuda_available() ? current_device() : Device::cpu());
  key.device = dev.is_cuda() ? dev.index : -1;
  const std::shared_ptr<const Compiled> compiled = c.launcher->lookup(key, args, dev);
  if (compiled->python_only || (profile::checks() & profile::check_bounds)) return launch_python(c, args);
  // Pack: data pointer, shape, strides (elements) per array; the value per scalar.
  StackBuffer<void*, 64> pointers(params + 1);
  std::size_t p = 0;
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char* at = bytes.data() + slots[i].offset;
    if (const Array* a = slots[i].array) {
      void* data = const_cast<void*>(a->data());
      std::memcpy(at, &data, 8);
      pointers[p++] = at;
      const int nd = static_cast<int>(a->ndim());
      for (int d = 0; d < nd; ++d) {
        const std::int64_t s = a->shape()[static_cast<std::size_t>(d)];
        std::memcpy(at + 8 + 8 * d, &s, 8);
        pointers[p++] = at + 8 + 8 * d;
      }
      for (int d = 0; d < nd; ++d) {
        const std::int64_t s = a->strides()[static_cast<std::size_t>(d)];
        std::memcpy(at + 8 + 8 * (nd + d), &s, 8);
        pointers[p++] = at + 8 + 8 * (nd + d);
      }
    } else {
      pointers[p++] = at;
    }
  }
  if (dev.is_cuda()) {
    const std::optional<Stream> given = to_optional_stream(c.stream_object, dev);
    const Stream stream = given ? *given : current_stream(dev);
    for (std::size_t i = 0; i < n; ++i) {
      if (slots[i].array && slots[i].array->storage()) slots[i].array->storage()->wait_on_stream(stream);
    }
    TESSEL_RANGE(compiled->name.c_str(), "kernel", stream);
    // above 48 KiB a kernel must opt in; ValueError beyond the device's limit
    if (c.config.shared_mem > 48 * 1024) compiled->cuda.set_max_dynamic_shared_memory(c.config.shared_mem);
    Array barrier;
    void* barrier_data = nullptr;
    if (compiled->grid_sync) {
      // every block must be resident at once, or the barrier would wait for blocks never started
      const jit::Dim3 g = c.config.grid, b = c.config.block;
      const long long blocks = static_cast<long long>(g.x) * g.y * g.z;
      const int threads = static_cast<int>(b.x * b.y * b.z);
      const long long fit = static_cast<long long>(compiled->cuda.max_active_blocks(threads, c.config.shared_mem)) *
                            device_properties(dev.index).multiprocessors;
      if (blocks > fit) {
        throw tessel::ValueError("kernel '" + compiled->name + "': a grid-synchronizing launch of " +
                                 std::to_string(blocks) + " blocks does not fit on " + dev.str() + " at once (at most " +
                                 std::to_string(fit) + " blocks of " + std::to_string(threads) + " threads)");
      }
      barrier = zeros({2}, DType::uint32, dev, stream);
      barrier_data = const_cast<void*>(barrier.data());
      pointers[p++] = &barrier_data;
    }
    jit::LaunchConfig config = c.config;
    config.cooperative = compiled->grid_sync;  // the barrier needs every block resident
    compiled->cuda.launch(config, pointers.data(), stream);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      if (slots[i].array && slots[i].array->storage()) slots[i].array->storage()->wait_on_stream(Stream::cpu());
    }
    TESSEL_RANGE(compiled->name.c_str(), "kernel", Stream::cpu());
    nb::gil_scoped_release release;
    compiled->host.launch(c.config, pointers.data());
  }
  return nb::none();
}

}  // namespace

void register_python_kernels(nb::module_& m) {
  nb::class_<Launcher>(m, "_KernelLauncher", "The launch path of one tessel.kernel.Kernel (internal).")
      .def("__init__", [](Launcher* self, nb::object kernel) { new (self) Launcher(std::move(kernel)); });
  nb::class_<ConfiguredLaunch>(m, "_ConfiguredLaunch", "kernel[grid, block, stream, shared_bytes] (internal).")
      .def("__call__", &launch)
      // tried only when the call has keywords (the overload above takes none): kernels, as Numba's,
      // take their arguments by position
      .def("__call__", [](const ConfiguredLaunch& c, nb::args, nb::kwargs kwargs) -> nb::object {
        const std::string names = nb::cast<std::string>(nb::str(", ").attr("join")(kwargs.attr("keys")()));
        throw nb::type_error(("kernel '" + nb::cast<std::string>(c.launcher->kernel().attr("__name__")) +
                              "': a launch takes its arguments by position, got the keyword argument(s) " + names)
                                 .c_str());
      });
  m.def("_nvrtc_available", &jit::nvrtc_available, "Whether this build compiles CUDA kernels (NVRTC).");
  m.def("_compile_ptx", [](std::string source, std::string name, std::vector<std::string> options, std::string arch) {
    jit::CompileRequest request;
    request.source = std::move(source);
    request.name = std::move(name);
    request.options = std::move(options);
    request.arch = arch.empty() ? (cuda_available() ? jit::device_arch(current_device().index) : "sm_90") : arch;
    nb::gil_scoped_release release;
    return jit::compile_to_ptx(request);
  }, "source"_a, "name"_a, "options"_a, "arch"_a = "",
        "PTX of a kernel source for an architecture (default: the current device's, else sm_90).");
  // The attributes and occupancy of a kernel as launches load it (the same compile cache):
  // tessel.numba's compiled-kernel attributes.
  auto cuda_kernel = [](std::string source, std::string name, std::vector<std::string> options, int device_index) {
    jit::CompileRequest request;
    request.source = std::move(source);
    request.name = std::move(name);
    request.options = std::move(options);
    nb::gil_scoped_release release;  // may compile
    return jit::get_kernel(request, Device::cuda(device_index));
  };
  m.def("_cuda_kernel_attributes", [cuda_kernel](std::string source, std::string name, std::vector<std::string> options,
                                                 int device_index) {
    const jit::KernelAttributes a = cuda_kernel(std::move(source), std::move(name), std::move(options), device_index)
                                        .attributes();
    return nb::make_tuple(a.max_threads_per_block, a.static_shared_bytes, a.const_bytes, a.local_bytes,
                          a.num_registers);
  }, "source"_a, "name"_a, "options"_a, "device_index"_a,
        "(max threads per block, static shared bytes, constant bytes, local bytes per thread, registers).");
  m.def("_cuda_kernel_active_blocks", [cuda_kernel](std::string source, std::string name,
                                                    std::vector<std::string> options, int device_index, int threads,
                                                    std::size_t dynamic_shared) {
    return cuda_kernel(std::move(source), std::move(name), std::move(options), device_index)
        .max_active_blocks(threads, dynamic_shared);
  }, "source"_a, "name"_a, "options"_a, "device_index"_a, "threads"_a, "dynamic_shared"_a,
        "Blocks of `threads` threads resident at once on one multiprocessor.");
  m.def("_configure_launch", [](nb::object launcher, std::vector<unsigned int> grid, std::vector<unsigned int> block,
                                nb::object stream, std::size_t shared, nb::object fallback) {
    if (grid.size() != 3 || block.size() != 3) throw nb::value_error("_configure_launch: grid and block of 3 ints");
    ConfiguredLaunch c;
    c.launcher = nb::cast<Launcher*>(launcher);
    c.launcher_object = launcher;
    c.config.grid = jit::Dim3(grid[0], grid[1], grid[2]);
    c.config.block = jit::Dim3(block[0], block[1], block[2]);
    c.config.shared_mem = shared;
    c.stream_object = stream;
    c.fallback = std::move(fallback);
    c.python_config = nb::make_tuple(nb::make_tuple(grid[0], grid[1], grid[2]),
                                     nb::make_tuple(block[0], block[1], block[2]), stream, shared);
    return c;
  }, "launcher"_a, "grid"_a, "block"_a, "stream"_a.none(), "shared"_a, "fallback"_a.none() = nb::none());
}

}  // namespace tessel::python
