#pragma once
// The type-erased interface between the array layer and its backends (internal). The CPU
// backend (backend/cpu/copy.cpp) and the CUDA backend (backend/cuda/copy.cu) implement the same
// functions with the same signatures, in namespaces cpu_backend and cuda_backend.
#include <cstdint>
#include <memory>

#include "tessel/array/array.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/array/scalar.hpp"
#include "tessel/array/shape.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::detail {

// One operand: the address of element (0, ..., 0), its dtype and its layout in elements.
struct StridedRef {
  void* data = nullptr;
  DType dtype = DType::float32;
  Shape shape;
  Strides strides;
};
StridedRef strided_ref(const Array& array);

namespace cpu_backend {
// dst = src elementwise; same shape (src may have zero strides); casts when the dtypes differ.
void copy(const StridedRef& dst, const StridedRef& src, const Stream& stream);
// Every element of dst = the itemsize(dst.dtype) bytes at `value` (already in dst's dtype).
void fill(const StridedRef& dst, const void* value, const Stream& stream);
// dst[i] = start + i * step, computed in int64 for integer dtypes and double (or complex) otherwise.
void arange(const StridedRef& dst, const Scalar& start, const Scalar& step, const Stream& stream);
// NumPy's linspace over dst's single axis.
void linspace(const StridedRef& dst, const Scalar& start, const Scalar& stop, bool endpoint, const Stream& stream);
}  // namespace cpu_backend

namespace cuda_backend {
void copy(const StridedRef& dst, const StridedRef& src, const Stream& stream);
void fill(const StridedRef& dst, const void* value, const Stream& stream);
void arange(const StridedRef& dst, const Scalar& start, const Scalar& step, const Stream& stream);
void linspace(const StridedRef& dst, const Scalar& start, const Scalar& stop, bool endpoint, const Stream& stream);
// Copies bytes between any two of host, pinned host and device memory (different GPUs through
// cudaMemcpyPeerAsync), asynchronously on stream. Pageable host memory makes CUDA copy
// synchronously, so the array layer stages it through pinned memory first.
void memcpy_async(void* dst, Device dst_device, const void* src, Device src_device, std::int64_t bytes,
                  const Stream& stream);
}  // namespace cuda_backend

// Keeps `keep_alive` (a pinned staging buffer, a source) alive until the work queued on
// `stream` so far has finished. Released lazily by later calls (never from a CUDA callback,
// which may not call into the runtime).
void release_after(const Stream& stream, std::shared_ptr<void> keep_alive);
// Releases what has finished; called by transfers and host waits.
void collect_finished_releases();

// The stream an op on `device` uses when none is given.
Stream resolve_stream(Device device, const OptionalStream& stream);
// DeviceError naming `op` and both devices when `stream` is not on `device`.
void check_stream_device(const Stream& stream, Device device, const char* op);

// A new contiguous array allocated for use on `stream` (empty() with the stream already resolved).
Array allocate_array(const Shape& shape, DType dtype, Device device, const Stream& stream);  // transfer.cpp

}  // namespace tessel::detail
