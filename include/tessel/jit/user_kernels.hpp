#pragma once
// User kernels, compiled and cached like tessel's own:
//  - RawKernel: a CUDA source and the kernel to launch, with an explicit launch configuration;
//    NVRTC, so it needs a CUDA device (DeviceError on the CPU backend);
//  - ElementwiseKernel: CuPy-style "float32 x, float32 y" / "float32 z" params and a body
//    ("z = x * y + 1") run once per element, with a contiguous vectorized path and a strided path.
//    On a CUDA device it is compiled with NVRTC; on the CPU backend the same spec becomes a host
//    C++ loop (OpenMP over large launches) compiled by the host compiler (host_compiler.hpp).
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tessel/core/stream.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::jit {

// One kernel parameter by value: any trivially copyable value up to 64 bytes (scalars, device
// pointers, small structs). Arrays pass their data pointer (arg(array.data())).
class KernelArg {
 public:
  template <class T, std::enable_if_t<std::is_trivially_copyable_v<T>, int> = 0>
  KernelArg(const T& value) : size_(sizeof(T)) {  // NOLINT: implicit so {ptr, n, 2.0f} works
    static_assert(sizeof(T) <= sizeof(bytes_), "kernel argument larger than 64 bytes");
    static_assert(alignof(T) <= 16, "kernel argument alignment above 16");
    std::memcpy(bytes_, &value, sizeof(T));
  }
  const void* data() const { return bytes_; }
  std::size_t size() const { return size_; }

 private:
  alignas(16) unsigned char bytes_[64] = {};
  std::size_t size_;
};

class RawKernel {
 public:
  // `name`: an extern "C" kernel or a C++ name expression such as "scale<float>".
  RawKernel(std::string source, std::string name, std::vector<std::string> options = {});

  const std::string& source() const { return request_.source; }
  const std::string& name() const { return request_.name; }
  const std::vector<std::string>& options() const { return request_.options; }

  // Compiles (through the caches) and loads for a device. The loaded kernel is kept per device,
  // so repeated launches skip the cache lookup (which hashes the source); copies share it.
  Kernel kernel(Device device) const;

  // Launches on `stream` (default: the current device's current stream).
  void launch(Dim3 grid, Dim3 block, const std::vector<KernelArg>& args, std::size_t shared_mem = 0,
              const std::optional<Stream>& stream = std::nullopt) const;
  void operator()(Dim3 grid, Dim3 block, const std::vector<KernelArg>& args, std::size_t shared_mem = 0,
                  const std::optional<Stream>& stream = std::nullopt) const {
    launch(grid, block, args, shared_mem, stream);
  }

 private:
  struct Loaded;  // the kernel per device, filled on first use
  CompileRequest request_;
  std::shared_ptr<Loaded> loaded_;
};

// "float32 x, int64 n" -> operands (dtype names as NumPy spells them). ValueError for bad text.
std::vector<ElementwiseOperand> parse_elementwise_params(const std::string& params, bool outputs,
                                                         const std::string& kernel_name);

class ElementwiseKernel {
 public:
  ElementwiseKernel(const std::string& in_params, const std::string& out_params, std::string body,
                    std::string name = "elementwise_kernel", std::string preamble = "");

  const std::string& name() const { return spec_.name; }
  // The operands (inputs then outputs, as the launch takes them) and the body.
  const ElementwiseSpec& spec() const { return spec_; }
  // The generated source for a layout, for printing and tests.
  std::string source(ElementwiseLayout layout = ElementwiseLayout::contiguous, int rank = 1,
                     bool index32 = false) const;
  // The generated host C++ source the CPU backend compiles for a layout (self-contained: no
  // tessel header is included), for printing and tests.
  std::string host_source(ElementwiseLayout layout = ElementwiseLayout::contiguous, int rank = 1) const;

  // Runs over `shape`: args are the inputs then the outputs, array views with strides over
  // `shape` (0 on broadcast axes) or scalars (ElementwiseArg::value) for inputs. On a CUDA device
  // it launches on `stream`; on the CPU it runs before returning (the stream is ignored).
  // Repeated launches with the same scalar/array binding of the operands reuse the loaded kernel
  // (no source regeneration); copies of a kernel share those.
  void launch(const std::vector<std::int64_t>& shape, const std::vector<ElementwiseArg>& args, Device device,
              const std::optional<Stream>& stream = std::nullopt) const;
  // The same over `count` borrowed operands (see ElementwiseArgView): no copies of the strides.
  void launch(const std::vector<std::int64_t>& shape, const ElementwiseArgView* args, std::size_t count,
              Device device, const std::optional<Stream>& stream = std::nullopt) const;

 private:
  struct Launchers;  // one ElementwiseLauncher per scalar/array binding of the operands
  ElementwiseSpec spec_;
  std::shared_ptr<Launchers> launchers_;
};

}  // namespace tessel::jit
