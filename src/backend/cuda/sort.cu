// CUDA sort and search through CUB: cub::DeviceRadixSort for one row, and
// cub::DeviceSegmentedSort (stable) for batched rows; both stable. CUB is instantiated for the
// six key dtypes only (src/ops/sort.cpp widens the others first).
//
// Float keys are encoded as order-preserving unsigned integers (see encode_float_keys) and sorted
// through the integer instantiations, with NaNs last and signed zeros tied (keeping input
// order). The sorted values are the input's own bits, carried through the sort as its values, so
// -0.0 and NaN payloads come out as they went in, in stable order.
#include <cuda_runtime_api.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cuda/std/limits>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "backend/sort.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {
namespace {

constexpr int block_threads = 256;

unsigned blocks_for(long long n) {
  return static_cast<unsigned>(std::min<long long>((n + block_threads - 1) / block_threads, 1LL << 20));
}

// Float keys are sorted as unsigned integers whose order is the floats' order: positive floats
// get the sign bit set, negative ones all bits flipped. Every NaN becomes the canonical +NaN
// first (so all NaNs sort last, after +inf) and -0.0 becomes +0.0 (so signed zeros tie and the
// sort stays stable between them). Sorting the integers avoids relying on CUB's float paths.
template <class T> struct float_bits;
template <> struct float_bits<float> { using type = std::uint32_t; };
template <> struct float_bits<double> { using type = std::uint64_t; };

template <class T, class U = typename float_bits<T>::type>
__global__ void encode_float_keys(const T* in, U* out, long long n) {
  constexpr U sign = U(1) << (sizeof(U) * 8 - 1);
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    T x = in[i];
    if (x != x) x = ::cuda::std::numeric_limits<T>::quiet_NaN();
    else if (x == T{0}) x = T{0};
    U bits;
    memcpy(&bits, &x, sizeof(U));
    out[i] = (bits & sign) ? U(~bits) : U(bits | sign);
  }
}

// The sorted values: the input bits that rode through the sort as 64-bit values.
template <class T, class U = typename float_bits<T>::type>
__global__ void narrow_float_bits(const long long* in, T* out, long long n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const U bits = static_cast<U>(static_cast<unsigned long long>(in[i]));
    memcpy(&out[i], &bits, sizeof(U));
  }
}

// The input bits widened to the 64-bit values the sort carries (a 4-byte float's bits).
template <class T, class U = typename float_bits<T>::type>
__global__ void widen_float_bits(const T* in, long long* out, long long n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    U bits;
    memcpy(&bits, &in[i], sizeof(U));
    out[i] = static_cast<long long>(static_cast<unsigned long long>(bits));
  }
}

// sorted[i] = keys[row start + order[i]]: the sorted values when argsort ran too.
template <class T>
__global__ void gather_sorted(const T* keys, const long long* order, T* sorted, long long n, long long len) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    sorted[i] = keys[i - i % len + order[i]];
  }
}

// Position within the row: the values sorted along with the keys for argsort.
__global__ void row_iota_kernel(long long* out, long long n, long long len) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    out[i] = i % len;
  }
}

struct RowStart {
  long long len;
  __host__ __device__ long long operator()(long long row) const { return row * len; }
};

// Stable CUB sort of rows of integer keys, with 64-bit values when values_out is set; keys_out
// may be null (a scratch buffer takes the sorted keys).
template <class T>
void radix_sort(const T* keys_in, T* keys_out, const long long* values_in, long long* values_out, long long rows,
                long long len, const Stream& stream) {
  const auto s = detail::cuda_stream(stream);
  const long long n = rows * len;
  std::shared_ptr<Buffer> keys_scratch;
  if (!keys_out) {
    keys_scratch = Buffer::allocate(stream.device(), n * static_cast<long long>(sizeof(T)), stream);
    keys_out = static_cast<T*>(keys_scratch->data());
  }
  const auto begin = thrust::make_transform_iterator(thrust::make_counting_iterator<long long>(0), RowStart{len});
  const auto end = begin + 1;
  auto call = [&](void* temp, std::size_t& temp_bytes) -> cudaError_t {
    if (rows == 1) {
      if (values_out) {
        return cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, values_in, values_out, n, 0,
                                               static_cast<int>(sizeof(T) * 8), s);
      }
      return cub::DeviceRadixSort::SortKeys(temp, temp_bytes, keys_in, keys_out, n, 0, static_cast<int>(sizeof(T) * 8), s);
    }
    if (values_out) {
      return cub::DeviceSegmentedSort::StableSortPairs(temp, temp_bytes, keys_in, keys_out, values_in, values_out, n,
                                                       rows, begin, end, s);
    }
    return cub::DeviceSegmentedSort::StableSortKeys(temp, temp_bytes, keys_in, keys_out, n, rows, begin, end, s);
  };
  std::size_t temp_bytes = 0;
  TESSEL_CUDA_CHECK(call(nullptr, temp_bytes), "sort");
  auto temp = Buffer::allocate(stream.device(), static_cast<std::int64_t>(std::max<std::size_t>(temp_bytes, 1)), stream);
  TESSEL_CUDA_CHECK(call(temp->data(), temp_bytes), "sort");
}

template <class T>
void sort_typed(const SortProblem& p, const Stream& stream) {
  const auto s = detail::cuda_stream(stream);
  const long long n = p.rows * p.len;
  const long long bytes = n * static_cast<long long>(sizeof(T));
  const T* keys_in = static_cast<const T*>(p.keys_in);
  std::shared_ptr<Buffer> iota;
  if constexpr (std::is_floating_point_v<T>) {
    using U = typename float_bits<T>::type;
    auto encoded = Buffer::allocate(stream.device(), bytes, stream);
    encode_float_keys<T><<<blocks_for(n), block_threads, 0, s>>>(keys_in, static_cast<U*>(encoded->data()), n);
    TESSEL_CUDA_CHECK_LAUNCH(s, "sort");
    SortProblem as_integers = p;
    as_integers.keys_in = encoded->data();
    as_integers.keys_out = nullptr;
    if (!p.keys_out) return sort_typed<U>(as_integers, stream);
    if (p.indices_out) {  // argsort's order gives the values
      sort_typed<U>(as_integers, stream);
      gather_sorted<T><<<blocks_for(n), block_threads, 0, s>>>(keys_in, reinterpret_cast<const long long*>(p.indices_out),
                                                              static_cast<T*>(p.keys_out), n, p.len);
      TESSEL_CUDA_CHECK_LAUNCH(s, "sort");
      return;
    }
    // The input's bits ride as the values (the argsort instantiation: 64-bit values); an 8-byte
    // float's land in the output directly.
    std::shared_ptr<Buffer> bits_in, bits_out;
    const long long* values_in = reinterpret_cast<const long long*>(keys_in);
    long long* values_out = static_cast<long long*>(p.keys_out);
    if constexpr (sizeof(T) < 8) {
      bits_in = Buffer::allocate(stream.device(), n * 8, stream);
      bits_out = Buffer::allocate(stream.device(), n * 8, stream);
      widen_float_bits<T><<<blocks_for(n), block_threads, 0, s>>>(keys_in, static_cast<long long*>(bits_in->data()), n);
      TESSEL_CUDA_CHECK_LAUNCH(s, "sort");
      values_in = static_cast<const long long*>(bits_in->data());
      values_out = static_cast<long long*>(bits_out->data());
    }
    radix_sort<U>(static_cast<const U*>(encoded->data()), nullptr, values_in, values_out, p.rows, p.len, stream);
    if constexpr (sizeof(T) < 8) {
      narrow_float_bits<T><<<blocks_for(n), block_threads, 0, s>>>(values_out, static_cast<T*>(p.keys_out), n);
      TESSEL_CUDA_CHECK_LAUNCH(s, "sort");
    }
    return;
  }
  long long* order_in = nullptr;
  if (p.indices_out) {
    iota = Buffer::allocate(stream.device(), n * 8, stream);
    order_in = static_cast<long long*>(iota->data());
    row_iota_kernel<<<blocks_for(n), block_threads, 0, s>>>(order_in, n, p.len);
    TESSEL_CUDA_CHECK_LAUNCH(s, "argsort");
  }
  radix_sort<T>(keys_in, static_cast<T*>(p.keys_out), order_in, reinterpret_cast<long long*>(p.indices_out), p.rows,
                p.len, stream);
}

// a < b with NaN greater than everything.
template <class T>
__device__ __forceinline__ bool nan_last_less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return false;
    if (b != b) return true;
  }
  return a < b;
}

template <class T>
__global__ void searchsorted_kernel(const T* sorted, long long len, const T* values, long long count, long long* out,
                                    bool right) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const T v = values[i];
    long long lo = 0, hi = len;
    while (lo < hi) {
      const long long mid = lo + (hi - lo) / 2;
      // left: first position with !(sorted[mid] < v); right: first with v < sorted[mid].
      const bool go_right = right ? !nan_last_less(v, sorted[mid]) : nan_last_less(sorted[mid], v);
      if (go_right) lo = mid + 1;
      else hi = mid;
    }
    out[i] = lo;
  }
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
    default: throw DTypeError(std::string("sort: internal error, key dtype ") + dtype_name(dtype));
  }
}

}  // namespace

void sort(const SortProblem& problem, const Stream& stream) {
  DeviceGuard guard(stream.device());  // kernels and CUB launch on the current device
  dispatch_key(problem.dtype, [&](auto tag) { sort_typed<std::remove_pointer_t<decltype(tag)>>(problem, stream); });
}

void searchsorted(const SearchProblem& p, const Stream& stream) {
  DeviceGuard guard(stream.device());  // kernels and CUB launch on the current device
  const auto s = detail::cuda_stream(stream);
  dispatch_key(p.dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    searchsorted_kernel<T><<<blocks_for(p.count), block_threads, 0, s>>>(
        static_cast<const T*>(p.sorted), p.sorted_len, static_cast<const T*>(p.values), p.count, reinterpret_cast<long long*>(p.out), p.right);
    TESSEL_CUDA_CHECK_LAUNCH(s, "searchsorted");
  });
}

void cub_sort_pairs_int32(void* temp, std::size_t& temp_bytes, const std::int32_t* keys_in, std::int32_t* keys_out,
                          const std::int64_t* values_in, std::int64_t* values_out, std::int64_t n,
                          const Stream& stream) {
  DeviceGuard guard(stream.device());
  // Same instantiation as sort_typed<int> with long long values, so no extra compile time.
  TESSEL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out,
                                                    reinterpret_cast<const long long*>(values_in),
                                                    reinterpret_cast<long long*>(values_out), static_cast<long long>(n), 0,
                                                    32, detail::cuda_stream(stream)),
                    "cub_sort_pairs_int32");
}

}  // namespace tessel::backend::cuda
