#include "tessel/core/version.hpp"

#include "build_info.hpp"

namespace tessel {

const char* version() { return TESSEL_VERSION_STRING; }

BuildInfo build_info() {
  BuildInfo info;
  info.version = TESSEL_VERSION_STRING;
  info.build_type = TESSEL_BUILD_TYPE;
#if defined(TESSEL_HAVE_CUDA)
  info.cuda = true;
  info.cuda_architectures = TESSEL_BUILD_CUDA_ARCHITECTURES;
  info.cuda_compiler = TESSEL_BUILD_CUDA_COMPILER;
#endif
  info.cxx_compiler = TESSEL_BUILD_CXX_COMPILER;
#if defined(TESSEL_HAVE_NVTX)
  info.nvtx = true;
#endif
  return info;
}

}  // namespace tessel
