// CUDA backend for the array layer. Ahead-of-time kernels are kept tiny: a strided N-d copy and
// a fill, type-erased by itemsize (1, 2, 4, 8, 16 bytes), each with a 32-bit index path where it
// is provably safe and a 64-bit one. Contiguous copies go to cudaMemcpyAsync. (Casts are the ops
// layer's: backend/cuda/cast.cu.)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <complex>
#include <cstring>
#include <limits>
#include <utility>
#include <string>

#include "array/backend.hpp"
#include "backend/cuda/grid_stride.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {


namespace {

constexpr int max_kernel_dims = 16;
template <int Bytes> struct Item;
template <> struct Item<1> { using type = unsigned char; };
template <> struct Item<2> { using type = unsigned short; };
template <> struct Item<4> { using type = unsigned int; };
template <> struct Item<8> { using type = unsigned long long; };
// 8-byte alignment is all a complex128 is guaranteed (wrapped user memory), so two 8-byte words.
struct alignas(8) Pair64 {
  unsigned long long low, high;
};
template <> struct Item<16> { using type = Pair64; };

// Collapsed layout of up to two operands, passed by value as a kernel parameter.
struct KernelLayout {
  int ndim;
  long long shape[max_kernel_dims];
  long long strides[2][max_kernel_dims];
};

template <int Operands, class Index>
__device__ __forceinline__ void element_offsets(const KernelLayout& layout, Index linear, Index (&offsets)[Operands]) {
  for (int op = 0; op < Operands; ++op) offsets[op] = 0;
  for (int axis = layout.ndim - 1; axis >= 0; --axis) {
    const Index extent = static_cast<Index>(layout.shape[axis]);
    const Index coordinate = linear % extent;
    linear /= extent;
    for (int op = 0; op < Operands; ++op) offsets[op] += coordinate * static_cast<Index>(layout.strides[op][axis]);
  }
}

template <int Bytes, class Index>
__global__ void strided_copy_kernel(void* dst, const void* src, KernelLayout layout, Index count) {
  using T = typename Item<Bytes>::type;
  T* out = static_cast<T*>(dst);
  const T* in = static_cast<const T*>(src);
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    Index offsets[2];
    element_offsets<2>(layout, i, offsets);
    out[offsets[0]] = in[offsets[1]];
  }
}

template <int Bytes, class Index>
__global__ void fill_kernel(void* dst, typename Item<Bytes>::type value, KernelLayout layout, Index count) {
  using T = typename Item<Bytes>::type;
  T* out = static_cast<T*>(dst);
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    Index offsets[1];
    element_offsets<1>(layout, i, offsets);
    out[offsets[0]] = value;
  }
}

KernelLayout make_layout(const CollapsedDims& dims, const char* op) {
  if (dims.ndim() > max_kernel_dims) {
    throw ValueError(std::string(op) + ": " + std::to_string(dims.ndim()) +
                     " non-mergeable dimensions exceed the CUDA copy kernel's limit of " + std::to_string(max_kernel_dims));
  }
  KernelLayout layout{};
  layout.ndim = static_cast<int>(dims.ndim());
  for (int axis = 0; axis < layout.ndim; ++axis) {
    layout.shape[axis] = dims.shape[static_cast<std::size_t>(axis)];
    for (std::size_t op = 0; op < dims.strides.size(); ++op) {
      layout.strides[op][axis] = dims.strides[op][static_cast<std::size_t>(axis)];
    }
  }
  return layout;
}

// 32-bit indexing is safe when the element count plus one grid stride, and every operand's
// furthest offset, stay below 2^31.
bool fits_32bit_indexing(const CollapsedDims& dims, std::int64_t count, std::int64_t grid_threads) {
  constexpr std::int64_t limit = std::numeric_limits<std::int32_t>::max();
  if (count + grid_threads >= limit) return false;
  for (const Strides& strides : dims.strides) {
    const ElementExtent extent = element_extent(dims.shape, strides);
    if (extent.highest >= limit || extent.lowest <= -limit) return false;
  }
  return true;
}



// The last two axes of a copy swap which operand is contiguous (src unit-stride along the last
// axis, dst along the one before: a matrix transpose, as linalg's column-major copies make). The
// strided kernel then reads or writes 4 bytes of each 32-byte sector per warp instruction; a tile
// of 32 x 32 items in shared memory makes both sides whole rows of the tile. One block of 32 x 8
// threads per tile; blockIdx.z walks the batch axis (grid-stride beyond 65535).
constexpr int kTile = 32;
constexpr int kTileRows = 8;

struct TransposeLayout {
  long long rows, cols, batch;
  long long src_row_stride, dst_col_stride;  // src: (r, c) at r * src_row_stride + c; dst at r + c * dst_col_stride
  long long src_batch_stride, dst_batch_stride;
};

template <int Bytes>
__global__ void transpose_copy_kernel(void* dst, const void* src, TransposeLayout t) {
  using T = typename Item<Bytes>::type;
  __shared__ T tile[kTile][kTile + 1];  // +1: a column of the tile spans all banks
  const long long r0 = static_cast<long long>(blockIdx.y) * kTile, c0 = static_cast<long long>(blockIdx.x) * kTile;
  for (long long b = blockIdx.z; b < t.batch; b += gridDim.z) {
    const T* in = static_cast<const T*>(src) + b * t.src_batch_stride;
    T* out = static_cast<T*>(dst) + b * t.dst_batch_stride;
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const long long r = r0 + j, c = c0 + threadIdx.x;
      if (r < t.rows && c < t.cols) tile[j][threadIdx.x] = in[r * t.src_row_stride + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const long long c = c0 + j, r = r0 + threadIdx.x;
      if (r < t.rows && c < t.cols) out[r + c * t.dst_col_stride] = tile[threadIdx.x][j];
    }
    __syncthreads();  // the next batch entry refills the tile
  }
}

// The transpose layout of a collapsed copy (dst operand 0, src operand 1), if it is one: two or
// three axes, the last two each at least a tile wide (and within the grid's limits), unit strides
// crossed between the operands.
bool transpose_layout(const CollapsedDims& dims, TransposeLayout& t) {
  const auto n = dims.ndim();
  if (n != 2 && n != 3) return false;
  const std::size_t a = static_cast<std::size_t>(n - 2), b = static_cast<std::size_t>(n - 1);
  const Strides& d = dims.strides[0];
  const Strides& s = dims.strides[1];
  if (dims.shape[a] < kTile || dims.shape[b] < kTile) return false;
  if (std::max(dims.shape[a], dims.shape[b]) > 65535LL * kTile) return false;  // the rows' tiles: gridDim.y
  t.batch = n == 3 ? dims.shape[0] : 1;
  t.src_batch_stride = n == 3 ? s[0] : 0;
  t.dst_batch_stride = n == 3 ? d[0] : 0;
  if (s[b] == 1 && d[a] == 1) {  // rows along a, columns along b
    t.rows = dims.shape[a];
    t.cols = dims.shape[b];
    t.src_row_stride = s[a];
    t.dst_col_stride = d[b];
    return true;
  }
  if (s[a] == 1 && d[b] == 1) {  // the same with the two axes' roles exchanged
    t.rows = dims.shape[b];
    t.cols = dims.shape[a];
    t.src_row_stride = s[b];
    t.dst_col_stride = d[a];
    return true;
  }
  return false;
}

template <int Bytes>
void launch_transpose(void* dst, const void* src, const TransposeLayout& t, const Stream& stream) {
  const dim3 block(kTile, kTileRows);
  const dim3 grid(static_cast<unsigned>((t.cols + kTile - 1) / kTile), static_cast<unsigned>((t.rows + kTile - 1) / kTile),
                  static_cast<unsigned>(std::min<long long>(t.batch, 65535)));
  transpose_copy_kernel<Bytes><<<grid, block, 0, detail::cuda_stream(stream)>>>(dst, src, t);
  TESSEL_CUDA_CHECK_LAUNCH(detail::cuda_stream(stream), "copy");
}

template <int Bytes>
void launch_copy(void* dst, const void* src, const CollapsedDims& dims, std::int64_t count, const Stream& stream) {
  TransposeLayout transpose;
  if (transpose_layout(dims, transpose)) return launch_transpose<Bytes>(dst, src, transpose, stream);
  const KernelLayout layout = make_layout(dims, "copy");
  const unsigned grid = grid_stride_blocks(count, stream.device());
  if (fits_32bit_indexing(dims, count, static_cast<std::int64_t>(grid) * threads_per_block)) {
    strided_copy_kernel<Bytes, std::int32_t>
        <<<grid, threads_per_block, 0, detail::cuda_stream(stream)>>>(dst, src, layout, static_cast<std::int32_t>(count));
  } else {
    strided_copy_kernel<Bytes, std::int64_t><<<grid, threads_per_block, 0, detail::cuda_stream(stream)>>>(dst, src, layout, count);
  }
  TESSEL_CUDA_CHECK_LAUNCH(detail::cuda_stream(stream), "copy");
}

template <int Bytes>
void launch_fill(void* dst, const void* value, const CollapsedDims& dims, std::int64_t count, const Stream& stream) {
  typename Item<Bytes>::type pattern;
  std::memcpy(&pattern, value, Bytes);
  const KernelLayout layout = make_layout(dims, "fill");
  const unsigned grid = grid_stride_blocks(count, stream.device());
  if (fits_32bit_indexing(dims, count, static_cast<std::int64_t>(grid) * threads_per_block)) {
    fill_kernel<Bytes, std::int32_t>
        <<<grid, threads_per_block, 0, detail::cuda_stream(stream)>>>(dst, pattern, layout, static_cast<std::int32_t>(count));
  } else {
    fill_kernel<Bytes, std::int64_t><<<grid, threads_per_block, 0, detail::cuda_stream(stream)>>>(dst, pattern, layout, count);
  }
  TESSEL_CUDA_CHECK_LAUNCH(detail::cuda_stream(stream), "fill");
}

void same_dtype_copy(const StridedRef& dst, const StridedRef& src, const Stream& stream) {
  const std::int64_t count = numel(dst.shape);
  if (count == 0) return;
  const std::int64_t bytes = count * itemsize(dst.dtype);
  if (is_contiguous(dst.shape, dst.strides) && is_contiguous(src.shape, src.strides)) {
    TESSEL_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice,
                                      detail::cuda_stream(stream)),
                      "copy");
    return;
  }
  const CollapsedDims dims = collapse_dims(dst.shape, {dst.strides, src.strides});
  switch (itemsize(dst.dtype)) {
    case 1: return launch_copy<1>(dst.data, src.data, dims, count, stream);
    case 2: return launch_copy<2>(dst.data, src.data, dims, count, stream);
    case 4: return launch_copy<4>(dst.data, src.data, dims, count, stream);
    case 8: return launch_copy<8>(dst.data, src.data, dims, count, stream);
    case 16: return launch_copy<16>(dst.data, src.data, dims, count, stream);
    default: throw DTypeError(std::string("copy: unsupported itemsize for dtype ") + dtype_name(dst.dtype));
  }
}

void check_cuda_stream(const Stream& stream, const char* op) {
  if (!stream.device().is_cuda()) {
    throw DeviceError(std::string(op) + ": the CUDA backend needs a CUDA stream, got one on " + stream.device().str());
  }
}

}  // namespace

void memcpy_async(void* dst, Device dst_device, const void* src, Device src_device, std::int64_t bytes,
                  const Stream& stream) {
  if (bytes == 0) return;
  DeviceGuard guard(stream.device());
  const auto size = static_cast<std::size_t>(bytes);
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device != src_device) {
    peer_access(dst_device, src_device);  // enabled on the pair's first copy; else the driver stages it
    TESSEL_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, size, detail::cuda_stream(stream)), "copy between devices");
    return;
  }
  // Unified addressing: the runtime infers the direction from the pointers.
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, detail::cuda_stream(stream)), "copy");
}

void copy(const StridedRef& dst, const StridedRef& src, const Stream& stream) {
  check_cuda_stream(stream, "copy");
  if (dst.shape != src.shape) {
    throw ShapeError("copy: destination shape " + shape_str(dst.shape) + " differs from source shape " +
                     shape_str(src.shape));
  }
  if (numel(dst.shape) == 0) return;
  DeviceGuard guard(stream.device());
  if (dst.dtype != src.dtype) {
    throw DTypeError(std::string("copy: destination dtype ") + dtype_name(dst.dtype) + " differs from source dtype " +
                     dtype_name(src.dtype) + " (casting is the ops layer's)");
  }
  same_dtype_copy(dst, src, stream);
}

void fill(const StridedRef& dst, const void* value, const Stream& stream) {
  check_cuda_stream(stream, "fill");
  const std::int64_t count = numel(dst.shape);
  if (count == 0) return;
  DeviceGuard guard(stream.device());
  const CollapsedDims dims = collapse_dims(dst.shape, {dst.strides});
  switch (itemsize(dst.dtype)) {
    case 1: return launch_fill<1>(dst.data, value, dims, count, stream);
    case 2: return launch_fill<2>(dst.data, value, dims, count, stream);
    case 4: return launch_fill<4>(dst.data, value, dims, count, stream);
    case 8: return launch_fill<8>(dst.data, value, dims, count, stream);
    case 16: return launch_fill<16>(dst.data, value, dims, count, stream);
    default: throw DTypeError(std::string("fill: unsupported itemsize for dtype ") + dtype_name(dst.dtype));
  }
}

}  // namespace tessel::backend::cuda
