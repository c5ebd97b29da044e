#pragma once
// INTERNAL, not part of tessel's API (tessel.hpp does not include it): the check of cuBLAS and
// cuBLASLt calls, for tessel's CUDA backend and for the benchmarks that call cuBLAS as the
// reference. Both libraries return cublasStatus_t: a failure becomes a CudaError (not fatal: the
// context stays usable) naming the op, the call, cuBLAS's status name and the place.
//
// The status name comes from the cublasGetStatusName that the calling code sees: the backend's
// (backend/cuda/cuda_libraries.hpp, which opens cuBLAS on first use) or cuBLAS's own.
#if defined(TESSEL_HAVE_CUDA)
#include <cublas_api.h>

#include <string>

#include "tessel/core/error.hpp"

namespace tessel::detail {

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* status_name, const char* op,
                                            const char* expr, const char* file, int line) {
  throw CudaError(std::string(op) + ": " + expr + " failed: " + status_name + " at " + file + ":" +
                      std::to_string(line),
                  static_cast<int>(status), false);
}

}  // namespace tessel::detail

#define TESSEL_CUBLAS_CHECK(expr, op)                                                                       \
  do {                                                                                                      \
    const cublasStatus_t tessel_cublas_status = (expr);                                                     \
    if (tessel_cublas_status != CUBLAS_STATUS_SUCCESS) {                                                    \
      ::tessel::detail::throw_cublas_error(tessel_cublas_status, cublasGetStatusName(tessel_cublas_status), \
                                           (op), #expr, __FILE__, __LINE__);                                \
    }                                                                                                       \
  } while (false)
#endif
