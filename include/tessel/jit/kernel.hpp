#pragma once
// A loaded, launchable kernel: a handle into a CUDA library loaded from a cached CUBIN through
// the runtime's library API (no libcuda link). Handles are cheap to copy; loaded libraries live
// for the process (kernels are cached, and unloading at exit races the runtime's teardown).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/jit/compiler.hpp"

namespace tessel::jit {

struct CachedBinary;

struct Dim3 {
  unsigned int x = 1, y = 1, z = 1;
  Dim3() = default;
  Dim3(unsigned int x_, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}  // NOLINT
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  std::size_t shared_mem = 0;
  // A cooperative launch (cudaLaunchCooperativeKernel): every block resident at once, as a
  // grid-wide barrier needs; the launch fails when the grid does not fit.
  bool cooperative = false;
};

struct KernelAttributes {
  int max_threads_per_block = 0;
  int num_registers = 0;
  std::size_t static_shared_bytes = 0;
  std::size_t local_bytes = 0;
  std::size_t const_bytes = 0;
};

// The block and the grid cap of launch_config_fixed for one (kernel, block, waves): callers that
// launch a kernel repeatedly keep it, so a launch does arithmetic only (no lock, no lookup).
struct FixedLaunchShape {
  int block = 0;
  std::int64_t grid_cap = 0;
  LaunchConfig config(std::int64_t threads) const {
    const std::int64_t needed = threads > block ? (threads + block - 1) / block : 1;
    LaunchConfig c;
    c.block = Dim3(static_cast<unsigned int>(block));
    c.grid = Dim3(static_cast<unsigned int>(needed < grid_cap ? needed : grid_cap));
    return c;
  }
};

class Kernel {
 public:
  Kernel() = default;
  bool defined() const { return handle_ != nullptr; }
  const std::string& name() const { return name_; }
  Device device() const { return device_; }
  void* handle() const { return handle_; }  // cudaKernel_t
  // True when launches go through the driver's cuLaunchKernel (the kernel's CUfunction was found
  // at load); false: through the runtime's cudaLaunchKernel.
  bool launches_through_driver() const { return function_ != nullptr; }

  // args[i] points at the i-th parameter's value, as cudaLaunchKernel takes them. The stream must
  // belong to the kernel's device. Checked (TESSEL_CUDA_CHECK_LAUNCH) after the launch.
  void launch(const LaunchConfig& config, void** args, const Stream& stream) const;
  void launch(const LaunchConfig& config, const std::vector<void*>& args, const Stream& stream) const;

  KernelAttributes attributes() const;
  // Allows launches with up to `bytes` of dynamic shared memory (cudaFuncAttributeMaxDynamicSharedMemorySize,
  // needed above 48 KB), for every launch of this kernel on its device. Raises ValueError above
  // the device's opt-in limit per block.
  void set_max_dynamic_shared_memory(std::size_t bytes) const;
  // The block size with the highest occupancy (multiple of 32, <= max_block) and the number of
  // blocks resident per SM at that size.
  int occupancy_block_size(std::size_t shared_mem = 0, int max_block = 1024, int* blocks_per_sm = nullptr) const;
  // A 1-d launch over `work_items` (one per thread, grid-stride loops welcome): the occupancy block
  // size and a grid that covers the work, capped at `waves` full waves of resident blocks.
  // Blocks of `block` threads resident per SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor),
  // cached per (kernel, block, shared_mem): cheap enough for every launch.
  int max_active_blocks(int block, std::size_t shared_mem = 0) const;
  // A 1-d launch of `threads` threads in blocks of `block`, the grid capped at `waves` full waves
  // of resident blocks (the threads grid-stride beyond). `block` is clamped to the kernel's
  // maxThreadsPerBlock (the kernel must read blockDim, not assume `block`). No occupancy search:
  // the clamp and occupancy are cached per (kernel, block); per-launch cheap.
  LaunchConfig launch_config_fixed(std::int64_t threads, int block, int waves) const;
  // What launch_config_fixed computes for any thread count, for (block, waves).
  FixedLaunchShape fixed_launch_shape(int block, int waves) const;
  LaunchConfig launch_config_1d(std::int64_t work_items, std::size_t shared_mem = 0, int max_block = 1024,
                                int waves = 4) const;

 private:
  friend Kernel load_kernel(const CachedBinary& binary, const std::string& name, Device device);
  friend Kernel compiled_kernel(const void* entry, const std::string& name, Device device);
  void* handle_ = nullptr;
  void* function_ = nullptr;  // CUfunction in device_'s primary context; null: launch through the runtime
  std::string name_;
  Device device_;
};

// Compiles (or finds in the caches) and loads a kernel for `device` (its arch, unless the
// request gives one). Raises CompileError, or DeviceError for a CPU device / no CUDA.
Kernel get_kernel(const CompileRequest& request, Device device);
// Loads a cached binary (once per key per process) and returns its kernel handle for `device`.
Kernel load_kernel(const CachedBinary& binary, const std::string& name, Device device);
// A kernel compiled into the program by nvcc (`entry`: the address of its __global__ function),
// launched like a loaded one: no compile, no cache. Undefined (defined() false) when the program
// holds no image of it for `device`'s architecture, so the caller can fall back to get_kernel.
Kernel compiled_kernel(const void* entry, const std::string& name, Device device);

}  // namespace tessel::jit
