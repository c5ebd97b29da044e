#pragma once
// INTERNAL, not part of tessel's API (tessel.hpp does not include it): the check of cuBLAS and
// cuBLASLt calls, for tessel's CUDA backend and for the benchmarks that call cuBLAS as the
// reference. Both libraries return cublasStatus_t: a failure becomes a CudaError (not fatal: the
// context stays usable) naming the op, the call, cuBLAS's status name and the place.
#if defined(TESSEL_HAVE_CUDA)
#include <cublas_api.h>

#include <string>

#include "tessel/core/error.hpp"

namespace tessel::detail {

inline void check_cublas(cublasStatus_t status, const char* op, const char* expr, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw CudaError(std::string(op) + ": " + expr + " failed: " + cublasGetStatusName(status) + " at " + file + ":" +
                        std::to_string(line),
                    static_cast<int>(status), false);
  }
}

}  // namespace tessel::detail

#define TESSEL_CUBLAS_CHECK(expr, op) ::tessel::detail::check_cublas((expr), (op), #expr, __FILE__, __LINE__)
#endif
