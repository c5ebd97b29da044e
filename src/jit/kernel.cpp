// Loading CUBINs through the CUDA runtime's library API (cudaLibraryLoadData, cudaLibraryGetKernel).
// Library and kernel handles are context-independent, so one load serves every device of the arch.
// Launches go through the driver's cuLaunchKernel with the kernel's CUfunction in the device's
// primary context (looked up once per Kernel, at load), which costs less host time per launch than
// cudaLaunchKernel with the kernel handle (timed on the H100 in interleaved rounds). tessel does not
// link libcuda: the two entry points come from cudaGetDriverEntryPointByVersion.
#if defined(TESSEL_HAVE_CUDA)
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "core/cuda_check.hpp"
#include "tessel/core/config.hpp"
#include "core/not_built.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/jit/kernel.hpp"
#include "tessel/jit/kernel_cache.hpp"

namespace tessel::jit {
namespace {

struct Loaded {
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
};

// Loaded kernels by cache key; never unloaded (see kernel.hpp).
std::mutex loaded_mutex;
std::unordered_map<Hash128, Loaded, Hash128Hasher>& loaded_kernels() {
  static auto* map = new std::unordered_map<Hash128, Loaded, Hash128Hasher>();
  return *map;
}

Loaded load(const CachedBinary& binary) {
  std::lock_guard<std::mutex> lock(loaded_mutex);
  auto& map = loaded_kernels();
  auto it = map.find(binary.key);
  if (it != map.end()) return it->second;
  Loaded l;
  TESSEL_CUDA_CHECK(cudaLibraryLoadData(&l.library, binary.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                    "jit: cudaLibraryLoadData");
  const cudaError_t status = cudaLibraryGetKernel(&l.kernel, l.library, binary.lowered_name.c_str());
  if (status != cudaSuccess) {
    cudaLibraryUnload(l.library);  // best effort; the lookup error is the one to report
    TESSEL_CUDA_CHECK(status, ("jit: cudaLibraryGetKernel '" + binary.lowered_name + "'").c_str());
  }
  map.emplace(binary.key, l);
  return l;
}

const void* func(void* handle) { return handle; }

using KernelGetFunctionFn = CUresult (*)(CUfunction*, CUkernel);
using LaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void**, void**);
struct DriverLaunch {
  KernelGetFunctionFn get_function = nullptr;
  LaunchKernelFn launch = nullptr;
};
// Null members when the driver does not offer them: launches then use the runtime.
const DriverLaunch& driver_launch() {
  static const DriverLaunch d = [] {
    DriverLaunch r;
    void* get_function = nullptr;
    void* launch = nullptr;
    cudaDriverEntryPointQueryResult q1{}, q2{};
    if (cudaGetDriverEntryPointByVersion("cuKernelGetFunction", &get_function, 12000, cudaEnableDefault, &q1) ==
            cudaSuccess &&
        cudaGetDriverEntryPointByVersion("cuLaunchKernel", &launch, 12000, cudaEnableDefault, &q2) == cudaSuccess &&
        q1 == cudaDriverEntryPointSuccess && q2 == cudaDriverEntryPointSuccess) {
      r.get_function = reinterpret_cast<KernelGetFunctionFn>(get_function);
      r.launch = reinterpret_cast<LaunchKernelFn>(launch);
    }
    (void)cudaGetLastError();
    return r;
  }();
  return d;
}

bool config_sync_after_ops_cached() { return config().sync_after_ops; }

struct OccupancyKey {
  void* handle;
  int device;
  int block;
  std::size_t shared_mem;
  bool operator==(const OccupancyKey& o) const {
    return handle == o.handle && device == o.device && block == o.block && shared_mem == o.shared_mem;
  }
};
struct OccupancyKeyHash {
  std::size_t operator()(const OccupancyKey& k) const {
    return std::hash<void*>{}(k.handle) ^ (static_cast<std::size_t>(k.block) * 1000003u) ^
           (static_cast<std::size_t>(k.device) << 20) ^ (k.shared_mem * 31u);
  }
};
std::mutex occupancy_mutex;
std::unordered_map<OccupancyKey, int, OccupancyKeyHash>& occupancy_cache() {
  static auto* map = new std::unordered_map<OccupancyKey, int, OccupancyKeyHash>();
  return *map;
}

}  // namespace

Kernel get_kernel(const CompileRequest& request, Device device) {
  if (!device.is_cuda() || !cuda_available()) {
    throw DeviceError("jit: kernel '" + request.name + "' needs a CUDA device; " +
                      (device.is_cuda() ? cuda_unavailable_reason() : "got " + device.str()));
  }
  check_device_index(device.index, "jit::get_kernel");
  CompileRequest req = request;
  if (req.arch.empty()) req.arch = device_arch(device.index);
  return load_kernel(*KernelCache::global().get(req), request.name, device);
}

Kernel load_kernel(const CachedBinary& binary, const std::string& name, Device device) {
  if (!device.is_cuda() || !cuda_available()) {
    throw DeviceError("jit: kernel '" + name + "' needs a CUDA device; " +
                      (device.is_cuda() ? cuda_unavailable_reason() : "got " + device.str()));
  }
  DeviceGuard guard(device);
  const Loaded l = load(binary);
  Kernel k;
  k.handle_ = l.kernel;
  k.name_ = name;
  k.device_ = device;
  // The CUfunction in the device's primary context. cudaLibraryLoadData needs no context, so
  // neither may exist yet: cudaFuncGetAttributes initializes the context and loads the kernel
  // into it (module loading is lazy by default). It is also safe inside a stream capture, where a
  // first use may load a kernel. Without a function handle the kernel launches through the runtime.
  const DriverLaunch& driver = driver_launch();
  if (driver.get_function) {
    cudaFuncAttributes attributes{};
    CUfunction function = nullptr;
    if (cudaFuncGetAttributes(&attributes, func(l.kernel)) != cudaSuccess) {
      (void)cudaGetLastError();  // the runtime path remains; not this load's error
    } else if (driver.get_function(&function, static_cast<CUkernel>(static_cast<void*>(l.kernel))) == CUDA_SUCCESS) {
      k.function_ = function;
    }
  }
  return k;
}

Kernel compiled_kernel(const void* entry, const std::string& name, Device device) {
  if (!device.is_cuda() || !cuda_available()) {
    throw DeviceError("jit: kernel '" + name + "' needs a CUDA device; " +
                      (device.is_cuda() ? cuda_unavailable_reason() : "got " + device.str()));
  }
  DeviceGuard guard(device);
  cudaKernel_t kernel = nullptr;
  cudaFuncAttributes attributes{};
  // cudaFuncGetAttributes fails (cudaErrorInvalidDeviceFunction / NoKernelImageForDevice) where
  // the program has no image for this device: the caller compiles instead.
  if (cudaGetKernel(&kernel, entry) != cudaSuccess || cudaFuncGetAttributes(&attributes, func(kernel)) != cudaSuccess) {
    (void)cudaGetLastError();
    return Kernel();
  }
  Kernel k;
  k.handle_ = kernel;
  k.name_ = name;
  k.device_ = device;
  const DriverLaunch& driver = driver_launch();
  CUfunction function = nullptr;
  if (driver.get_function &&
      driver.get_function(&function, static_cast<CUkernel>(static_cast<void*>(kernel))) == CUDA_SUCCESS) {
    k.function_ = function;
  }
  return k;
}

void Kernel::launch(const LaunchConfig& config, void** args, const Stream& stream) const {
  if (!defined()) throw ValueError("jit: launch of an undefined Kernel");
  if (stream.device() != device_) {
    throw DeviceError("jit: kernel '" + name_ + "' is for " + device_.str() + " but the stream is on " +
                      stream.device().str());
  }
  DeviceGuard guard(device_);
  const dim3 grid(config.grid.x, config.grid.y, config.grid.z);
  const dim3 block(config.block.x, config.block.y, config.block.z);
  auto* s = detail::cuda_stream(stream);
  // A cooperative launch (a grid barrier) goes through the runtime; any other tries the driver
  // first, and a failed driver launch is repeated through the runtime, whose error code the check
  // reports.
  cudaError_t status = cudaSuccess;
  if (config.cooperative) {
    status = cudaLaunchCooperativeKernel(func(handle_), grid, block, args, config.shared_mem, s);
  } else if (function_ == nullptr ||
             driver_launch().launch(static_cast<CUfunction>(function_), grid.x, grid.y, grid.z, block.x, block.y,
                                    block.z, static_cast<unsigned>(config.shared_mem), static_cast<CUstream>(s), args,
                                    nullptr) != CUDA_SUCCESS) {
    status = cudaLaunchKernel(func(handle_), grid, block, args, config.shared_mem, s);
  }
  // The op name is built only on failure: a string per launch is measurable host overhead.
  if (status != cudaSuccess) {
    const std::string op = "jit: launch '" + name_ + "'";
    TESSEL_CUDA_CHECK(status, op.c_str());
  }
  // The launch's status is reported above (a sticky error from earlier work fails the launch
  // itself), so only the debug mode's synchronization is left to check.
  if (config_sync_after_ops_cached()) {
    const std::string op = "jit: launch '" + name_ + "'";
    TESSEL_CUDA_CHECK_LAUNCH(s, op.c_str());
  }
}

void Kernel::launch(const LaunchConfig& config, const std::vector<void*>& args, const Stream& stream) const {
  launch(config, const_cast<void**>(args.data()), stream);
}

KernelAttributes Kernel::attributes() const {
  DeviceGuard guard(device_);
  cudaFuncAttributes a{};
  TESSEL_CUDA_CHECK(cudaFuncGetAttributes(&a, func(handle_)), "jit: cudaFuncGetAttributes");
  KernelAttributes out;
  out.max_threads_per_block = a.maxThreadsPerBlock;
  out.num_registers = a.numRegs;
  out.static_shared_bytes = a.sharedSizeBytes;
  out.local_bytes = a.localSizeBytes;
  out.const_bytes = a.constSizeBytes;
  return out;
}

void Kernel::set_max_dynamic_shared_memory(std::size_t bytes) const {
  const std::size_t limit = device_properties(device_.index).shared_memory_per_block_optin;
  if (bytes > limit) {
    throw ValueError("jit: kernel '" + name_ + "' asks for " + std::to_string(bytes) +
                     " bytes of dynamic shared memory; " + device_.str() + " allows " + std::to_string(limit) +
                     " per block");
  }
  DeviceGuard guard(device_);
  TESSEL_CUDA_CHECK(cudaFuncSetAttribute(func(handle_), cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
                    "jit: cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

int Kernel::occupancy_block_size(std::size_t shared_mem, int max_block, int* blocks_per_sm) const {
  DeviceGuard guard(device_);
  const KernelAttributes attr = attributes();
  const int limit = std::max(32, std::min(max_block, attr.max_threads_per_block));
  // Most resident threads per SM wins; ties go to the smaller block (more blocks, finer tail).
  int best_block = 32, best_blocks = 0, best_threads = -1;
  for (int block = 32; block <= limit; block += 32) {
    int blocks = 0;
    TESSEL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, func(handle_), block, shared_mem),
                      "jit: cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (blocks * block > best_threads) {
      best_threads = blocks * block;
      best_block = block;
      best_blocks = blocks;
    }
  }
  if (blocks_per_sm) *blocks_per_sm = best_blocks;
  return best_block;
}

int Kernel::max_active_blocks(int block, std::size_t shared_mem) const {
  const OccupancyKey key{handle_, device_.index, block, shared_mem};
  {
    std::lock_guard<std::mutex> lock(occupancy_mutex);
    auto it = occupancy_cache().find(key);
    if (it != occupancy_cache().end()) return it->second;
  }
  DeviceGuard guard(device_);
  int blocks = 0;
  TESSEL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, func(handle_), block, shared_mem),
                    "jit: cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (blocks < 1) {
    throw ValueError("jit: kernel '" + name_ + "' cannot run blocks of " + std::to_string(block) + " threads (" +
                     std::to_string(attributes().num_registers) + " registers per thread)");
  }
  std::lock_guard<std::mutex> lock(occupancy_mutex);
  occupancy_cache().emplace(key, blocks);
  return blocks;
}

namespace {
// launch_config_fixed's per-(kernel, device, requested block) facts: the block it can run (the
// request clamped to the kernel's maxThreadsPerBlock, which registers can push under 1024) and
// the blocks of that size resident per SM.
struct FixedShape {
  int block;
  int blocks_per_sm;
};
std::mutex fixed_shape_mutex;
std::unordered_map<OccupancyKey, FixedShape, OccupancyKeyHash>& fixed_shape_cache() {
  static auto* map = new std::unordered_map<OccupancyKey, FixedShape, OccupancyKeyHash>();
  return *map;
}
}  // namespace

LaunchConfig Kernel::launch_config_fixed(std::int64_t threads, int block, int waves) const {
  return fixed_launch_shape(block, waves).config(threads);
}

FixedLaunchShape Kernel::fixed_launch_shape(int block, int waves) const {
  if (block < 1) throw ValueError("jit: kernel '" + name_ + "': launch block " + std::to_string(block) + " < 1");
  const OccupancyKey key{handle_, device_.index, block, 0};
  FixedShape shape{0, 0};
  {
    std::lock_guard<std::mutex> lock(fixed_shape_mutex);
    auto it = fixed_shape_cache().find(key);
    if (it != fixed_shape_cache().end()) shape = it->second;
  }
  if (shape.block == 0) {
    // A block over the kernel's limit would fail at launch (cudaErrorInvalidValue /
    // too many resources requested): run the largest block it allows instead.
    shape.block = std::min(block, std::max(1, attributes().max_threads_per_block));
    shape.blocks_per_sm = max_active_blocks(shape.block);
    std::lock_guard<std::mutex> lock(fixed_shape_mutex);
    fixed_shape_cache().emplace(key, shape);
  }
  const std::int64_t sms = device_properties(device_.index).multiprocessors;
  FixedLaunchShape fixed;
  fixed.block = shape.block;
  fixed.grid_cap = std::max<std::int64_t>(1, sms * shape.blocks_per_sm * std::max(1, waves));
  return fixed;
}

LaunchConfig Kernel::launch_config_1d(std::int64_t work_items, std::size_t shared_mem, int max_block,
                                      int waves) const {
  int blocks_per_sm = 0;
  const int block = occupancy_block_size(shared_mem, max_block, &blocks_per_sm);
  const std::int64_t sms = device_properties(device_.index).multiprocessors;
  const std::int64_t needed = std::max<std::int64_t>(1, (work_items + block - 1) / block);
  const std::int64_t cap = std::max<std::int64_t>(1, sms * std::max(1, blocks_per_sm) * std::max(1, waves));
  LaunchConfig c;
  c.block = Dim3(static_cast<unsigned int>(block));
  c.grid = Dim3(static_cast<unsigned int>(std::min(needed, cap)));
  c.shared_mem = shared_mem;
  return c;
}

}  // namespace tessel::jit

#else  // CPU-only builds: no NVRTC, no kernels to load or launch.
#include "core/not_built.hpp"
#include "tessel/core/error.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::jit {
namespace {
[[noreturn]] void no_cuda(const std::string& name) {
  ::tessel::detail::throw_cuda_not_built("jit: kernel '" + name + "' needs a CUDA device");
}
}  // namespace

Kernel get_kernel(const CompileRequest& request, Device) { no_cuda(request.name); }
Kernel load_kernel(const CachedBinary&, const std::string& name, Device) { no_cuda(name); }
Kernel compiled_kernel(const void*, const std::string& name, Device) { no_cuda(name); }
void Kernel::launch(const LaunchConfig&, void**, const Stream&) const { no_cuda(name_); }
void Kernel::launch(const LaunchConfig&, const std::vector<void*>&, const Stream&) const { no_cuda(name_); }
KernelAttributes Kernel::attributes() const { no_cuda(name_); }
void Kernel::set_max_dynamic_shared_memory(std::size_t) const { no_cuda(name_); }
int Kernel::occupancy_block_size(std::size_t, int, int*) const { no_cuda(name_); }
LaunchConfig Kernel::launch_config_1d(std::int64_t, std::size_t, int, int) const { no_cuda(name_); }
int Kernel::max_active_blocks(int, std::size_t) const { no_cuda(name_); }
LaunchConfig Kernel::launch_config_fixed(std::int64_t, int, int) const { no_cuda(name_); }
FixedLaunchShape Kernel::fixed_launch_shape(int, int) const { no_cuda(name_); }

}  // namespace tessel::jit
#endif
