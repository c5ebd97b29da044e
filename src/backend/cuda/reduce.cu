// CUDA reductions and scans over the canonical (outer, len, inner) block (backend/reduce.hpp).
//
// Ahead-of-time templates over the four compute dtypes (int64, uint64, float32, float64) and a
// small set of reduction functors; every reduction runs as
//   pass 1: partial results, grid-stride over the reduced axis, written to a CUB-free workspace
//           from Buffer (or the final output when one block covers a whole output), then
//   pass 2: one block per output combines its partials and finishes (mean, var, sqrt...).
// Layout-specific pass-1 kernels:
//   inner == 1 (contiguous rows, full reductions): blocks of 256 threads per (row, chunk), with
//     16-byte vectorized loads on the aligned middle of each chunk and 4 loads in flight;
//     short rows use one warp per row instead.
//   inner > 1 (outer axes): threads across the contiguous inner dimension, each looping over
//     the reduced axis, so every load is coalesced; the reduced axis is split across blocks when
//     there are too few outputs to fill the GPU.
// Scans use cub::DeviceScan (by key for batched rows). Temporaries come from Buffer.
#include <cuda_runtime_api.h>

#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cuda/std/limits>
#include <memory>
#include <string>
#include <type_traits>

#include "backend/reduce.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {
namespace {

constexpr int block_threads = 256;
constexpr int warps_per_block = block_threads / 32;

template <class T>
__device__ __forceinline__ bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    (void)x;
    return false;
  }
}

template <class T>
__device__ __forceinline__ T quiet_nan() {
  if constexpr (std::is_floating_point_v<T>) {
    return ::cuda::std::numeric_limits<T>::quiet_NaN();
  } else {
    return T{};
  }
}

// ---- reduction functors: identity, transform(x, position), combine, finish(acc, output) ----
// Accumulators are trivially copyable structs, shuffled word by word.

template <class T, bool SkipNan>
struct SumOp {
  using Acc = T;
  __device__ Acc identity() const { return T{0}; }
  __device__ Acc transform(T x, long long) const { return SkipNan && is_nan(x) ? T{0} : x; }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ void finish(Acc a, long long o, void* out) const { static_cast<T*>(out)[o] = a; }
};

template <class T, bool SkipNan>
struct ProdOp {
  using Acc = T;
  __device__ Acc identity() const { return T{1}; }
  __device__ Acc transform(T x, long long) const { return SkipNan && is_nan(x) ? T{1} : x; }
  __device__ Acc combine(Acc a, Acc b) const { return a * b; }
  __device__ void finish(Acc a, long long o, void* out) const { static_cast<T*>(out)[o] = a; }
};

// min/max. Propagating: NaN wins. Skipping: the identity is NaN and NaN loses, so an all-NaN
// slice ends as NaN (NumPy's nanmin result) without a separate count.
template <class T, bool Min, bool SkipNan>
struct ExtremumOp {
  using Acc = T;
  __device__ Acc identity() const {
    if constexpr (std::is_floating_point_v<T>) {
      return SkipNan ? quiet_nan<T>() : (Min ? ::cuda::std::numeric_limits<T>::infinity() : -::cuda::std::numeric_limits<T>::infinity());
    } else {
      return Min ? ::cuda::std::numeric_limits<T>::max() : ::cuda::std::numeric_limits<T>::lowest();
    }
  }
  __device__ Acc transform(T x, long long) const { return x; }
  __device__ Acc combine(Acc a, Acc b) const {
    if (is_nan(a)) return SkipNan ? b : a;
    if (is_nan(b)) return SkipNan ? a : b;
    return Min ? (b < a ? b : a) : (b > a ? b : a);
  }
  __device__ void finish(Acc a, long long o, void* out) const { static_cast<T*>(out)[o] = a; }
};

template <class T, bool Any>
struct LogicalOp {
  using Acc = int;
  __device__ Acc identity() const { return Any ? 0 : 1; }
  __device__ Acc transform(T x, long long) const { return x != T{0} ? 1 : 0; }
  __device__ Acc combine(Acc a, Acc b) const { return Any ? (a | b) : (a & b); }
  __device__ void finish(Acc a, long long o, void* out) const { static_cast<bool*>(out)[o] = a != 0; }
};

template <class T>
struct ValueIndex {
  T value;
  long long index;  // -1: nothing yet
};

// First occurrence: ties and NaN-vs-NaN go to the smaller index.
template <class T, bool Min, bool SkipNan>
struct ArgOp {
  using Acc = ValueIndex<T>;
  __device__ Acc identity() const { return {T{0}, -1}; }
  __device__ Acc transform(T x, long long k) const {
    if (SkipNan && is_nan(x)) return identity();
    return {x, k};
  }
  __device__ Acc combine(Acc a, Acc b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool first_a = a.index < b.index;
    if (!SkipNan) {
      const bool na = is_nan(a.value), nb = is_nan(b.value);
      if (na && nb) return first_a ? a : b;
      if (na) return a;
      if (nb) return b;
    }
    if (Min ? a.value < b.value : a.value > b.value) return a;
    if (Min ? b.value < a.value : b.value > a.value) return b;
    return first_a ? a : b;
  }
  __device__ void finish(Acc a, long long o, void* out) const { static_cast<long long*>(out)[o] = a.index; }
};

template <class T>
struct SumCount {
  T sum;
  long long count;
};

template <class T, bool SkipNan>
struct MeanOp {
  using Acc = SumCount<T>;
  __device__ Acc identity() const { return {T{0}, 0}; }
  __device__ Acc transform(T x, long long) const {
    if (SkipNan && is_nan(x)) return identity();
    return {x, 1};
  }
  __device__ Acc combine(Acc a, Acc b) const { return {a.sum + b.sum, a.count + b.count}; }
  __device__ void finish(Acc a, long long o, void* out) const {
    static_cast<T*>(out)[o] = a.count > 0 ? static_cast<T>(a.sum / static_cast<T>(a.count)) : quiet_nan<T>();
  }
};

// Sum of squared deviations from the per-output mean (second pass of var/std).
template <class T, bool SkipNan, bool Sqrt>
struct VarOp {
  using Acc = SumCount<T>;
  const T* mean;
  long long inner;  // position -> output: the kernels pass the output index in `position`
  long long ddof;
  __device__ Acc identity() const { return {T{0}, 0}; }
  __device__ Acc transform(T x, long long output) const {
    if (SkipNan && is_nan(x)) return identity();
    const T d = x - mean[output];
    return {d * d, 1};
  }
  __device__ Acc combine(Acc a, Acc b) const { return {a.sum + b.sum, a.count + b.count}; }
  __device__ void finish(Acc a, long long o, void* out) const {
    const long long dof = a.count - ddof;
    T v = dof > 0 ? static_cast<T>(a.sum / static_cast<T>(dof)) : quiet_nan<T>();
    if (Sqrt) v = sqrt(v);
    static_cast<T*>(out)[o] = v;
  }
};

// Whether transform() wants the element's position along the reduced axis (arg ops) or the
// output index (var); everything else ignores it.
template <class Op> struct WantsOutputIndex : std::false_type {};
template <class T, bool S, bool Q> struct WantsOutputIndex<VarOp<T, S, Q>> : std::true_type {};

// ---- warp and block combination of trivially copyable accumulators ----

template <class Acc>
__device__ __forceinline__ Acc shuffle_down(Acc value, int delta) {
  constexpr int words = (sizeof(Acc) + 3) / 4;
  int raw[words] = {};
  memcpy(raw, &value, sizeof(Acc));
#pragma unroll
  for (int i = 0; i < words; ++i) raw[i] = __shfl_down_sync(0xffffffffu, raw[i], delta);
  Acc result;
  memcpy(&result, raw, sizeof(Acc));
  return result;
}

template <class Op>
__device__ __forceinline__ typename Op::Acc warp_combine(const Op& op, typename Op::Acc acc) {
#pragma unroll
  for (int delta = 16; delta > 0; delta >>= 1) acc = op.combine(acc, shuffle_down(acc, delta));
  return acc;
}

// Combines over the block; the result is valid in thread 0. Lane order is kept (lower lanes
// first), which arg ops need for first-occurrence ties.
template <class Op>
__device__ typename Op::Acc block_combine(const Op& op, typename Op::Acc acc) {
  using Acc = typename Op::Acc;
  __shared__ alignas(16) unsigned char scratch[warps_per_block * sizeof(Acc)];
  Acc* partial = reinterpret_cast<Acc*>(scratch);
  acc = warp_combine(op, acc);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < warps_per_block ? partial[lane] : op.identity();
    acc = warp_combine(op, acc);
  }
  return acc;
}

// ---- pass 1 ----

// Contiguous rows: block (chunk, row) reduces elements [begin, end) of its row. Writes the
// finished result when the row has one chunk, else a partial at partials[row * chunks + chunk].
template <class T, class Op>
__global__ void __launch_bounds__(block_threads)
    row_chunk_kernel(Op op, const T* __restrict__ in, long long len, long long chunk_len, long long chunks,
                     typename Op::Acc* partials, void* out) {
  using Acc = typename Op::Acc;
  // A 1-D grid (row-major over (row, chunk)) so neither count is capped at 65535.
  const long long row = static_cast<long long>(blockIdx.x) / chunks;
  const long long chunk = static_cast<long long>(blockIdx.x) % chunks;
  const long long begin = chunk * chunk_len;
  const long long end = min(len, begin + chunk_len);
  const T* base = in + row * len;
  const long long tag_row = WantsOutputIndex<Op>::value ? row : 0;
  Acc acc = op.identity();
  if constexpr (sizeof(T) <= 16 && !std::is_same_v<Acc, ValueIndex<T>>) {
    // Order does not matter here (only arg ops need positions), so 16-byte vector loads cover
    // the aligned middle: a scalar head up to the first 16-byte boundary, then vectors, then a tail.
    constexpr int per_vec = 16 / sizeof(T);
    const long long misalign = (reinterpret_cast<std::uintptr_t>(base + begin) % 16) / sizeof(T);
    const long long head = min(misalign == 0 ? 0 : per_vec - misalign, end - begin);
    for (long long k = begin + threadIdx.x; k < begin + head; k += blockDim.x) {
      acc = op.combine(acc, op.transform(base[k], tag_row));
    }
    const long long vec_begin = begin + head;
    const long long vecs = (end - vec_begin) / per_vec;
    const uint4* vin = reinterpret_cast<const uint4*>(base + vec_begin);
    constexpr int unroll = 4;
    long long v = threadIdx.x;
    // Several independent 16-byte loads in flight per thread before any arithmetic.
    for (; v + (unroll - 1) * blockDim.x < vecs; v += unroll * blockDim.x) {
      uint4 loaded[unroll];
#pragma unroll
      for (int u = 0; u < unroll; ++u) loaded[u] = __ldg(vin + v + u * blockDim.x);
#pragma unroll
      for (int u = 0; u < unroll; ++u) {
        T items[per_vec];
        memcpy(items, &loaded[u], 16);
#pragma unroll
        for (int i = 0; i < per_vec; ++i) acc = op.combine(acc, op.transform(items[i], tag_row));
      }
    }
    for (; v < vecs; v += blockDim.x) {
      const uint4 loaded = __ldg(vin + v);
      T items[per_vec];
      memcpy(items, &loaded, 16);
#pragma unroll
      for (int i = 0; i < per_vec; ++i) acc = op.combine(acc, op.transform(items[i], tag_row));
    }
    for (long long k = vec_begin + vecs * per_vec + threadIdx.x; k < end; k += blockDim.x) {
      acc = op.combine(acc, op.transform(base[k], tag_row));
    }
  } else {
    // Arg ops: each thread walks a contiguous stretch so its own candidates are in index order,
    // and block_combine keeps thread order, so ties resolve to the first occurrence.
    const long long n = end - begin;
    const long long per_thread = (n + blockDim.x - 1) / blockDim.x;
    const long long my_begin = begin + threadIdx.x * per_thread;
    const long long my_end = min(end, my_begin + per_thread);
    for (long long k = my_begin; k < my_end; ++k) acc = op.combine(acc, op.transform(base[k], k));
  }
  acc = block_combine(op, acc);
  if (threadIdx.x == 0) {
    if (chunks == 1) op.finish(acc, row, out);
    else partials[row * chunks + chunk] = acc;
  }
}

// Short contiguous rows: one warp per row, finished directly.
template <class T, class Op>
__global__ void __launch_bounds__(block_threads)
    row_warp_kernel(Op op, const T* __restrict__ in, long long rows, long long len, void* out) {
  using Acc = typename Op::Acc;
  const long long row = static_cast<long long>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* base = in + row * len;
  Acc acc = op.identity();
  // Lane-strided order: lane l sees positions l, l+32, ... For arg ops each lane's candidates
  // are in order, and the combine breaks value ties by index, so the result is still the first.
  for (long long k = lane; k < len; k += 32) {
    acc = op.combine(acc, op.transform(base[k], WantsOutputIndex<Op>::value ? row : k));
  }
  acc = warp_combine(op, acc);
  if (lane == 0) op.finish(acc, row, out);
}

// Outer axes: thread per (outer, inner) column; blockIdx.z splits the reduced axis.
template <class T, class Op>
__global__ void __launch_bounds__(block_threads)
    column_kernel(Op op, const T* __restrict__ in, long long outer_count, long long len, long long inner,
                  long long split_len, long long splits, typename Op::Acc* partials, void* out) {
  using Acc = typename Op::Acc;
  // grid.x runs over (outer, column block) so the outer count is not capped at 65535.
  const long long column_blocks = (inner + blockDim.x - 1) / blockDim.x;
  const long long outer = static_cast<long long>(blockIdx.x) / column_blocks;
  const long long column = (static_cast<long long>(blockIdx.x) % column_blocks) * blockDim.x + threadIdx.x;
  if (column >= inner || outer >= outer_count) return;
  const long long split = blockIdx.z;
  const long long begin = split * split_len;
  const long long end = min(len, begin + split_len);
  const long long output = outer * inner + column;
  const T* base = in + outer * len * inner + column;
  Acc acc = op.identity();
  for (long long k = begin; k < end; ++k) {
    acc = op.combine(acc, op.transform(__ldg(base + k * inner), WantsOutputIndex<Op>::value ? output : k));
  }
  if (splits == 1) op.finish(acc, output, out);
  else partials[output * splits + split] = acc;
}

// ---- pass 2: one block per output over its partials, in order ----
template <class Op>
__global__ void __launch_bounds__(block_threads)
    finish_kernel(Op op, const typename Op::Acc* partials, long long parts, void* out) {
  using Acc = typename Op::Acc;
  const long long output = blockIdx.x;
  // Contiguous stretches per thread keep partials in order for arg ops.
  const long long per_thread = (parts + blockDim.x - 1) / blockDim.x;
  const long long begin = threadIdx.x * per_thread;
  const long long end = min(parts, begin + per_thread);
  Acc acc = op.identity();
  for (long long p = begin; p < end; ++p) acc = op.combine(acc, partials[output * parts + p]);
  acc = block_combine(op, acc);
  if (threadIdx.x == 0) op.finish(acc, output, out);
}

int sm_count(const Stream& stream) {
  int device = stream.device().index;
  int count = 0;
  TESSEL_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device), "reduce");
  return count;
}

template <class T, class Op>
void run(const Op& op, const ReduceProblem& p, const Stream& stream) {
  using Acc = typename Op::Acc;
  const auto s = detail::cuda_stream(stream);
  const T* in = static_cast<const T*>(p.in);
  const long long outputs = p.outer * p.inner;
  // Enough resident blocks to cover memory latency: a few waves of 256-thread blocks.
  const long long target_blocks = static_cast<long long>(sm_count(stream)) * 8;
  std::shared_ptr<Buffer> workspace;
  if (p.inner == 1) {
    if (p.len <= 1024 && p.outer >= target_blocks) {
      const long long blocks = (p.outer + warps_per_block - 1) / warps_per_block;
      row_warp_kernel<T, Op><<<static_cast<unsigned>(blocks), block_threads, 0, s>>>(op, in, p.outer, p.len, p.out);
      TESSEL_CUDA_CHECK_LAUNCH(s, "reduce");
      return;
    }
    // Chunks per row: enough blocks overall, but each chunk at least 16 KiB of data.
    const long long min_chunk = std::max<long long>(1, 16384 / static_cast<long long>(sizeof(T)));
    long long chunks = std::max<long long>(1, std::min((target_blocks + p.outer - 1) / p.outer,
                                                       (p.len + min_chunk - 1) / min_chunk));
    chunks = std::min<long long>(chunks, 65535);
    long long chunk_len = (p.len + chunks - 1) / chunks;
    // A multiple of 16 elements keeps chunk starts 16-byte aligned when the row is; at least 16
    // so an empty row (len 0: sum -> 0, mean -> NaN) still gets one chunk.
    chunk_len = std::max<long long>(16, (chunk_len + 15) / 16 * 16);
    chunks = std::max<long long>(1, (p.len + chunk_len - 1) / chunk_len);
    Acc* partials = nullptr;
    if (chunks > 1) {
      workspace = Buffer::allocate(stream.device(), outputs * chunks * static_cast<long long>(sizeof(Acc)), stream);
      partials = static_cast<Acc*>(workspace->data());
    }
    row_chunk_kernel<T, Op><<<static_cast<unsigned>(chunks * p.outer), block_threads, 0, s>>>(
        op, in, p.len, chunk_len, chunks, partials, p.out);
    TESSEL_CUDA_CHECK_LAUNCH(s, "reduce");
    if (chunks > 1) {
      finish_kernel<Op><<<static_cast<unsigned>(outputs), block_threads, 0, s>>>(op, partials, chunks, p.out);
      TESSEL_CUDA_CHECK_LAUNCH(s, "reduce");
    }
    return;
  }
  const long long column_blocks = (p.inner + block_threads - 1) / block_threads;
  long long splits = 1;
  if (column_blocks * p.outer < target_blocks && p.len > 64) {
    splits = std::min<long long>((target_blocks + column_blocks * p.outer - 1) / (column_blocks * p.outer), p.len / 32);
    splits = std::max<long long>(1, std::min<long long>(splits, 65535));
  }
  const long long split_len = std::max<long long>(1, (p.len + splits - 1) / splits);  // len 0: one split
  splits = std::max<long long>(1, (p.len + split_len - 1) / split_len);
  Acc* partials = nullptr;
  if (splits > 1) {
    workspace = Buffer::allocate(stream.device(), outputs * splits * static_cast<long long>(sizeof(Acc)), stream);
    partials = static_cast<Acc*>(workspace->data());
  }
  const dim3 grid(static_cast<unsigned>(column_blocks * p.outer), 1, static_cast<unsigned>(splits));
  column_kernel<T, Op><<<grid, block_threads, 0, s>>>(op, in, p.outer, p.len, p.inner, split_len, splits, partials, p.out);
  TESSEL_CUDA_CHECK_LAUNCH(s, "reduce");
  if (splits > 1) {
    finish_kernel<Op><<<static_cast<unsigned>(outputs), block_threads, 0, s>>>(op, partials, splits, p.out);
    TESSEL_CUDA_CHECK_LAUNCH(s, "reduce");
  }
}

template <class T>
void reduce_typed(const ReduceProblem& p, const Stream& stream) {
  const T* mean = static_cast<const T*>(p.mean);
  switch (p.op) {
    case ReduceOp::sum: return run<T>(SumOp<T, false>{}, p, stream);
    case ReduceOp::nansum: return run<T>(SumOp<T, true>{}, p, stream);
    case ReduceOp::prod: return run<T>(ProdOp<T, false>{}, p, stream);
    case ReduceOp::nanprod: return run<T>(ProdOp<T, true>{}, p, stream);
    case ReduceOp::min: return run<T>(ExtremumOp<T, true, false>{}, p, stream);
    case ReduceOp::max: return run<T>(ExtremumOp<T, false, false>{}, p, stream);
    case ReduceOp::nanmin: return run<T>(ExtremumOp<T, true, true>{}, p, stream);
    case ReduceOp::nanmax: return run<T>(ExtremumOp<T, false, true>{}, p, stream);
    case ReduceOp::any: return run<T>(LogicalOp<T, true>{}, p, stream);
    case ReduceOp::all: return run<T>(LogicalOp<T, false>{}, p, stream);
    case ReduceOp::argmin: return run<T>(ArgOp<T, true, false>{}, p, stream);
    case ReduceOp::argmax: return run<T>(ArgOp<T, false, false>{}, p, stream);
    case ReduceOp::nanargmin: return run<T>(ArgOp<T, true, true>{}, p, stream);
    case ReduceOp::nanargmax: return run<T>(ArgOp<T, false, true>{}, p, stream);
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (p.op) {
      case ReduceOp::mean: return run<T>(MeanOp<T, false>{}, p, stream);
      case ReduceOp::nanmean: return run<T>(MeanOp<T, true>{}, p, stream);
      case ReduceOp::var: return run<T>(VarOp<T, false, false>{mean, p.inner, p.ddof}, p, stream);
      case ReduceOp::nanvar: return run<T>(VarOp<T, true, false>{mean, p.inner, p.ddof}, p, stream);
      case ReduceOp::std: return run<T>(VarOp<T, false, true>{mean, p.inner, p.ddof}, p, stream);
      case ReduceOp::nanstd: return run<T>(VarOp<T, true, true>{mean, p.inner, p.ddof}, p, stream);
      default: break;
    }
  }
  throw DTypeError(std::string("reduce: internal error, op not available for compute dtype ") + dtype_name(p.dtype));
}

// ---- scans ----

struct RowOf {
  long long len;
  __host__ __device__ long long operator()(long long i) const { return i / len; }
};

struct Multiply {
  template <class T>
  __host__ __device__ T operator()(const T& a, const T& b) const { return a * b; }
};

template <class T>
void scan_typed(const ScanProblem& p, const Stream& stream) {
  const auto s = detail::cuda_stream(stream);
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const long long n = p.rows * p.len;
  const auto keys = thrust::make_transform_iterator(thrust::make_counting_iterator<long long>(0), RowOf{p.len});
  // Two-phase CUB call: size the temporary, then run with it from the caching allocator.
  auto call = [&](void* temp, std::size_t& bytes) -> cudaError_t {
    if (p.rows == 1) {
      if (p.op == ScanOp::cumsum) return cub::DeviceScan::InclusiveSum(temp, bytes, in, out, n, s);
      return cub::DeviceScan::InclusiveScan(temp, bytes, in, out, Multiply{}, n, s);
    }
    if (p.op == ScanOp::cumsum) return cub::DeviceScan::InclusiveSumByKey(temp, bytes, keys, in, out, n, ::cuda::std::equal_to<>{}, s);
    return cub::DeviceScan::InclusiveScanByKey(temp, bytes, keys, in, out, Multiply{}, n, ::cuda::std::equal_to<>{}, s);
  };
  std::size_t bytes = 0;
  TESSEL_CUDA_CHECK(call(nullptr, bytes), "cumsum/cumprod");
  auto temp = Buffer::allocate(stream.device(), static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1)), stream);
  TESSEL_CUDA_CHECK(call(temp->data(), bytes), "cumsum/cumprod");
}

template <class F>
void dispatch_compute(DType dtype, F&& f) {
  switch (dtype) {
    case DType::int64: return f(static_cast<long long*>(nullptr));
    case DType::uint64: return f(static_cast<unsigned long long*>(nullptr));
    case DType::float32: return f(static_cast<float*>(nullptr));
    case DType::float64: return f(static_cast<double*>(nullptr));
    default: throw DTypeError(std::string("reduce: internal error, compute dtype ") + dtype_name(dtype));
  }
}

}  // namespace

void reduce(const ReduceProblem& problem, const Stream& stream) {
  DeviceGuard guard(stream.device());  // kernels and CUB launch on the current device
  dispatch_compute(problem.dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    reduce_typed<T>(problem, stream);
  });
}

void scan(const ScanProblem& problem, const Stream& stream) {
  DeviceGuard guard(stream.device());  // kernels and CUB launch on the current device
  dispatch_compute(problem.dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    scan_typed<T>(problem, stream);
  });
}

}  // namespace tessel::backend::cuda
