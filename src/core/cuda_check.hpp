#pragma once
// Checking of CUDA runtime calls and kernel launches (internal). Only compiled with CUDA.
#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "tessel/core/stream.hpp"

namespace tessel::detail {

// Raises CudaError (fatal for sticky errors), or OutOfMemory for cudaErrorMemoryAllocation,
// with the op name, the failing expression and file:line.
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* op, const char* expr,
                                   const char* file, int line);

inline void check_cuda(cudaError_t status, const char* op, const char* expr, const char* file,
                       int line) {
  if (status != cudaSuccess) throw_cuda_error(status, op, expr, file, line);
}

// After a launch: checks the launch status, and with TESSEL_SYNC=1 synchronizes the stream
// and checks again so an asynchronous fault is reported at the op that caused it.
void check_launch(cudaStream_t stream, const char* op, const char* file, int line);

// The CUDA handle of a CUDA device's stream.
inline cudaStream_t cuda_stream(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

// True for errors that corrupt the context (illegal address, device assert, ...).
bool is_sticky_error(cudaError_t status);

}  // namespace tessel::detail

#define TESSEL_CUDA_CHECK(expr, op) ::tessel::detail::check_cuda((expr), (op), #expr, __FILE__, __LINE__)
#define TESSEL_CUDA_CHECK_LAUNCH(stream, op) ::tessel::detail::check_launch((stream), (op), __FILE__, __LINE__)
#endif
