#pragma once
// Standalone stand-in for tessel's src/core/cuda_check.hpp, used only by the standalone device
// check beside it (throws tessel::CudaError without the rest of the library).
#include <cuda_runtime_api.h>
#include <string>
#include "tessel/core/error.hpp"
namespace tessel::detail {
inline void check_cuda(cudaError_t s, const char* op, const char* expr, const char* file, int line) {
  if (s != cudaSuccess) throw CudaError(std::string(op) + ": " + expr + ": " + cudaGetErrorString(s) + " at " + file + ":" + std::to_string(line), s, false);
}
inline void check_launch(cudaStream_t stream, const char* op, const char* file, int line) {
  check_cuda(cudaGetLastError(), op, "launch", file, line);
  (void)stream;
}
}
#define TESSEL_CUDA_CHECK(expr, op) ::tessel::detail::check_cuda((expr), (op), #expr, __FILE__, __LINE__)
#define TESSEL_CUDA_CHECK_LAUNCH(stream, op) ::tessel::detail::check_launch((stream), (op), __FILE__, __LINE__)
