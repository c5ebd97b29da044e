// The handle sets, side streams and helpers of linalg_handles.hpp.
#include "backend/cuda/linalg_handles.hpp"

#include <fmt/format.h>

#include "backend/cuda/stream_cache.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/cublas_check.hpp"

namespace tessel::backend::cuda {
namespace {

const char* cusolver_status_name(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default: return "CUSOLVER_STATUS_<other>";
  }
}

auto* const g_handles = new StreamCache<Handles>();

// Keyed by the CUDA stream itself, not the tessel Stream object: every Stream adopting one
// handle (ts.Stream.from_handle per call, as tessel.torch's streams) shares one handle set. User
// space addresses stay below 2^56 on x86-64 and aarch64, so the device index fits the top byte; the
// legacy default stream (a null handle) is one per device.
std::uint64_t handles_key(const Stream& stream) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(stream.handle())) ^
         (static_cast<std::uint64_t>(stream.device().index) << 56);
}

}  // namespace

void check_cusolver(cusolverStatus_t status, const char* op, const char* expr, const char* file, int line) {
  if (status != CUSOLVER_STATUS_SUCCESS) {
    throw CudaError(fmt::format("{}: {} failed: {} ({}) at {}:{}", op, expr, cusolver_status_name(status),
                                static_cast<int>(status), file, line),
                    static_cast<int>(status), false);
  }
}

Handles& handles_for(const Stream& stream, const char* op) {
  const Device device = stream.device();
  return g_handles->get(handles_key(stream), [&] {
    require_cuda_library(CudaLibrary::cusolver, op);
    DeviceGuard guard(device);
    auto h = std::make_unique<Handles>(device.index);
    auto s = detail::cuda_stream(stream);
    TESSEL_CUSOLVER_CHECK(cusolverDnCreate(&h->solver), op);
    TESSEL_CUSOLVER_CHECK(cusolverDnSetStream(h->solver, s), op);
    TESSEL_CUSOLVER_CHECK(cusolverDnCreateParams(&h->params), op);
    TESSEL_CUBLAS_CHECK(cublasCreate(&h->blas), op);
    TESSEL_CUBLAS_CHECK(cublasSetStream(h->blas, s), op);
    return h;
  });
}

// ---- splitting a batched call over streams ----
// A side stream: non-blocking (no implicit synchronization with the legacy default stream, which
// the caller's stream may be; events order it), with the caller's priority. Side streams are
// never destroyed: the handle sets bound to them sit in g_handles, which release_stream_caches
// clears in no particular order, and a cuSOLVER/cuBLAS handle must not outlive its stream. A
// handle set makes at most kMaxLinalgStreams - 1 of them (the test programs' teardown drops the
// handle sets once); the workspace blocks they freed stay cached in their own pools.
Stream make_side_stream(const Stream& caller) {
  static auto* const kept = new std::vector<Stream>();
  static auto* const kept_mutex = new std::mutex();
  Stream s = Stream::create(caller.device(), caller.priority(), /*non_blocking=*/true);
  std::lock_guard<std::mutex> lock(*kept_mutex);
  kept->push_back(s);
  return s;
}

int batch_parts(const Call& c, std::int64_t batch, std::int64_t min_part) {
  const int want = config().linalg_streams;
  if (want <= 1) return 1;
  const std::int64_t parts = std::min<std::int64_t>(want, batch / min_part);
  if (parts <= 1) return 1;
  if (detail::thread_capture_stream() != 0 || c.stream.capturing()) return 1;
  return static_cast<int>(parts);
}

cudaDataType data_type(DType dtype) {
  switch (dtype) {
    case DType::float32: return CUDA_R_32F;
    case DType::float64: return CUDA_R_64F;
    case DType::complex64: return CUDA_C_32F;
    case DType::complex128: return CUDA_C_64F;
    default: throw DTypeError(fmt::format("linalg: cuSOLVER has no routine for {}", dtype_name(dtype)));
  }
}
cudaDataType real_type(DType dtype) { return data_type(to_real(dtype)); }

int to_int(std::int64_t v, const char* op) {
  if (v > INT_MAX) throw ValueError(fmt::format("{}: {} exceeds the 32-bit sizes of the batched routine", op, v));
  return static_cast<int>(v);
}

}  // namespace tessel::backend::cuda
