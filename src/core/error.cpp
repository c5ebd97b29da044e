#include <string>

#include <fmt/format.h>

#include "core/cuda_check.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"

#if defined(TESSEL_HAVE_CUDA)
namespace tessel::detail {

bool is_sticky_error(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

void throw_cuda_error(cudaError_t status, const char* op, const char* expr, const char* file,
                      int line) {
  // Clear a non-sticky error so it does not resurface at the next unrelated call.
  if (!is_sticky_error(status)) (void)cudaGetLastError();
  const std::string where = fmt::format("{}: {} ({}): {} [{} at {}:{}]", op, cudaGetErrorName(status),
                                        static_cast<int>(status), cudaGetErrorString(status), expr,
                                        file, line);
  if (status == cudaErrorMemoryAllocation) throw OutOfMemory(where);
  if (status == cudaErrorStreamCaptureUnsupported || status == cudaErrorStreamCaptureInvalidated ||
      status == cudaErrorStreamCaptureImplicit || status == cudaErrorStreamCaptureIsolation) {
    throw CudaError(where + "; " + op + " cannot be captured in a CUDA graph (or the capture was already "
                               "invalidated by an earlier uncapturable call)",
                    static_cast<int>(status), false);
  }
  if (is_sticky_error(status)) {
    throw CudaError(where + "; this error is fatal to the CUDA context: no further GPU work can "
                            "run in this process, restart it",
                    static_cast<int>(status), true);
  }
  throw CudaError(where, static_cast<int>(status), false);
}

void check_launch(cudaStream_t stream, const char* op, const char* file, int line) {
  check_cuda(cudaGetLastError(), op, "kernel launch", file, line);
  if (config().sync_after_ops) {
    check_cuda(cudaStreamSynchronize(stream), op, "cudaStreamSynchronize (TESSEL_SYNC=1)", file, line);
  }
}

}  // namespace tessel::detail
#endif
