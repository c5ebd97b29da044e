// CPU-only builds have no NVRTC: compiling raises DeviceError. (CUDA builds use
// backend/cuda/nvrtc_compiler.cpp.)
#if !defined(TESSEL_HAVE_CUDA)
#include "tessel/core/error.hpp"
#include "tessel/jit/compiler.hpp"

namespace tessel::jit {

bool nvrtc_available() { return false; }
std::string nvrtc_version() { return ""; }

CompileResult compile_to_cubin(const CompileRequest& request) {
  throw DeviceError("jit: kernel '" + request.name +
                    "': needs NVRTC, but tessel was built without CUDA (TESSEL_CUDA=OFF)");
}

}  // namespace tessel::jit
#endif
