// The one "tessel was built without CUDA" error (core/not_built.hpp).
#include "core/not_built.hpp"

#include "tessel/core/error.hpp"

namespace tessel::detail {

void throw_cuda_not_built(const std::string& what) { throw DeviceError(what + ": " + kCudaNotBuilt); }

}  // namespace tessel::detail
