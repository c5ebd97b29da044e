#pragma once
// The one "tessel was built without CUDA" error of every layer: the ops layer's backend stubs
// (backend/dispatch.cpp) and the CUDA paths of the other layers raise it in a build without CUDA.
#include <string>

namespace tessel::detail {

// The words of that error, also the reason the CUDA device and CUPTI give in such a build.
inline constexpr const char* kCudaNotBuilt = "tessel was built without CUDA";

// Throws DeviceError("<what>: tessel was built without CUDA").
[[noreturn]] void throw_cuda_not_built(const std::string& what);

}  // namespace tessel::detail
