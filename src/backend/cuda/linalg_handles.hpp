#pragma once
// The calling context of the CUDA linear algebra's library routes (linalg.cpp, linalg_route.cpp):
// cuSOLVER's status check, the handle sets per (device, CUDA stream), a call's context (Call),
// splitting a batched call over streams (in_parts), and the small helpers of the drivers. The
// typed cuSOLVER / cuBLAS wrappers are in linalg_cusolver.hpp, the route choices in
// linalg_route.hpp.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_libraries.hpp"
#include "backend/cuda/tuning/linalg_routes.hpp"
#include "backend/linalg.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {

// Throws CudaError naming op, the call and cuSOLVER's status unless it is CUSOLVER_STATUS_SUCCESS.
void check_cusolver(cusolverStatus_t status, const char* op, const char* expr, const char* file, int line);
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

// The handle set of `stream` (made on first use, kept for the process; linalg_handles.cpp).
Handles& handles_for(const Stream& stream, const char* op);

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
Stream make_side_stream(const Stream& caller);

// How many parts a call of `batch` matrices on c's stream runs in: config().linalg_streams
// (TESSEL_LINALG_STREAMS, set_linalg_streams), at most one per min_part matrices, and 1
// while a CUDA graph capture is active on this thread or records the stream. Forking onto other
// streams with events is legal in a capture (the side streams join it), but the side streams'
// workspaces would need memory in their own pools, which the capture's reserve (made in the
// captured stream's pool) does not cover and which cudaMalloc cannot provide while capturing;
// the first split call would also create streams, events and cuSOLVER handles (device
// allocations) inside the capture. So a captured call stays on one stream; capturing the parts as
// parallel branches would need memory reserved in the side streams' pools first.
int batch_parts(const Call& c, std::int64_t batch, std::int64_t min_part = tuning::kMinPartBatch);

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

cudaDataType data_type(DType dtype);
cudaDataType real_type(DType dtype);
// v as an int; ValueError naming op above INT_MAX.
int to_int(std::int64_t v, const char* op);

// Runs f(first, count) over chunks of at most INT_MAX matrices (the batched routines count in int).
template <class F>
void in_chunks(std::int64_t batch, F&& f) {
  for (std::int64_t first = 0; first < batch; first += INT_MAX) f(first, std::min<std::int64_t>(INT_MAX, batch - first));
}

inline std::size_t elem(DType dtype) { return static_cast<std::size_t>(itemsize(dtype)); }
inline char* at(void* base, std::int64_t index, std::size_t bytes) {
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

}  // namespace tessel::backend::cuda
