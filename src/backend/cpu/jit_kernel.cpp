// CPU-only builds cannot load or launch kernels. (CUDA builds use backend/cuda/jit_kernel.cpp.)
#if !defined(TESSEL_HAVE_CUDA)
#include "tessel/core/error.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::jit {
namespace {
[[noreturn]] void no_cuda(const std::string& name) {
  throw DeviceError("jit: kernel '" + name + "' needs a CUDA device; tessel was built without CUDA");
}
}  // namespace

Kernel get_kernel(const CompileRequest& request, Device) { no_cuda(request.name); }
Kernel load_kernel(const CachedBinary&, const std::string& name, Device) { no_cuda(name); }
void Kernel::launch(const LaunchConfig&, void**, const Stream&) const { no_cuda(name_); }
void Kernel::launch(const LaunchConfig&, const std::vector<void*>&, const Stream&) const { no_cuda(name_); }
KernelAttributes Kernel::attributes() const { no_cuda(name_); }
int Kernel::occupancy_block_size(std::size_t, int, int*) const { no_cuda(name_); }
LaunchConfig Kernel::launch_config_1d(std::int64_t, std::size_t, int, int) const { no_cuda(name_); }
int Kernel::max_active_blocks(int, std::size_t) const { no_cuda(name_); }
LaunchConfig Kernel::launch_config_fixed(std::int64_t, int, int) const { no_cuda(name_); }
FixedLaunchShape Kernel::fixed_launch_shape(int, int) const { no_cuda(name_); }

}  // namespace tessel::jit
#endif
