#pragma once
// The type-erased interface between the array layer and its backends (internal). The CPU
// backend (backend/cpu/copy.cpp) and the CUDA backend (backend/cuda/copy.cu) implement the same
// functions with the same signatures, in namespaces tessel::backend::cpu and tessel::backend::cuda.
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

}  // namespace tessel::detail

namespace tessel::backend {
using detail::StridedRef;

namespace cpu {
// dst = src elementwise; same shape and dtype (src may have zero strides). DTypeError when the
// dtypes differ: casting is the ops layer's (backend/cast.hpp).
void copy(const StridedRef& dst, const StridedRef& src, const Stream& stream);
// Every element of dst = the itemsize(dst.dtype) bytes at `value` (already in dst's dtype).
void fill(const StridedRef& dst, const void* value, const Stream& stream);
}  // namespace cpu

namespace cuda {
void copy(const StridedRef& dst, const StridedRef& src, const Stream& stream);
void fill(const StridedRef& dst, const void* value, const Stream& stream);
// Copies bytes between any two of host, pinned host and device memory (different GPUs through
// cudaMemcpyPeerAsync), asynchronously on stream. Pageable host memory makes CUDA copy
// synchronously, so the array layer stages it through pinned memory first.
void memcpy_async(void* dst, Device dst_device, const void* src, Device src_device, std::int64_t bytes,
                  const Stream& stream);
}  // namespace cuda
}  // namespace tessel::backend

namespace tessel::detail {

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

// dst[...] = src for arrays of one dtype: broadcasts src, works across devices. Asynchronous on
// stream. (Casting copies are tessel::copyto, in the ops layer.)
void copy_into(const Array& dst, const Array& src, const OptionalStream& stream);

// A new contiguous array allocated for use on `stream` (empty() with the stream already resolved).
Array allocate_array(const Shape& shape, DType dtype, Device device, const Stream& stream);  // transfer.cpp

}  // namespace tessel::detail
