// CUDA linear algebra: tessel's own batched small-matrix kernels (linalg_small.cpp) where their
// rows of tuning/linalg_routes.hpp pick them, else the libraries' batched entry points
// (cusolverDn<t>potrfBatched, cuBLAS <t>getrfBatched / <t>getrsBatched / <t>geqrfBatched with
// tessel's batched Q, cusolverDn<t>syevjBatched, cusolverDnXsyevBatched, cusolverDn<t>gesvdjBatched)
// or cuSOLVER's 64-bit cusolverDnX* API one matrix per call with the batch split over streams,
// as that file's kLibraryRoutes says. One large matrix: Cholesky always runs potrf LOWER (the fast one) and
// SVD picks its driver from the SVD table below (QR first for tall matrices, then Jacobi). Device workspaces come from the caching allocator (stream-ordered
// frees); handles come from a per-(device, stream) cache, so a call never rebinds a handle
// another stream is using. A batched call may be split over the caller's stream and side streams
// (TESSEL_LINALG_STREAMS, in_parts below), joined back with events. Nothing here synchronizes:
// info values stay on the device.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdlib>
#include <string>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/stream_cache.hpp"
#include "backend/cuda/tuning/linalg_routes.hpp"
#include "backend/linalg.hpp"
#include "backend/linalg_small.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/cublas_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {
namespace {

// ---- routes: tuning/linalg_routes.hpp's kLibraryRoutes ----
using tuning::LinalgOp;

// TESSEL_LINALG_ROUTE: unset or "auto", the table; "batched", the batched entry point wherever one
// exists; "matrix", one library call chain per matrix (on streams) everywhere: for
// bench/peers/linalg_grid.py, which times both to suggest the table's crossovers.
enum class ForcedRoute { none, batched, matrix };
ForcedRoute forced_route() {
  static const ForcedRoute chosen = [] {
    const char* v = std::getenv("TESSEL_LINALG_ROUTE");
    const std::string name(v ? v : "");
    if (name.empty() || name == "auto") return ForcedRoute::none;
    if (name == "batched") return ForcedRoute::batched;
    if (name == "matrix") return ForcedRoute::matrix;
    throw ValueError(fmt::format("TESSEL_LINALG_ROUTE must be auto, batched or matrix, got \"{}\"", name));
  }();
  return chosen;
}

// Whether the batch takes op's batched entry point (else one call chain per matrix, on streams).
bool batched_route(LinalgOp op, const LinalgBatch& p) {
  const std::int64_t n = std::max(p.m, p.n);
  if (op == LinalgOp::svd && n > tuning::kGesvdjBatchedMaxN) return false;  // no batched entry point
  if (p.batch < 2) return false;
  switch (forced_route()) {
    case ForcedRoute::batched: return true;
    case ForcedRoute::matrix: return false;
    case ForcedRoute::none: break;
  }
  for (const auto& row : tuning::kLibraryRoutes) {
    if (row.op == op && (row.dtypes & tuning::dtype_bit(p.dtype)) != 0 && n <= row.max_n) return p.batch >= row.min_batch;
  }
  return false;
}

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

void check_cusolver(cusolverStatus_t status, const char* op, const char* expr, const char* file, int line) {
  if (status != CUSOLVER_STATUS_SUCCESS) {
    throw CudaError(fmt::format("{}: {} failed: {} ({}) at {}:{}", op, expr, cusolver_status_name(status),
                                static_cast<int>(status), file, line),
                    static_cast<int>(status), false);
  }
}
#define TESSEL_CUSOLVER_CHECK(expr, op) check_cusolver((expr), (op), #expr, __FILE__, __LINE__)

// ---- handles: one set per (device, CUDA stream), created on first use and kept for the process ----
struct Handles {
  explicit Handles(int device) : device(device) {}
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  ~Handles() {
    DeviceGuard guard(Device::cuda(device));
    // Teardown (release_stream_caches): a failure here leaves nothing to recover, so the statuses
    // are not checked.
    if (params) (void)cusolverDnDestroyParams(params);
    if (solver) (void)cusolverDnDestroy(solver);
    if (blas) (void)cublasDestroy(blas);
  }
  int device;
  cusolverDnHandle_t solver = nullptr;
  cusolverDnParams_t params = nullptr;
  cublasHandle_t blas = nullptr;
  std::mutex mutex;  // one call sequence at a time per handle set
  // in_parts's side streams of this stream (each with its own handle set in g_handles, used only
  // under this set's mutex) and its events, made on first use.
  struct Side {
    Stream stream;
    Event done;  // recorded on `stream` after its part; the caller's stream waits for it
  };
  std::vector<Side> side;
  std::unique_ptr<Event> fork;  // recorded on this stream before the parts; the side streams wait for it
};

auto* const g_handles = new StreamCache<Handles>();

// Keyed by the CUDA stream itself, not the tessel Stream object: every Stream adopting one
// handle (ts.Stream.from_handle per call, as tessel.torch's streams) shares one handle set. User
// space addresses stay below 2^56 on x86-64 and aarch64, so the device index fits the top byte; the
// legacy default stream (a null handle) is one per device.
std::uint64_t handles_key(const Stream& stream) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(stream.handle())) ^
         (static_cast<std::uint64_t>(stream.device().index) << 56);
}

Handles& handles_for(const Stream& stream, const char* op) {
  const Device device = stream.device();
  return g_handles->get(handles_key(stream), [&] {
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

// A call's context: the device made current, the handle set locked, the stream.
struct Call {
  DeviceGuard guard;
  Handles& h;
  std::lock_guard<std::mutex> lock;
  Stream stream;
  cudaStream_t s;
  Call(const Stream& st, const char* op)
      : guard(st.device()), h(handles_for(st, op)), lock(h.mutex), stream(st), s(detail::cuda_stream(st)) {}
  std::shared_ptr<Buffer> device_buffer(std::size_t bytes) const {
    return Buffer::allocate(stream.device(), static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1)), stream);
  }
  // batch pointers base + i * stride_bytes, in a device buffer.
  std::shared_ptr<Buffer> pointers(void* base, std::int64_t stride_bytes, std::int64_t count) const {
    auto buf = device_buffer(static_cast<std::size_t>(count) * sizeof(void*));
    fill_pointers(static_cast<void**>(buf->data()), base, stride_bytes, count, s);
    return buf;
  }
};

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

// How many parts a call of `batch` matrices on c's stream runs in: config().linalg_streams
// (TESSEL_LINALG_STREAMS, set_linalg_streams), at most one per min_part matrices, and 1
// while a CUDA graph capture is active on this thread or records the stream. Forking onto other
// streams with events is legal in a capture (the side streams join it), but the side streams'
// workspaces would need memory in their own pools, which the capture's reserve (made in the
// captured stream's pool) does not cover and which cudaMalloc cannot provide while capturing;
// the first split call would also create streams, events and cuSOLVER handles (device
// allocations) inside the capture. So a captured call stays on one stream; capturing the parts as
// parallel branches would need memory reserved in the side streams' pools first.
int batch_parts(const Call& c, std::int64_t batch, std::int64_t min_part = tuning::kMinPartBatch) {
  const int want = config().linalg_streams;
  if (want <= 1) return 1;
  const std::int64_t parts = std::min<std::int64_t>(want, batch / min_part);
  if (parts <= 1) return 1;
  if (detail::thread_capture_stream() != 0 || c.stream.capturing()) return 1;
  return static_cast<int>(parts);
}

// Runs f(call, first, count) over `parts` consecutive parts of a batch of `batch` matrices: part 0
// on the caller's stream (c), part i on side stream i of c's handle set, with that stream's own
// handle set (handles_for) and workspaces allocated on that stream (f allocates through the Call
// it is given, so their stream-ordered frees are on the stream that used them). The side streams
// first wait for the caller's stream (an event recorded before the parts), and the caller's
// stream waits for each side stream after its own part, so the caller sees one stream-ordered
// operation: its later work, and the frees of the arrays it passed (allocated for its stream),
// come after every part. The side streams are joined even when a part throws.
template <class F>
void in_parts(Call& c, int parts, std::int64_t batch, const char* op, F&& f) {
  if (parts <= 1) return f(c, std::int64_t{0}, batch);
  Handles& h = c.h;  // locked by c
  const Device device = c.stream.device();
  if (!h.fork) h.fork = std::make_unique<Event>(device, /*timing=*/false);
  while (static_cast<int>(h.side.size()) < parts - 1) h.side.push_back({make_side_stream(c.stream), Event(device, false)});
  auto bound = [&](int i) { return batch * i / parts; };
  int started = 0;  // side streams that waited for the fork
  auto join = [&] {
    for (int i = 0; i < started; ++i) {
      h.side[static_cast<std::size_t>(i)].done.record(h.side[static_cast<std::size_t>(i)].stream);
      c.stream.wait(h.side[static_cast<std::size_t>(i)].done);
    }
  };
  try {
    h.fork->record(c.stream);
    for (int i = 1; i < parts; ++i) {
      Handles::Side& side = h.side[static_cast<std::size_t>(i - 1)];
      side.stream.wait(*h.fork);
      ++started;
      Call part(side.stream, op);
      f(part, bound(i), bound(i + 1) - bound(i));
    }
    f(c, std::int64_t{0}, bound(1));
  } catch (...) {
    try {
      join();
    } catch (...) {  // the part's error is the one to report
    }
    throw;
  }
  join();
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

// Runs f(first, count) over chunks of at most INT_MAX matrices (the batched routines count in int).
template <class F>
void in_chunks(std::int64_t batch, F&& f) {
  for (std::int64_t first = 0; first < batch; first += INT_MAX) f(first, std::min<std::int64_t>(INT_MAX, batch - first));
}

std::size_t elem(DType dtype) { return static_cast<std::size_t>(itemsize(dtype)); }
char* at(void* base, std::int64_t index, std::size_t bytes) {
  return static_cast<char*>(base) + static_cast<std::size_t>(index) * bytes;
}

// Host workspace of the X API (needed by a few routines; most ask for none).
struct HostWork {
  std::vector<char> bytes;
  void* get(std::size_t n) {
    bytes.resize(std::max<std::size_t>(n, 1));
    return bytes.data();
  }
};

// ---- typed routines of the legacy API (batched and orgqr), selected by dtype ----
template <class F>
void by_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::complex64: return f(cuFloatComplex{});
    case DType::complex128: return f(cuDoubleComplex{});
    default: throw DTypeError(fmt::format("{}: no CUDA routine for {}", op, dtype_name(dtype)));
  }
}
template <class T>
using Real = std::conditional_t<std::is_same_v<T, cuFloatComplex>, float,
                                std::conditional_t<std::is_same_v<T, cuDoubleComplex>, double, T>>;

template <class T>
cusolverStatus_t potrf_batched(cusolverDnHandle_t h, cublasFillMode_t uplo, int n, T** a, int lda, int* info, int batch) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSpotrfBatched(h, uplo, n, a, lda, info, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDpotrfBatched(h, uplo, n, a, lda, info, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCpotrfBatched(h, uplo, n, a, lda, info, batch);
  else return cusolverDnZpotrfBatched(h, uplo, n, a, lda, info, batch);
}
template <class T>
cublasStatus_t getrf_batched(cublasHandle_t h, int n, T** a, int lda, int* piv, int* info, int batch) {
  if constexpr (std::is_same_v<T, float>) return cublasSgetrfBatched(h, n, a, lda, piv, info, batch);
  else if constexpr (std::is_same_v<T, double>) return cublasDgetrfBatched(h, n, a, lda, piv, info, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cublasCgetrfBatched(h, n, a, lda, piv, info, batch);
  else return cublasZgetrfBatched(h, n, a, lda, piv, info, batch);
}
template <class T>
cublasStatus_t getrs_batched(cublasHandle_t h, cublasOperation_t op, int n, int nrhs, T** a, int lda, const int* piv,
                             T** b, int ldb, int* info, int batch) {
  if constexpr (std::is_same_v<T, float>) return cublasSgetrsBatched(h, op, n, nrhs, a, lda, piv, b, ldb, info, batch);
  else if constexpr (std::is_same_v<T, double>) return cublasDgetrsBatched(h, op, n, nrhs, a, lda, piv, b, ldb, info, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>)
    return cublasCgetrsBatched(h, op, n, nrhs, a, lda, piv, b, ldb, info, batch);
  else return cublasZgetrsBatched(h, op, n, nrhs, a, lda, piv, b, ldb, info, batch);
}
template <class T>
cublasStatus_t geqrf_batched(cublasHandle_t h, int m, int n, T** a, int lda, T** tau, int* info, int batch) {
  if constexpr (std::is_same_v<T, float>) return cublasSgeqrfBatched(h, m, n, a, lda, tau, info, batch);
  else if constexpr (std::is_same_v<T, double>) return cublasDgeqrfBatched(h, m, n, a, lda, tau, info, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cublasCgeqrfBatched(h, m, n, a, lda, tau, info, batch);
  else return cublasZgeqrfBatched(h, m, n, a, lda, tau, info, batch);
}
template <class T>
cusolverStatus_t syevj_batched_size(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, const T* a, const Real<T>* w,
                                    int* lwork, syevjInfo_t params, int batch) {
  const cublasFillMode_t uplo = CUBLAS_FILL_MODE_LOWER;
  if constexpr (std::is_same_v<T, float>) return cusolverDnSsyevjBatched_bufferSize(h, jobz, uplo, n, a, n, w, lwork, params, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDsyevjBatched_bufferSize(h, jobz, uplo, n, a, n, w, lwork, params, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCheevjBatched_bufferSize(h, jobz, uplo, n, a, n, w, lwork, params, batch);
  else return cusolverDnZheevjBatched_bufferSize(h, jobz, uplo, n, a, n, w, lwork, params, batch);
}
template <class T>
cusolverStatus_t syevj_batched(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, T* a, Real<T>* w, T* work,
                               int lwork, int* info, syevjInfo_t params, int batch) {
  const cublasFillMode_t uplo = CUBLAS_FILL_MODE_LOWER;
  if constexpr (std::is_same_v<T, float>) return cusolverDnSsyevjBatched(h, jobz, uplo, n, a, n, w, work, lwork, info, params, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDsyevjBatched(h, jobz, uplo, n, a, n, w, work, lwork, info, params, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCheevjBatched(h, jobz, uplo, n, a, n, w, work, lwork, info, params, batch);
  else return cusolverDnZheevjBatched(h, jobz, uplo, n, a, n, w, work, lwork, info, params, batch);
}
template <class T>
cusolverStatus_t gesvdj_batched_size(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, const T* a,
                                     const Real<T>* s, const T* u, const T* v, int* lwork, gesvdjInfo_t params,
                                     int batch) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgesvdjBatched_bufferSize(h, jobz, m, n, a, m, s, u, m, v, n, lwork, params, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgesvdjBatched_bufferSize(h, jobz, m, n, a, m, s, u, m, v, n, lwork, params, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgesvdjBatched_bufferSize(h, jobz, m, n, a, m, s, u, m, v, n, lwork, params, batch);
  else return cusolverDnZgesvdjBatched_bufferSize(h, jobz, m, n, a, m, s, u, m, v, n, lwork, params, batch);
}
template <class T>
cusolverStatus_t gesvdj_batched(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, T* a, Real<T>* s, T* u,
                                T* v, T* work, int lwork, int* info, gesvdjInfo_t params, int batch) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgesvdjBatched(h, jobz, m, n, a, m, s, u, m, v, n, work, lwork, info, params, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgesvdjBatched(h, jobz, m, n, a, m, s, u, m, v, n, work, lwork, info, params, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgesvdjBatched(h, jobz, m, n, a, m, s, u, m, v, n, work, lwork, info, params, batch);
  else return cusolverDnZgesvdjBatched(h, jobz, m, n, a, m, s, u, m, v, n, work, lwork, info, params, batch);
}
template <class T>
cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, const T* a, const T* tau, int* lwork) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSorgqr_bufferSize(h, m, n, k, a, m, tau, lwork);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDorgqr_bufferSize(h, m, n, k, a, m, tau, lwork);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCungqr_bufferSize(h, m, n, k, a, m, tau, lwork);
  else return cusolverDnZungqr_bufferSize(h, m, n, k, a, m, tau, lwork);
}
template <class T>
cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, T* a, const T* tau, T* work, int lwork, int* info) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSorgqr(h, m, n, k, a, m, tau, work, lwork, info);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDorgqr(h, m, n, k, a, m, tau, work, lwork, info);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCungqr(h, m, n, k, a, m, tau, work, lwork, info);
  else return cusolverDnZungqr(h, m, n, k, a, m, tau, work, lwork, info);
}

template <class T>
T scalar_one() {
  if constexpr (std::is_same_v<T, cuFloatComplex>) return make_cuFloatComplex(1.0f, 0.0f);
  else if constexpr (std::is_same_v<T, cuDoubleComplex>) return make_cuDoubleComplex(1.0, 0.0);
  else return T(1);
}
template <class T>
T scalar_zero() {
  if constexpr (std::is_same_v<T, cuFloatComplex>) return make_cuFloatComplex(0.0f, 0.0f);
  else if constexpr (std::is_same_v<T, cuDoubleComplex>) return make_cuDoubleComplex(0.0, 0.0);
  else return T(0);
}
// c (m x n, column-major) = a^H (a: n x m), out of place: cuBLAS geam with beta = 0. B is a again
// (op(B) = a^H has the right shape), so every pointer is valid whatever cuBLAS reads.
template <class T>
cublasStatus_t adjoint_geam(cublasHandle_t h, int m, int n, const T* a, int lda, T* c, int ldc) {
  const T one = scalar_one<T>(), zero = scalar_zero<T>();
  const cublasOperation_t op = CUBLAS_OP_C;  // CUBLAS_OP_T for real types
  if constexpr (std::is_same_v<T, float>) return cublasSgeam(h, op, op, m, n, &one, a, lda, &zero, a, lda, c, ldc);
  else if constexpr (std::is_same_v<T, double>) return cublasDgeam(h, op, op, m, n, &one, a, lda, &zero, a, lda, c, ldc);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cublasCgeam(h, op, op, m, n, &one, a, lda, &zero, a, lda, c, ldc);
  else return cublasZgeam(h, op, op, m, n, &one, a, lda, &zero, a, lda, c, ldc);
}
// c (m x n) = a (m x k) b (k x n), all column-major.
template <class T>
cublasStatus_t gemm_nn(cublasHandle_t h, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c, int ldc) {
  const T one = scalar_one<T>(), zero = scalar_zero<T>();
  const cublasOperation_t nn = CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>) return cublasSgemm(h, nn, nn, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  else if constexpr (std::is_same_v<T, double>) return cublasDgemm(h, nn, nn, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cublasCgemm(h, nn, nn, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  else return cublasZgemm(h, nn, nn, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
}
// gesvdj of one matrix (legacy 32-bit API; the X API has no gesvdj): econ = 1 writes U (m x k)
// and V (n x k), k = min(m, n); econ = 0 the square ones.
template <class T>
cusolverStatus_t gesvdj_size(cusolverDnHandle_t h, cusolverEigMode_t jobz, int econ, int m, int n, const T* a, int lda,
                             const Real<T>* s, const T* u, int ldu, const T* v, int ldv, int* lwork, gesvdjInfo_t params) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgesvdj_bufferSize(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork, params);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgesvdj_bufferSize(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork, params);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgesvdj_bufferSize(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork, params);
  else return cusolverDnZgesvdj_bufferSize(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork, params);
}
template <class T>
cusolverStatus_t gesvdj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int econ, int m, int n, T* a, int lda, Real<T>* s,
                        T* u, int ldu, T* v, int ldv, T* work, int lwork, int* info, gesvdjInfo_t params) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgesvdj(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, work, lwork, info, params);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgesvdj(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, work, lwork, info, params);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgesvdj(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, work, lwork, info, params);
  else return cusolverDnZgesvdj(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, work, lwork, info, params);
}

// The legacy 32-bit getrf/getrs (int pivots), the ones PyTorch and CuPy call.
template <class T>
cusolverStatus_t getrf_size(cusolverDnHandle_t h, int n, T* a, int* lwork) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgetrf_bufferSize(h, n, n, a, n, lwork);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgetrf_bufferSize(h, n, n, a, n, lwork);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgetrf_bufferSize(h, n, n, a, n, lwork);
  else return cusolverDnZgetrf_bufferSize(h, n, n, a, n, lwork);
}
template <class T>
cusolverStatus_t getrf(cusolverDnHandle_t h, int n, T* a, T* work, int* piv, int* info) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgetrf(h, n, n, a, n, work, piv, info);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgetrf(h, n, n, a, n, work, piv, info);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgetrf(h, n, n, a, n, work, piv, info);
  else return cusolverDnZgetrf(h, n, n, a, n, work, piv, info);
}
template <class T>
cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const T* a, const int* piv, T* b,
                       int* info) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
  else return cusolverDnZgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
}

// ---- solve of one matrix at a time: which cuSOLVER API ----
// The legacy API (<t>getrf/<t>getrs, int pivots and int sizes), which PyTorch and CuPy call,
// where a matrix's n * n elements fit an int; the 64-bit X API (Xgetrf/Xgetrs) above. H100,
// n = 4096 float32 with 64 right-hand sides, 15 alternating rounds in one process
// (bench/peers/getrf_apis.cu): legacy 15.15-15.20 ms, Xgetrf 15.31-15.35 ms
// (CUSOLVER_ALG_1 of Xgetrf 41.8-44.2 ms).
bool solve_legacy_api(std::int64_t n) { return n <= 46340; }  // 46340^2 < 2^31

// After getrf, the solve ends by two cuBLAS triangular solves and one row permutation
// (permute_rows_by_pivots) rather than getrs, from kTrsmSolveMinN rows to kMaxPermutedRows (where
// the permutation's index fits shared memory). H200, float32, 15 alternating rounds
// (bench/peers/solve_routes.cu), after getrf, getrs against the triangular route, ms:
//   n 256: 0.086 / 0.055 (1 right-hand side), 0.136 / 0.091 (64);  n 512: 0.150 / 0.090, 0.273 / 0.192;
//   n 1024: 0.277 / 0.160, 0.553 / 0.393;  n 2048, 64: 1.146 / 0.812;
//   n 4096: 1.179 / 0.664, 2.826 / 2.078 (whole solve 14.60 / 13.83), 4.619 / 2.383 (512);
//   n 8192, 64: 5.907 / 4.315. Below 256 it was not measured.
constexpr std::int64_t kTrsmSolveMinN = 256;
bool solve_by_triangular_solves(std::int64_t n) { return n >= kTrsmSolveMinN && n <= kMaxPermutedRows; }

template <class T>
cublasStatus_t trsm_left_transposed(cublasHandle_t h, bool upper, int n, int k, const T* a, T* b) {
  const cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  const cublasDiagType_t diag = upper ? CUBLAS_DIAG_NON_UNIT : CUBLAS_DIAG_UNIT;  // L of getrf has a unit diagonal
  const cublasSideMode_t left = CUBLAS_SIDE_LEFT;
  const cublasOperation_t op = CUBLAS_OP_T;
  if constexpr (std::is_same_v<T, float>) {
    const float one = 1.0f;
    return cublasStrsm(h, left, fill, op, diag, n, k, &one, a, n, b, n);
  } else if constexpr (std::is_same_v<T, double>) {
    const double one = 1.0;
    return cublasDtrsm(h, left, fill, op, diag, n, k, &one, a, n, b, n);
  } else if constexpr (std::is_same_v<T, cuFloatComplex>) {
    const cuFloatComplex one = make_cuFloatComplex(1.0f, 0.0f);
    return cublasCtrsm(h, left, fill, op, diag, n, k, &one, a, n, b, n);
  } else {
    const cuDoubleComplex one = make_cuDoubleComplex(1.0, 0.0);
    return cublasZtrsm(h, left, fill, op, diag, n, k, &one, a, n, b, n);
  }
}

// Jacobi sweeps are capped, so NaN/Inf input ends with info > 0 or NaN results, never a hang.
constexpr int kJacobiMaxSweeps = 100;

// ---- SVD table: the route of one large m x n matrix (m >= n; wide ones come transposed) ----
// Taken where neither tessel's kernels nor gesvdjBatched apply.
//  - gesvdp: cusolverDnXgesvdp (a polar decomposition, then syevd of its Hermitian factor) of a
//    itself, U thin: for tall matrices, 2m >= 3n and n >= kPolarMinN. Near a zero singular value
//    it perturbs the matrix and reports by how much (h_err_sigma), and the singular values move by
//    that much, so such a matrix (and any call that fails) is solved again from a saved copy on
//    the gesvdj route.
//  - gesvdj: cusolverDn<t>gesvdj (Jacobi) of a square matrix, after a QR of a tall one (geqrf,
//    then the SVD of the n x n R, U = Q U_r through orgqr/ungqr and one gemm; values only: no Q).
//  - gesvd: cusolverDnXgesvd (bidiagonalization, QR iteration): the full U of a tall matrix (an
//    m x m U that neither R's SVD nor gesvdp's thin U gives).
// Measured on the H200 (float32 Gaussian, bench/peers/svd_routes.cu, median of 3-5 alternating
// rounds; ms for the thin SVD / values only, then max|A - U S V^T| / max|A|):
//   shape       gesvdp          QR + gesvdj
//   4096x1024   30.8/28.4 2.5e-6  58.8/57.2 3.3e-4   (PyTorch's gesvdj of the tall matrix: 58.4)
//   2048x1024   29.0/26.8         57.5/55.9
//   1536x1024   28.3/26.1         56.0/54.3          (the least tall measured: 2m = 3n)
//   8192x512    15.0/14.0         22.2/21.3
//   1024x512    12.0/11.4         19.7/18.9
//   4096x256     5.9/5.5           7.8/7.4
//   2048x256     5.7/5.3           7.7/7.2           (kPolarMinN)
//   1024x128     3.0/2.1           2.9/2.7
//   300x40       1.7/1.0           1.1/1.0
//   Square: gesvdp perturbed every Gaussian 1024x1024 and 2048x2048 (h_err_sigma 0.12 and 2441;
//   smallest singular values 0.010 and 0.014), so square and nearly square matrices stay on
//   gesvdj (56.2 and 224 ms). At 4096x1024 it perturbed a repeated column and graded columns of
//   condition 1e6, not graded columns of condition 1e3 nor the zero matrix.
// Measured before on the H100 (bench/peers/linalg_svd_routes.py, svd/svdvals): 4096x1024: QR +
// gesvdj 57.6/56.5 ms, Xgesvd 162/93 ms, QR + Xgesvd 155/81 ms. 1024x1024: gesvdj 55/55 ms,
// Xgesvd 112/74 ms. 2048x2048: gesvdj 232/196 ms, Xgesvd 317/188 ms.
// TESSEL_LINALG_SVD=gesvdp | gesvdj | gesvd | qr+gesvd forces a driver (gesvdp and gesvdj leave the
// full U of a tall matrix to gesvd), to compare and to test; auto is this table.
enum class SvdDriver { gesvd, gesvdj, gesvdp };
struct SvdRoute {
  bool qr_first;
  SvdDriver driver;
};
constexpr std::int64_t kPolarMinN = 256;

SvdRoute svd_route(const LinalgBatch& p, bool vectors, bool full) {
  const bool full_u_of_tall = vectors && full && p.m > p.n;
  const bool tall = p.m > p.n && !full_u_of_tall;
  static const std::string forced = [] {
    const char* v = std::getenv("TESSEL_LINALG_SVD");
    return std::string(v ? v : "");
  }();
  if (forced.empty() || forced == "auto") {
    if (full_u_of_tall) return {false, SvdDriver::gesvd};
    if (2 * p.m >= 3 * p.n && p.n >= kPolarMinN) return {false, SvdDriver::gesvdp};
    return {tall, SvdDriver::gesvdj};
  }
  if (forced == "gesvdp") return full_u_of_tall ? SvdRoute{false, SvdDriver::gesvd} : SvdRoute{false, SvdDriver::gesvdp};
  if (forced == "gesvdj") return full_u_of_tall ? SvdRoute{false, SvdDriver::gesvd} : SvdRoute{tall, SvdDriver::gesvdj};
  if (forced == "gesvd") return {false, SvdDriver::gesvd};
  if (forced == "qr+gesvd") return {tall, SvdDriver::gesvd};
  throw ValueError(
      fmt::format("svd: TESSEL_LINALG_SVD must be auto, gesvdp, gesvdj, gesvd or qr+gesvd, got \"{}\"", forced));
}

// A gesvdjInfo_t with tessel's sweep cap and a tolerance of the dtype's epsilon (cuSOLVER's
// default, stated here): converged sweeps stop early, NaN/Inf input stops at the cap with info > 0.
struct GesvdjParams {
  gesvdjInfo_t params = nullptr;
  GesvdjParams(DType dtype, const char* op) {
    TESSEL_CUSOLVER_CHECK(cusolverDnCreateGesvdjInfo(&params), op);
    const double tol = to_real(dtype) == DType::float32 ? static_cast<double>(FLT_EPSILON) : DBL_EPSILON;
    try {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgesvdjSetMaxSweeps(params, kJacobiMaxSweeps), op);
      TESSEL_CUSOLVER_CHECK(cusolverDnXgesvdjSetTolerance(params, tol), op);
    } catch (...) {
      cusolverDnDestroyGesvdjInfo(params);
      throw;
    }
  }
  ~GesvdjParams() { (void)cusolverDnDestroyGesvdjInfo(params); }
  GesvdjParams(const GesvdjParams&) = delete;
  GesvdjParams& operator=(const GesvdjParams&) = delete;
};

// cuSOLVER's Jacobi iterations take a NaN or Inf for converged (every comparison with NaN is
// false) and return finite results for such a matrix (syevjBatched at n = 17 on the H100). The
// library paths of eigh and svd flag those matrices before the call overwrites the input, and
// after it make their results NaN and their info 1 (the plain functions raise LinAlgError).
class NonfiniteInput {
 public:
  NonfiniteInput(const LinalgBatch& p, const void* a, const Stream& stream) : batch_(p.batch), stream_(stream) {
    DeviceGuard guard(stream.device());
    flags_ = Buffer::allocate(stream.device(), std::max<std::int64_t>(p.batch, 1) * 4, stream);
    flag_nonfinite(p.dtype, a, p.m * p.n, p.batch, flags(), detail::cuda_stream(stream));
  }
  // out: `per` elements of dtype per matrix; info (or null) set to 1 where it is 0.
  void poison(DType dtype, void* out, std::int64_t per, std::int32_t* info) const {
    DeviceGuard guard(stream_.device());
    poison_flagged(dtype, flags(), per, batch_, out, info, detail::cuda_stream(stream_));
  }

 private:
  std::int32_t* flags() const { return static_cast<std::int32_t*>(flags_->data()); }
  std::int64_t batch_;
  Stream stream_;
  std::shared_ptr<Buffer> flags_;
};

}  // namespace

// ---- Cholesky ----
void cholesky(const LinalgBatch& p, void* a, bool upper, std::int32_t* info, const Stream& stream) {
  const char* op = "cholesky";
  if (small_kernel_applies(SmallKernel::cholesky, p)) return small_cholesky(p, a, upper, info, stream);
  Call c(stream, op);
  const cublasFillMode_t uplo = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  if (batched_route(LinalgOp::cholesky, p)) {  // either triangle (cuSOLVER documents both fill modes)
    const int n = to_int(p.n, op);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        auto ptrs = c.pointers(at(a, first, bytes), static_cast<std::int64_t>(bytes), count);
        TESSEL_CUSOLVER_CHECK(potrf_batched<T>(c.h.solver, uplo, n, static_cast<T**>(ptrs->data()), n, info + first,
                                               static_cast<int>(count)),
                              op);
      });
    });
    return;
  }
  // One matrix at a time, the batch split over streams: cuSOLVER's potrf is much faster with
  // CUBLAS_FILL_MODE_LOWER (PyTorch factors LOWER), so an UPPER request factors the conjugate
  // transpose instead:
  //   C = A^H (geam). C's lower triangle is the conjugate transpose of A's upper one, so it
  //   defines the same Hermitian H that UPPER would read; potrf LOWER gives H = Lc Lc^H, and
  //   U = Lc^H is the upper factor (H = U^H U). A = C^H (geam) puts U in A's upper triangle and
  //   gives back A's strict lower triangle exactly as it was (it is C's untouched upper one).
  const cudaDataType t = data_type(p.dtype);
  const cublasFillMode_t lower = CUBLAS_FILL_MODE_LOWER;
  const int n = upper ? to_int(p.n, op) : 0;
  in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
           [&](Call& part, std::int64_t first, std::int64_t count) {
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXpotrf_bufferSize(part.h.solver, part.h.params, lower, p.n, t, a, p.n, t, &dev_bytes,
                                                      &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    auto adjoint = upper ? part.device_buffer(bytes) : nullptr;
    HostWork host;
    void* hw = host.get(host_bytes);
    for (std::int64_t b = first; b < first + count; ++b) {
      void* ab = at(a, b, bytes);
      void* factored = upper ? adjoint->data() : ab;
      if (upper) {
        by_dtype(p.dtype, op, [&](auto tag) {
          using T = decltype(tag);
          TESSEL_CUBLAS_CHECK(adjoint_geam<T>(part.h.blas, n, n, static_cast<const T*>(ab), n, static_cast<T*>(factored), n),
                              op);
        });
      }
      TESSEL_CUSOLVER_CHECK(cusolverDnXpotrf(part.h.solver, part.h.params, lower, p.n, t, factored, p.n, t, work->data(),
                                             dev_bytes, hw, host_bytes, info + b),
                            op);
      if (upper) {
        by_dtype(p.dtype, op, [&](auto tag) {
          using T = decltype(tag);
          TESSEL_CUBLAS_CHECK(adjoint_geam<T>(part.h.blas, n, n, static_cast<const T*>(factored), n, static_cast<T*>(ab), n),
                              op);
        });
      }
    }
  });
}

// ---- LU ----
namespace {
// getrfBatched over the whole batch: int32 pivots (batch, n), 1-based.
void getrf_batched_all(Call& c, const LinalgBatch& p, void* a, int* piv, std::int32_t* info, const char* op) {
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  const int n = to_int(p.n, op);
  by_dtype(p.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
      auto ptrs = c.pointers(at(a, first, bytes), static_cast<std::int64_t>(bytes), count);
      TESSEL_CUBLAS_CHECK(getrf_batched<T>(c.h.blas, n, static_cast<T**>(ptrs->data()), n, piv + first * p.n,
                                           info + first, static_cast<int>(count)),
                          op);
    });
  });
}
}  // namespace

void lu(const LinalgBatch& p, void* a, Array& pivots, std::int32_t* info, const Stream& stream) {
  const char* op = "lu";
  Call c(stream, op);
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  if (batched_route(LinalgOp::lu, p)) {
    pivots = empty({p.batch, p.n}, DType::int32, stream.device(), stream);
    getrf_batched_all(c, p, a, static_cast<int*>(pivots.data()), info, op);
    return;
  }
  pivots = empty({p.batch, p.n}, DType::int64, stream.device(), stream);
  auto* piv = static_cast<std::int64_t*>(pivots.data());
  const cudaDataType t = data_type(p.dtype);
  in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
           [&](Call& part, std::int64_t first, std::int64_t count) {
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXgetrf_bufferSize(part.h.solver, part.h.params, p.n, p.n, t, a, p.n, t, &dev_bytes,
                                                      &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    HostWork host;
    void* hw = host.get(host_bytes);
    for (std::int64_t b = first; b < first + count; ++b) {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgetrf(part.h.solver, part.h.params, p.n, p.n, t, at(a, b, bytes), p.n,
                                             piv + b * p.n, t, work->data(), dev_bytes, hw, host_bytes, info + b),
                            op);
    }
  });
}

// ---- solve: LU, then the triangular solves ----
void solve(const LinalgBatch& p, void* a, void* b_data, std::int64_t nrhs, bool transposed, std::int32_t* info,
           const Stream& stream) {
  const char* op = "solve";
  // tessel's kernel takes either layout and leaves a as it is (ops/linalg.cpp passes it x1's own
  // C-order buffer, `transposed`, when the kernel applies).
  if (small_kernel_applies(SmallKernel::lu_solve, p)) return small_solve(p, a, b_data, b_data, nrhs, transposed, info, stream);
  if (transposed && p.n <= kTransposedSolveMinN) throw Error("solve: internal error: a transposed solve of small matrices");
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  const std::size_t b_bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * nrhs);
  const cublasOperation_t trans = transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  Call c(stream, op);
  if (batched_route(LinalgOp::solve, p)) {
    // getrfBatched, then getrsBatched (a transposed solve: a holds A^T = P L U, op T solves A x = b).
    auto pivots = c.device_buffer(static_cast<std::size_t>(p.batch * p.n) * sizeof(int));
    auto* piv = static_cast<int*>(pivots->data());
    getrf_batched_all(c, p, a, piv, info, op);
    const int n = to_int(p.n, op), k = to_int(nrhs, op);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        auto ap = c.pointers(at(a, first, bytes), static_cast<std::int64_t>(bytes), count);
        auto bp = c.pointers(at(b_data, first, b_bytes), static_cast<std::int64_t>(b_bytes), count);
        int arg_info = 0;  // host: argument validity only
        TESSEL_CUBLAS_CHECK(getrs_batched<T>(c.h.blas, trans, n, k, static_cast<T**>(ap->data()), n, piv + first * p.n,
                                             static_cast<T**>(bp->data()), n, &arg_info, static_cast<int>(count)),
                            op);
        if (arg_info != 0) throw Error(fmt::format("solve: internal error: getrsBatched rejected argument {}", -arg_info));
      });
    });
    // pivots is released here; its buffer is reused only after this stream's work (stream-ordered free).
    return;
  }
  const int parts = batch_parts(c, p.batch, tuning::kMinPartPerMatrix);
  if (solve_legacy_api(p.n)) {
    const int n = to_int(p.n, op), k = to_int(nrhs, op);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_parts(c, parts, p.batch, op, [&](Call& part, std::int64_t first, std::int64_t count) {
        int lwork = 0;
        TESSEL_CUSOLVER_CHECK(getrf_size<T>(part.h.solver, n, static_cast<T*>(a), &lwork), op);
        auto work = part.device_buffer(static_cast<std::size_t>(lwork) * sizeof(T));
        auto piv = part.device_buffer(static_cast<std::size_t>(p.n) * sizeof(int));
        auto solve_info = part.device_buffer(sizeof(int));  // getrs's: argument checks only
        // The triangular route (transposed: a holds A^T = P L U, so A x = b is x = P L^-T U^-T b):
        // the solves run on a copy z of b, and the permutation writes x back into b.
        const bool triangular = transposed && solve_by_triangular_solves(p.n);
        auto z = part.device_buffer(triangular ? b_bytes : 0);
        auto rows = part.device_buffer(triangular ? static_cast<std::size_t>(p.n) * sizeof(int) : 0);
        for (std::int64_t b = first; b < first + count; ++b) {
          T* ab = reinterpret_cast<T*>(at(a, b, bytes));
          TESSEL_CUSOLVER_CHECK(getrf<T>(part.h.solver, n, ab, static_cast<T*>(work->data()),
                                         static_cast<int*>(piv->data()), info + b),
                                op);
          if (triangular) {
            void* bb = at(b_data, b, b_bytes);
            T* zb = static_cast<T*>(z->data());
            TESSEL_CUDA_CHECK(cudaMemcpyAsync(zb, bb, b_bytes, cudaMemcpyDeviceToDevice, part.s), op);
            TESSEL_CUBLAS_CHECK(trsm_left_transposed<T>(part.h.blas, true, n, k, ab, zb), op);
            TESSEL_CUBLAS_CHECK(trsm_left_transposed<T>(part.h.blas, false, n, k, ab, zb), op);
            permute_rows_by_pivots(p.dtype, static_cast<const std::int32_t*>(piv->data()), p.n, zb, nrhs, bb,
                                   static_cast<std::int32_t*>(rows->data()), part.s);
            continue;
          }
          TESSEL_CUSOLVER_CHECK(getrs<T>(part.h.solver, trans, n, k, ab, static_cast<const int*>(piv->data()),
                                         reinterpret_cast<T*>(at(b_data, b, b_bytes)),
                                         static_cast<int*>(solve_info->data())),
                                op);
        }
      });
    });
    return;
  }
  const cudaDataType t = data_type(p.dtype);
  in_parts(c, parts, p.batch, op, [&](Call& part, std::int64_t first, std::int64_t count) {
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXgetrf_bufferSize(part.h.solver, part.h.params, p.n, p.n, t, a, p.n, t, &dev_bytes,
                                                      &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    auto piv = part.device_buffer(static_cast<std::size_t>(p.n) * sizeof(std::int64_t));
    auto solve_info = part.device_buffer(sizeof(int));  // getrs's: argument checks only
    HostWork host;
    void* hw = host.get(host_bytes);
    for (std::int64_t b = first; b < first + count; ++b) {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgetrf(part.h.solver, part.h.params, p.n, p.n, t, at(a, b, bytes), p.n,
                                             static_cast<std::int64_t*>(piv->data()), t, work->data(), dev_bytes, hw,
                                             host_bytes, info + b),
                            op);
      TESSEL_CUSOLVER_CHECK(cusolverDnXgetrs(part.h.solver, part.h.params, trans, p.n, nrhs, t, at(a, b, bytes), p.n,
                                             static_cast<const std::int64_t*>(piv->data()), t, at(b_data, b, b_bytes),
                                             p.n, static_cast<int*>(solve_info->data())),
                            op);
    }
  });
}

// ---- eigh ----
namespace {
void eigh_library(const LinalgBatch& p, void* a, void* w, bool vectors, std::int32_t* info, const Stream& stream) {
  const char* op = "eigh";
  Call c(stream, op);
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  const std::size_t w_bytes = elem(to_real(p.dtype)) * static_cast<std::size_t>(p.n);
  const bool batched = batched_route(LinalgOp::eigh, p);
  if (batched && p.n <= tuning::kSyevjBatchedMaxN) {
    const int n = to_int(p.n, op);
    syevjInfo_t params = nullptr;
    TESSEL_CUSOLVER_CHECK(cusolverDnCreateSyevjInfo(&params), op);
    std::unique_ptr<std::remove_pointer_t<syevjInfo_t>, void (*)(syevjInfo_t)> guard(
        params, [](syevjInfo_t q) { cusolverDnDestroySyevjInfo(q); });
    TESSEL_CUSOLVER_CHECK(cusolverDnXsyevjSetMaxSweeps(params, kJacobiMaxSweeps), op);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        T* ab = reinterpret_cast<T*>(at(a, first, bytes));
        auto* wb = reinterpret_cast<Real<T>*>(at(w, first, w_bytes));
        int lwork = 0;
        TESSEL_CUSOLVER_CHECK(syevj_batched_size<T>(c.h.solver, jobz, n, ab, wb, &lwork, params, static_cast<int>(count)), op);
        auto work = c.device_buffer(static_cast<std::size_t>(lwork) * sizeof(T));
        TESSEL_CUSOLVER_CHECK(syevj_batched<T>(c.h.solver, jobz, n, ab, wb, static_cast<T*>(work->data()), lwork,
                                               info + first, params, static_cast<int>(count)),
                              op);
      });
    });
    return;
  }
  const cudaDataType t = data_type(p.dtype), rt = real_type(p.dtype);
  if (batched) {
    // One call per part, each on its own stream and handle set (in_parts): XsyevBatched launches
    // many small kernels, and parts on several streams may overlap them and their tails.
    in_parts(c, batch_parts(c, p.batch), p.batch, op, [&](Call& part, std::int64_t first, std::int64_t count) {
      void* ap = at(a, first, bytes);
      void* wp = at(w, first, w_bytes);
      std::size_t part_bytes = 0, part_host_bytes = 0;
      TESSEL_CUSOLVER_CHECK(cusolverDnXsyevBatched_bufferSize(part.h.solver, part.h.params, jobz, CUBLAS_FILL_MODE_LOWER,
                                                              p.n, t, ap, p.n, rt, wp, t, &part_bytes, &part_host_bytes,
                                                              count),
                            op);
      auto work = part.device_buffer(part_bytes);
      HostWork host;
      TESSEL_CUSOLVER_CHECK(cusolverDnXsyevBatched(part.h.solver, part.h.params, jobz, CUBLAS_FILL_MODE_LOWER, p.n, t, ap,
                                                   p.n, rt, wp, t, work->data(), part_bytes, host.get(part_host_bytes),
                                                   part_host_bytes, info + first, count),
                            op);
    });
    return;
  }
  // One syevd per matrix, the batch split over streams.
  in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
           [&](Call& part, std::int64_t first, std::int64_t count) {
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXsyevd_bufferSize(part.h.solver, part.h.params, jobz, CUBLAS_FILL_MODE_LOWER, p.n, t, a,
                                                      p.n, rt, w, t, &dev_bytes, &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    HostWork host;
    void* hw = host.get(host_bytes);
    for (std::int64_t b = first; b < first + count; ++b) {
      TESSEL_CUSOLVER_CHECK(cusolverDnXsyevd(part.h.solver, part.h.params, jobz, CUBLAS_FILL_MODE_LOWER, p.n, t,
                                             at(a, b, bytes), p.n, rt, at(w, b, w_bytes), t, work->data(), dev_bytes, hw,
                                             host_bytes, info + b),
                            op);
    }
  });
}

}  // namespace

// ops/linalg.cpp sends the batches of tessel's small-matrix kernels to small_eigh itself (they
// read the caller's row-major array); this is the cuSOLVER path.
void eigh(const LinalgBatch& p, void* a, void* w, bool vectors, std::int32_t* info, const Stream& stream) {
  const NonfiniteInput nonfinite(p, a, stream);
  eigh_library(p, a, w, vectors, info, stream);
  nonfinite.poison(to_real(p.dtype), w, p.n, info);
  if (vectors) nonfinite.poison(p.dtype, a, p.n * p.n, nullptr);
}

// ---- SVD (ops/linalg.cpp passes m >= n on CUDA) ----
namespace {
// The per-matrix path, on the route of the SVD table: a (m x n, m >= n) destroyed; s; when
// `vectors`: u (m x ucols, ucols = m when `full`, else n) and vh (n x n).
template <class T>
void svd_one_by_one(Call& c, const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, bool full,
                    const SvdRoute& route, std::int32_t* info, const char* op) {
  const std::int64_t m = p.m, n = p.n;
  if (route.driver == SvdDriver::gesvdp) throw Error("svd: internal error: the gesvdp route is svd_by_polar's");
  const bool qr = route.qr_first;  // svd_route leaves the full U of a tall matrix to the direct route
  if (qr && vectors && full && m > n) throw Error("svd: internal error: QR first for the full U of a tall matrix");
  const std::int64_t ucols = full ? m : n;
  const std::size_t es = sizeof(T);
  const std::size_t a_bytes = es * static_cast<std::size_t>(m * n), s_bytes = sizeof(Real<T>) * static_cast<std::size_t>(n);
  const std::size_t u_bytes = es * static_cast<std::size_t>(m * ucols), vh_bytes = es * static_cast<std::size_t>(n * n);
  const cudaDataType t = data_type(p.dtype), rt = real_type(p.dtype);
  // The driver factors R (n x n) after geqrf, or a itself: dm rows, leading dimension dm.
  const std::int64_t dm = qr ? n : m;
  const bool full_u = full && !qr && m > n;  // the driver writes the square U of a tall matrix
  const int im = to_int(m, op), in = to_int(n, op), idm = to_int(dm, op);

  std::shared_ptr<Buffer> tau, r, ur, qr_info, geqrf_work, orgqr_work;
  std::size_t geqrf_bytes = 0, geqrf_host_bytes = 0;
  HostWork geqrf_host;
  int orgqr_lwork = 0;
  if (qr) {
    tau = c.device_buffer(es * static_cast<std::size_t>(n));
    r = c.device_buffer(es * static_cast<std::size_t>(n * n));
    qr_info = c.device_buffer(sizeof(int));  // geqrf's and orgqr's: argument checks only
    TESSEL_CUSOLVER_CHECK(cusolverDnXgeqrf_bufferSize(c.h.solver, c.h.params, m, n, t, a, m, t, tau->data(), t,
                                                      &geqrf_bytes, &geqrf_host_bytes),
                          op);
    geqrf_work = c.device_buffer(geqrf_bytes);
    if (vectors) {
      ur = c.device_buffer(es * static_cast<std::size_t>(n * n));
      TESSEL_CUSOLVER_CHECK(orgqr_size<T>(c.h.solver, im, in, in, static_cast<T*>(a), static_cast<T*>(tau->data()),
                                          &orgqr_lwork),
                            op);
      orgqr_work = c.device_buffer(static_cast<std::size_t>(orgqr_lwork) * es);
    }
  }
  void* first_u = vectors ? (qr ? ur->data() : u) : nullptr;  // the driver's U, leading dimension dm
  void* hgw = geqrf_host.get(geqrf_host_bytes);

  // The driver's workspace.
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const int econ = full_u ? 0 : 1;
  std::unique_ptr<GesvdjParams> jparams;
  std::shared_ptr<Buffer> v, work;  // gesvdj's V (n x n), then conjugate-transposed into vh
  int lwork = 0;
  const signed char job = !vectors ? 'N' : (full_u ? 'A' : 'S');
  const std::int64_t ldvt = vectors ? n : 1;
  std::size_t dev_bytes = 0, host_bytes = 0;
  HostWork host;
  void* first_a = qr ? r->data() : a;
  if (route.driver == SvdDriver::gesvdj) {
    jparams = std::make_unique<GesvdjParams>(p.dtype, op);
    if (vectors) v = c.device_buffer(es * static_cast<std::size_t>(n * n));
    TESSEL_CUSOLVER_CHECK(gesvdj_size<T>(c.h.solver, jobz, econ, idm, in, static_cast<const T*>(first_a), idm,
                                         static_cast<const Real<T>*>(s), static_cast<const T*>(first_u), idm,
                                         vectors ? static_cast<const T*>(v->data()) : nullptr, in, &lwork,
                                         jparams->params),
                          op);
    work = c.device_buffer(static_cast<std::size_t>(lwork) * es);
  } else {
    TESSEL_CUSOLVER_CHECK(cusolverDnXgesvd_bufferSize(c.h.solver, c.h.params, job, job, dm, n, t, first_a, dm, rt, s, t,
                                                      first_u, dm, t, vh, ldvt, t, &dev_bytes, &host_bytes),
                          op);
    work = c.device_buffer(dev_bytes);
  }
  void* hw = host.get(host_bytes);

  for (std::int64_t b = 0; b < p.batch; ++b) {
    T* ab = reinterpret_cast<T*>(at(a, b, a_bytes));
    auto* sb = reinterpret_cast<Real<T>*>(at(s, b, s_bytes));
    T* ub = vectors ? reinterpret_cast<T*>(at(u, b, u_bytes)) : nullptr;
    T* vhb = vectors ? reinterpret_cast<T*>(at(vh, b, vh_bytes)) : nullptr;
    T* da = ab;  // what the driver factors
    T* dub = ub;
    if (qr) {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgeqrf(c.h.solver, c.h.params, m, n, t, ab, m, t, tau->data(), t,
                                             geqrf_work->data(), geqrf_bytes, hgw, geqrf_host_bytes,
                                             static_cast<int*>(qr_info->data())),
                            op);
      copy_upper_triangle(p.dtype, ab, m, r->data(), n, c.s);
      da = static_cast<T*>(r->data());
      dub = vectors ? static_cast<T*>(ur->data()) : nullptr;
    }
    if (route.driver == SvdDriver::gesvdj) {
      TESSEL_CUSOLVER_CHECK(gesvdj<T>(c.h.solver, jobz, econ, idm, in, da, idm, sb, dub, idm,
                                      vectors ? static_cast<T*>(v->data()) : nullptr, in, static_cast<T*>(work->data()),
                                      lwork, info + b, jparams->params),
                            op);
      if (vectors) adjoint_batch(p.dtype, v->data(), n, vhb, n, n, 1, c.s);
    } else {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgesvd(c.h.solver, c.h.params, job, job, dm, n, t, da, dm, rt, sb, t, dub, dm, t,
                                             vhb, ldvt, t, work->data(), dev_bytes, hw, host_bytes, info + b),
                            op);
    }
    if (qr && vectors) {  // U = Q U_r: Q (m x n) formed in place of the Householder vectors
      TESSEL_CUSOLVER_CHECK(orgqr<T>(c.h.solver, im, in, in, ab, static_cast<const T*>(tau->data()),
                                     static_cast<T*>(orgqr_work->data()), orgqr_lwork,
                                     static_cast<int*>(qr_info->data())),
                            op);
      TESSEL_CUBLAS_CHECK(gemm_nn<T>(c.h.blas, im, in, in, ab, im, static_cast<const T*>(ur->data()), in, ub, im), op);
    }
  }
}
// The gesvdp route (the SVD table): the thin U. Each matrix is copied first; one that gesvdp
// perturbed (h_err_sigma above the dtype's epsilon times its largest singular value) or failed on
// is restored from the copy and solved again on the gesvdj route. gesvdp returns h_err_sigma to
// the host, so each call waits for its matrix.
template <class T>
void svd_by_polar(Call& c, const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, std::int32_t* info,
                  const char* op) {
  const std::int64_t m = p.m, n = p.n;
  const std::size_t es = sizeof(T);
  const std::size_t a_bytes = es * static_cast<std::size_t>(m * n), s_bytes = sizeof(Real<T>) * static_cast<std::size_t>(n);
  const std::size_t u_bytes = a_bytes, vh_bytes = es * static_cast<std::size_t>(n * n);
  const cudaDataType t = data_type(p.dtype), rt = real_type(p.dtype);
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  // Without vectors U and V are still given (m x n and n x n scratch): the documentation does not
  // say gesvdp leaves them unreferenced.
  auto scratch_u = vectors ? nullptr : c.device_buffer(u_bytes);
  auto v = c.device_buffer(vh_bytes);
  auto saved = c.device_buffer(a_bytes);
  std::size_t dev_bytes = 0, host_bytes = 0;
  void* first_u = vectors ? u : scratch_u->data();
  TESSEL_CUSOLVER_CHECK(cusolverDnXgesvdp_bufferSize(c.h.solver, c.h.params, jobz, 1, m, n, t, a, m, rt, s, t, first_u, m,
                                                     t, v->data(), n, t, &dev_bytes, &host_bytes),
                        op);
  auto work = c.device_buffer(dev_bytes);
  HostWork host;
  void* hw = host.get(host_bytes);
  const double eps = to_real(p.dtype) == DType::float32 ? static_cast<double>(FLT_EPSILON) : DBL_EPSILON;
  const SvdRoute fallback{m > n, SvdDriver::gesvdj};
  for (std::int64_t b = 0; b < p.batch; ++b) {
    void* ab = at(a, b, a_bytes);
    void* sb = at(s, b, s_bytes);
    void* ub = vectors ? at(u, b, u_bytes) : scratch_u->data();
    TESSEL_CUDA_CHECK(cudaMemcpyAsync(saved->data(), ab, a_bytes, cudaMemcpyDeviceToDevice, c.s), op);
    double perturbation = 0.0;
    const cusolverStatus_t status =
        cusolverDnXgesvdp(c.h.solver, c.h.params, jobz, 1, m, n, t, ab, m, rt, sb, t, ub, m, t, v->data(), n, t,
                          work->data(), dev_bytes, hw, host_bytes, info + b, &perturbation);
    Real<T> largest = 0;
    if (status == CUSOLVER_STATUS_SUCCESS) {
      TESSEL_CUDA_CHECK(cudaMemcpyAsync(&largest, sb, sizeof(largest), cudaMemcpyDeviceToHost, c.s), op);
      TESSEL_CUDA_CHECK(cudaStreamSynchronize(c.s), op);
    }
    // NaN compares false: a NaN perturbation or largest value also goes to the fallback.
    const bool accepted = status == CUSOLVER_STATUS_SUCCESS && perturbation <= eps * static_cast<double>(largest);
    if (!accepted) {
      TESSEL_CUDA_CHECK(cudaMemcpyAsync(ab, saved->data(), a_bytes, cudaMemcpyDeviceToDevice, c.s), op);
      LinalgBatch one = p;
      one.batch = 1;
      svd_one_by_one<T>(c, one, ab, sb, vectors ? ub : nullptr, vectors ? at(vh, b, vh_bytes) : nullptr, vectors,
                        /*full=*/false, fallback, info + b, op);
      continue;
    }
    if (vectors) adjoint_batch(p.dtype, v->data(), n, at(vh, b, vh_bytes), n, n, 1, c.s);
  }
}

void svd_library(const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, bool full, std::int32_t* info,
                 const Stream& stream) {
  const char* op = "svd";
  Call c(stream, op);
  const std::int64_t k = p.n;
  const std::int64_t ucols = full ? p.m : k, vrows = full ? p.n : k;
  const std::size_t es = elem(p.dtype);
  const std::size_t bytes = es * static_cast<std::size_t>(p.m * p.n);
  const std::size_t s_bytes = elem(to_real(p.dtype)) * static_cast<std::size_t>(k);
  if (batched_route(LinalgOp::svd, p)) {
    const int m = to_int(p.m, op), n = to_int(p.n, op);
    const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    gesvdjInfo_t params = nullptr;
    TESSEL_CUSOLVER_CHECK(cusolverDnCreateGesvdjInfo(&params), op);
    std::unique_ptr<std::remove_pointer_t<gesvdjInfo_t>, void (*)(gesvdjInfo_t)> guard(
        params, [](gesvdjInfo_t q) { cusolverDnDestroyGesvdjInfo(q); });
    TESSEL_CUSOLVER_CHECK(cusolverDnXgesvdjSetMaxSweeps(params, kJacobiMaxSweeps), op);
    // gesvdjBatched writes full U (m x m) and V (n x n): Vh and the reduced U are taken from them.
    const bool direct_u = vectors && ucols == p.m;
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        auto full_u = direct_u ? nullptr : c.device_buffer(es * static_cast<std::size_t>(p.m * p.m * count));
        auto full_v = c.device_buffer(es * static_cast<std::size_t>(p.n * p.n * count));
        T* ab = reinterpret_cast<T*>(at(a, first, bytes));
        auto* sb = reinterpret_cast<Real<T>*>(at(s, first, s_bytes));
        T* ub = direct_u ? reinterpret_cast<T*>(at(u, first, es * static_cast<std::size_t>(p.m * p.m)))
                         : static_cast<T*>(full_u->data());
        T* vb = static_cast<T*>(full_v->data());
        int lwork = 0;
        TESSEL_CUSOLVER_CHECK(gesvdj_batched_size<T>(c.h.solver, jobz, m, n, ab, sb, ub, vb, &lwork, params,
                                                     static_cast<int>(count)),
                              op);
        auto work = c.device_buffer(static_cast<std::size_t>(lwork) * sizeof(T));
        TESSEL_CUSOLVER_CHECK(gesvdj_batched<T>(c.h.solver, jobz, m, n, ab, sb, ub, vb, static_cast<T*>(work->data()),
                                                lwork, info + first, params, static_cast<int>(count)),
                              op);
        if (!vectors) return;
        if (!direct_u) {  // the first ucols columns of each U
          TESSEL_CUDA_CHECK(cudaMemcpy2DAsync(at(u, first, es * static_cast<std::size_t>(p.m * ucols)),
                                              es * static_cast<std::size_t>(p.m * ucols), ub,
                                              es * static_cast<std::size_t>(p.m * p.m),
                                              es * static_cast<std::size_t>(p.m * ucols), static_cast<std::size_t>(count),
                                              cudaMemcpyDeviceToDevice, c.s),
                            op);
        }
        adjoint_batch(p.dtype, vb, p.n, at(vh, first, es * static_cast<std::size_t>(vrows * p.n)), vrows, p.n, count, c.s);
      });
    });
    return;
  }
  const SvdRoute route = svd_route(p, vectors, full);
  by_dtype(p.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    if (route.driver == SvdDriver::gesvdp) return svd_by_polar<T>(c, p, a, s, u, vh, vectors, info, op);
    // One matrix at a time, the batch split over streams.
    const std::size_t u_bytes = es * static_cast<std::size_t>(p.m * ucols);
    const std::size_t vh_bytes = es * static_cast<std::size_t>(vrows * p.n);
    in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
             [&](Call& part, std::int64_t first, std::int64_t count) {
      LinalgBatch sub = p;
      sub.batch = count;
      svd_one_by_one<T>(part, sub, at(a, first, bytes), at(s, first, s_bytes), vectors ? at(u, first, u_bytes) : nullptr,
                        vectors ? at(vh, first, vh_bytes) : nullptr, vectors, full, route, info + first, op);
    });
  });
}
}  // namespace

void svd(const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, bool full, std::int32_t* info,
         const Stream& stream) {
  if (p.m < p.n) throw Error("svd: internal error: the CUDA backend takes m >= n");
  // tessel's kernel writes the thin U: it serves everything but the full U of a tall matrix.
  if (small_jacobi_applies(SmallKernel::svd, p, vectors, stream.device()) && (p.m == p.n || !full || !vectors)) {
    return small_svd(p, a, s, u, vh, vectors, info, stream);
  }
  const NonfiniteInput nonfinite(p, a, stream);
  svd_library(p, a, s, u, vh, vectors, full, info, stream);
  nonfinite.poison(to_real(p.dtype), s, p.n, info);
  if (vectors) {
    nonfinite.poison(p.dtype, u, p.m * (full ? p.m : p.n), nullptr);
    nonfinite.poison(p.dtype, vh, p.n * p.n, nullptr);
  }
}

// ---- QR: geqrf, then Q from the Householder vectors ----
// Batched: cuBLAS geqrfBatched, then householder_q (linalg.cu) for the whole batch. Per matrix
// (the batch split over streams): Xgeqrf, then orgqr/ungqr on a copy of the Householder vectors.
void qr(const LinalgBatch& p, void* a, void* q, std::int64_t qcols, const Stream& stream) {
  const char* op = "qr";
  Call c(stream, op);
  const std::int64_t k = std::min(p.m, p.n);
  const std::size_t es = elem(p.dtype);
  const std::size_t bytes = es * static_cast<std::size_t>(p.m * p.n);
  const std::size_t q_bytes = es * static_cast<std::size_t>(p.m * qcols);
  const std::size_t copied = es * static_cast<std::size_t>(p.m * std::min(p.n, qcols));
  const cudaDataType t = data_type(p.dtype);
  const int m = to_int(p.m, op), qc = to_int(qcols, op), kk = to_int(k, op);
  if (batched_route(LinalgOp::qr, p)) {
    const int n = to_int(p.n, op);
    auto tau = c.device_buffer(es * static_cast<std::size_t>(k * p.batch));
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        auto ap = c.pointers(at(a, first, bytes), static_cast<std::int64_t>(bytes), count);
        auto tp = c.pointers(at(tau->data(), first * k, es), static_cast<std::int64_t>(es) * k, count);
        int arg_info = 0;  // host: argument validity only
        TESSEL_CUBLAS_CHECK(geqrf_batched<T>(c.h.blas, m, n, static_cast<T**>(ap->data()), m,
                                             static_cast<T**>(tp->data()), &arg_info, static_cast<int>(count)),
                            op);
        if (arg_info != 0) throw Error(fmt::format("qr: internal error: geqrfBatched rejected argument {}", -arg_info));
      });
    });
    householder_q(p.dtype, a, p.m, p.n, tau->data(), qcols, q, p.batch, c.s);
    return;
  }
  in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
           [&](Call& part, std::int64_t first, std::int64_t count) {
    auto tau = part.device_buffer(es * static_cast<std::size_t>(k));
    auto scratch_info = part.device_buffer(sizeof(int));
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXgeqrf_bufferSize(part.h.solver, part.h.params, p.m, p.n, t, a, p.m, t, tau->data(), t,
                                                      &dev_bytes, &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    HostWork host;
    void* hw = host.get(host_bytes);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      int lwork = 0;
      TESSEL_CUSOLVER_CHECK(orgqr_size<T>(part.h.solver, m, qc, kk, static_cast<T*>(q), static_cast<T*>(tau->data()), &lwork),
                            op);
      auto qwork = part.device_buffer(static_cast<std::size_t>(lwork) * sizeof(T));
      for (std::int64_t b = first; b < first + count; ++b) {
        TESSEL_CUSOLVER_CHECK(cusolverDnXgeqrf(part.h.solver, part.h.params, p.m, p.n, t, at(a, b, bytes), p.m, t,
                                               tau->data(), t, work->data(), dev_bytes, hw, host_bytes,
                                               static_cast<int*>(scratch_info->data())),
                              op);
        TESSEL_CUDA_CHECK(cudaMemcpyAsync(at(q, b, q_bytes), at(a, b, bytes), copied, cudaMemcpyDeviceToDevice, part.s), op);
        TESSEL_CUSOLVER_CHECK(orgqr<T>(part.h.solver, m, qc, kk, reinterpret_cast<T*>(at(q, b, q_bytes)),
                                       static_cast<const T*>(tau->data()), static_cast<T*>(qwork->data()), lwork,
                                       static_cast<int*>(scratch_info->data())),
                              op);
      }
    });
  });
}

// ---- eig: cusolverDnXgeev (right eigenvectors) ----
void eig(const LinalgBatch& p, void* a, void* w, void* v, bool vectors, std::int32_t* info, const Stream& stream) {
  const char* op = "eig";
  if (!is_complex(p.dtype)) throw Error("eig: internal error: the CUDA backend takes complex input");
  Call c(stream, op);
  const cudaDataType t = data_type(p.dtype);
  const cusolverEigMode_t jobvr = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const std::size_t es = elem(p.dtype);
  const std::size_t bytes = es * static_cast<std::size_t>(p.n * p.n);
  const std::size_t w_bytes = es * static_cast<std::size_t>(p.n);
  const std::int64_t ldvr = vectors ? p.n : 1;
  std::size_t dev_bytes = 0, host_bytes = 0;
  TESSEL_CUSOLVER_CHECK(cusolverDnXgeev_bufferSize(c.h.solver, c.h.params, CUSOLVER_EIG_MODE_NOVECTOR, jobvr, p.n, t, a,
                                                   p.n, t, w, t, nullptr, 1, t, v, ldvr, t, &dev_bytes, &host_bytes),
                        op);
  auto work = c.device_buffer(dev_bytes);
  HostWork host;
  void* hw = host.get(host_bytes);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    TESSEL_CUSOLVER_CHECK(cusolverDnXgeev(c.h.solver, c.h.params, CUSOLVER_EIG_MODE_NOVECTOR, jobvr, p.n, t, at(a, b, bytes),
                                          p.n, t, at(w, b, w_bytes), t, nullptr, 1, t,
                                          vectors ? at(v, b, bytes) : nullptr, ldvr, t, work->data(), dev_bytes, hw,
                                          host_bytes, info + b),
                          op);
  }
}

}  // namespace tessel::backend::cuda
