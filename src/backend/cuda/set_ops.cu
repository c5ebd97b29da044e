// CUDA set functions and repeat. unique: the ops layer radix-sorts the keys (with their input
// positions when indices or inverse are wanted); here one cub::DeviceScan over the run-start flags
// (computed on the fly from adjacent keys, never stored) gives every sorted position its value's
// rank, the last rank is read back as the output size, and one kernel writes values, first
// indices, inverse indices and run ends. isin: x2 is radix-sorted by the ops layer; one kernel
// binary-searches every x1 element, first in every 64th key of x2, then in the 64 keys that
// narrows it to.
#include <cuda_runtime_api.h>

#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "backend/set_ops.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {
namespace {

constexpr int block_threads = 256;

unsigned blocks_for(long long n) {
  return static_cast<unsigned>(std::max<long long>(1, std::min<long long>((n + block_threads - 1) / block_threads, 1LL << 20)));
}


template <class F>
void dispatch_key(DType dtype, F&& f) {
  switch (dtype) {
    case DType::int32: return f(static_cast<int*>(nullptr));
    case DType::int64: return f(static_cast<long long*>(nullptr));
    case DType::uint32: return f(static_cast<unsigned*>(nullptr));
    case DType::uint64: return f(static_cast<unsigned long long*>(nullptr));
    case DType::float32: return f(static_cast<float*>(nullptr));
    case DType::float64: return f(static_cast<double*>(nullptr));
    default: throw DTypeError(std::string("unique/isin: internal error, key dtype ") + dtype_name(dtype));
  }
}

// 1 where sorted position i starts a new value (value equality: each NaN starts its own run).
template <class T>
struct RunStart {
  const T* sorted;
  __host__ __device__ long long operator()(long long i) const {
    return (i == 0 || !(sorted[i - 1] == sorted[i])) ? 1 : 0;
  }
};

template <class T>
__global__ void unique_write_kernel(const T* sorted, const long long* order, const long long* rank, long long n,
                                    T* values, long long* indices, long long* inverse, long long* ends,
                                    long long* starts) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = rank[i] - 1;
    const T key = sorted[i];
    if (i == 0 || !(sorted[i - 1] == key)) {
      if (values) values[r] = key;
      if (indices) indices[r] = order[i];
      if (starts) starts[r] = i;
    }
    if (inverse) inverse[order[i]] = r;
    if (ends && (i + 1 == n || !(key == sorted[i + 1]))) ends[r] = i + 1;
  }
}

__global__ void counts_kernel(long long* counts, const long long* starts, long long count) {
  for (long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; r < count;
       r += static_cast<long long>(gridDim.x) * blockDim.x) {
    counts[r] -= starts[r];
  }
}

// a < b with NaN greater than everything (the order of the sorted keys).
template <class T>
__device__ __forceinline__ bool nan_last_less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return false;
    if (b != b) return true;
  }
  return a < b;
}

// Every kSplitterStride-th sorted key: a small array (1/64 of x2) whose binary search stays in
// cache and narrows each lookup to kSplitterStride keys (two cache lines of 32-bit keys), so a
// lookup touches two lines of the large array instead of one per level of a full binary search.
constexpr long long kSplitterStride = 64;

template <class T>
__global__ void splitters_kernel(const T* __restrict__ sorted, long long count, T* __restrict__ splitters) {
  for (long long k = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += static_cast<long long>(gridDim.x) * blockDim.x) {
    splitters[k] = sorted[k * kSplitterStride];
  }
}

// First position in [lo, hi) whose key is not less than v (NaN last).
template <class T>
__device__ __forceinline__ long long lower_bound(const T* __restrict__ keys, long long lo, long long hi, T v) {
  while (lo < hi) {
    const long long mid = lo + ((hi - lo) >> 1);
    if (nan_last_less(__ldg(keys + mid), v)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

template <class T>
__global__ void isin_kernel(const T* __restrict__ sorted, long long n2, const T* __restrict__ splitters,
                            long long count, const T* __restrict__ values, long long n1, bool* __restrict__ out,
                            bool invert) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n1;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const T v = values[i];
    long long lo = 0, hi = n2;
    if (splitters) {
      // splitters[k] = sorted[k * stride]: with K the first splitter not less than v, every key
      // up to (K - 1) * stride is less than v and the key at K * stride is not.
      const long long k = lower_bound(splitters, 0, count, v);
      lo = k > 0 ? (k - 1) * kSplitterStride + 1 : 0;
      hi = k < count ? k * kSplitterStride : n2;
    }
    lo = lower_bound(sorted, lo, hi, v);
    const bool found = lo < n2 && __ldg(sorted + lo) == v;  // NaN == NaN is false: NaN is in nothing
    out[i] = found != invert;
  }
}

template <class W>
__global__ void repeat_kernel(const W* __restrict__ in, W* __restrict__ out, const long long* __restrict__ ends,
                              long long outer, long long len, long long inner, long long total) {
  const long long n = outer * total * inner;
  for (long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = idx % inner;
    const long long rest = idx / inner;
    const long long j = rest % total;
    const long long o = rest / total;
    long long lo = 0, hi = len;  // first k with ends[k] > j
    while (lo < hi) {
      const long long mid = lo + ((hi - lo) >> 1);
      if (ends[mid] <= j) lo = mid + 1;
      else hi = mid;
    }
    out[idx] = in[(o * len + lo) * inner + i];
  }
}

}  // namespace

std::int64_t unique_rank(const UniqueProblem& p, const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  auto* rank = reinterpret_cast<long long*>(p.rank);
  dispatch_key(p.dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto flags = thrust::make_transform_iterator(thrust::make_counting_iterator<long long>(0),
                                                       RunStart<T>{static_cast<const T*>(p.sorted)});
    std::size_t temp_bytes = 0;
    TESSEL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, flags, rank, p.n, s), "unique");
    auto temp = Buffer::allocate(stream.device(), static_cast<std::int64_t>(std::max<std::size_t>(temp_bytes, 1)), stream);
    TESSEL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp->data(), temp_bytes, flags, rank, p.n, s), "unique");
  });
  long long count = 0;
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(&count, rank + (p.n - 1), sizeof count, cudaMemcpyDeviceToHost, s), "unique");
  TESSEL_CUDA_CHECK(cudaStreamSynchronize(s), "unique");  // the output size: the op's one synchronization
  return count;
}

void unique_write(const UniqueProblem& p, const UniqueOutputs& out, std::int64_t count, const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  dispatch_key(p.dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    unique_write_kernel<T><<<blocks_for(p.n), block_threads, 0, s>>>(
        static_cast<const T*>(p.sorted), reinterpret_cast<const long long*>(p.order),
        reinterpret_cast<const long long*>(p.rank), p.n, static_cast<T*>(out.values),
        reinterpret_cast<long long*>(out.indices), reinterpret_cast<long long*>(out.inverse),
        reinterpret_cast<long long*>(out.counts), out.counts ? reinterpret_cast<long long*>(out.starts) : nullptr);
    TESSEL_CUDA_CHECK_LAUNCH(s, "unique");
  });
  if (out.counts && count > 0) {
    counts_kernel<<<blocks_for(count), block_threads, 0, s>>>(reinterpret_cast<long long*>(out.counts),
                                                              reinterpret_cast<const long long*>(out.starts), count);
    TESSEL_CUDA_CHECK_LAUNCH(s, "unique");
  }
}

void isin(const IsinProblem& p, const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  dispatch_key(p.dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* sorted = static_cast<const T*>(p.sorted);
    // Small x2: one binary search is already cache-resident.
    const long long count = p.n2 >= 64 * kSplitterStride ? (p.n2 + kSplitterStride - 1) / kSplitterStride : 0;
    std::shared_ptr<Buffer> splitters;
    if (count > 0) {
      splitters = Buffer::allocate(stream.device(), count * static_cast<long long>(sizeof(T)), stream);
      splitters_kernel<T><<<blocks_for(count), block_threads, 0, s>>>(sorted, count, static_cast<T*>(splitters->data()));
      TESSEL_CUDA_CHECK_LAUNCH(s, "isin");
    }
    isin_kernel<T><<<blocks_for(p.n1), block_threads, 0, s>>>(
        sorted, p.n2, count > 0 ? static_cast<const T*>(splitters->data()) : nullptr, count,
        static_cast<const T*>(p.values), p.n1, p.out, p.invert);
    TESSEL_CUDA_CHECK_LAUNCH(s, "isin");
  });
}

void repeat(const RepeatProblem& p, const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  const long long n = p.outer * p.total * p.inner;
  auto launch = [&](auto word) {
    using W = decltype(word);
    repeat_kernel<W><<<blocks_for(n), block_threads, 0, s>>>(static_cast<const W*>(p.in), static_cast<W*>(p.out),
                                                             reinterpret_cast<const long long*>(p.ends), p.outer,
                                                             p.len, p.inner, p.total);
    TESSEL_CUDA_CHECK_LAUNCH(s, "repeat");
  };
  switch (p.itemsize) {
    case 1: return launch(std::uint8_t{});
    case 2: return launch(std::uint16_t{});
    case 4: return launch(std::uint32_t{});
    case 8: return launch(std::uint64_t{});
    case 16: return launch(ulonglong2{});
    default: throw DTypeError("repeat: internal error, item size " + std::to_string(p.itemsize));
  }
}

}  // namespace tessel::backend::cuda
