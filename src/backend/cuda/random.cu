#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <fmt/format.h>

#include "backend/cuda/device/random_element.cuh"
#include "backend/random.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cuda {
namespace {

// Storage conversions, matching the host's round-to-nearest-even float16/bfloat16.
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(double* p, double v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

enum class Kind { uniform_small, normal_small, uniform_f64, normal_f64, integer };

// One thread per Philox block: generate once, write up to PerBlock elements.
template <class T, Kind K, int PerBlock>
__global__ void random_kernel(T* out, long long numel, float a32, float b32, double a, double b, long long low,
                              unsigned long long range, unsigned long long seed, unsigned long long offset) {
  const long long blocks = (numel + PerBlock - 1) / PerBlock;
  for (long long blk = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; blk < blocks;
       blk += static_cast<long long>(gridDim.x) * blockDim.x) {
    const philox::U32x4 r = philox::generate(static_cast<unsigned long long>(blk), offset, seed);
#pragma unroll
    for (int lane = 0; lane < PerBlock; ++lane) {
      const long long i = blk * PerBlock + lane;
      if (i >= numel) break;
      // Explicit rounding: no fused multiply-add, so the result matches the CPU backend bit for bit.
      if constexpr (K == Kind::uniform_small) store(out + i, __fadd_rn(a32, __fmul_rn(b32 - a32, philox::uniform_f32(r, lane))));
      if constexpr (K == Kind::normal_small) store(out + i, __fadd_rn(a32, __fmul_rn(b32, philox::normal_f32(r, lane))));
      if constexpr (K == Kind::uniform_f64) store(out + i, __dadd_rn(a, __dmul_rn(b - a, philox::uniform_f64(r, lane))));
      if constexpr (K == Kind::normal_f64) store(out + i, __dadd_rn(a, __dmul_rn(b, philox::normal_f64(r, lane))));
      if constexpr (K == Kind::integer) out[i] = static_cast<T>(low + static_cast<long long>(philox::integer_below(r, lane, range)));
    }
  }
}

template <class T, Kind K, int PerBlock>
void launch(const RandomFill& f, const Stream& stream) {
  const long long blocks = (f.numel + PerBlock - 1) / PerBlock;
  const int threads = 256;
  // A grid-stride loop over at most 8 blocks of 256 threads per SM.
  const long long waves = 8LL * device_properties(stream.device().index).multiprocessors;
  const long long grid = std::min<long long>((blocks + threads - 1) / threads, waves);
  auto s = detail::cuda_stream(stream);
  random_kernel<T, K, PerBlock><<<static_cast<unsigned>(std::max<long long>(grid, 1)), threads, 0, s>>>(
      static_cast<T*>(f.out), f.numel, static_cast<float>(f.a), static_cast<float>(f.b), f.a, f.b, f.low, f.range, f.seed,
      f.offset);
  TESSEL_CUDA_CHECK_LAUNCH(s, "random");
}

template <class T>
void launch_small_float(const RandomFill& f, const Stream& s) {
  if (f.distribution == RandomDistribution::uniform) launch<T, Kind::uniform_small, philox::uniform_f32_per_block>(f, s);
  else launch<T, Kind::normal_small, philox::normal_f32_per_block>(f, s);
}

}  // namespace

void random_fill(const RandomFill& f, const Stream& stream) {
  if (f.numel == 0) return;
  DeviceGuard guard(stream.device());  // kernels launch on the current device
  if (f.distribution == RandomDistribution::integers) {
    switch (f.dtype) {
      case DType::int8: return launch<signed char, Kind::integer, philox::integer_per_block>(f, stream);
      case DType::int16: return launch<short, Kind::integer, philox::integer_per_block>(f, stream);
      case DType::int32: return launch<int, Kind::integer, philox::integer_per_block>(f, stream);
      case DType::int64: return launch<long long, Kind::integer, philox::integer_per_block>(f, stream);
      case DType::uint8: return launch<unsigned char, Kind::integer, philox::integer_per_block>(f, stream);
      case DType::uint16: return launch<unsigned short, Kind::integer, philox::integer_per_block>(f, stream);
      case DType::uint32: return launch<unsigned int, Kind::integer, philox::integer_per_block>(f, stream);
      case DType::uint64: return launch<unsigned long long, Kind::integer, philox::integer_per_block>(f, stream);
      default: break;
    }
  } else {
    switch (f.dtype) {
      case DType::float16: return launch_small_float<__half>(f, stream);
      case DType::bfloat16: return launch_small_float<__nv_bfloat16>(f, stream);
      case DType::float32: return launch_small_float<float>(f, stream);
      case DType::float64:
        if (f.distribution == RandomDistribution::uniform) return launch<double, Kind::uniform_f64, philox::uniform_f64_per_block>(f, stream);
        return launch<double, Kind::normal_f64, philox::normal_f64_per_block>(f, stream);
      default: break;
    }
  }
  throw DTypeError(fmt::format("random: dtype {} is not supported for this distribution", dtype_name(f.dtype)));
}

}  // namespace tessel::backend::cuda
