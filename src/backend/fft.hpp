#pragma once
// FFT backends (internal): src/backend/cpu/fft.cpp and src/backend/cuda/fft.cpp implement one
// batched 1-D transform with the same problem description. src/ops/fft.cpp turns every public
// transform (n-d, padded, cropped, strided) into a sequence of these.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/dispatch.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::backend {

enum class FFTKind : std::uint8_t { c2c, r2c, c2r };

// `batch` transforms of logical length `n`. Element j of transform b is at
// in + b * in_dist + j * in_stride (elements of the input dtype), likewise for out.
// Input dtype: complex `dtype` for c2c/c2r, its real counterpart for r2c; output the reverse.
// Complex side of r2c/c2r holds n / 2 + 1 elements. Strides and dists are positive.
struct FFTProblem {
  FFTKind kind = FFTKind::c2c;
  DType dtype = DType::complex64;  // the complex dtype: complex64 = single precision
  bool inverse = false;            // c2c only (r2c is forward, c2r inverse)
  std::int64_t n = 0;
  std::int64_t batch = 1;
  const void* in = nullptr;
  std::int64_t in_stride = 1, in_dist = 0;
  void* out = nullptr;
  std::int64_t out_stride = 1, out_dist = 0;
  double scale = 1.0;  // the CPU backend multiplies the output by it; CUDA leaves it to the caller
};

// fft runs the unnormalized transform on `stream`. The CPU multiplies it by problem.scale (any
// n >= 1: mixed radix, Bluestein for large prime factors, computed in double precision and rounded
// once for complex64), runs synchronously and has no plans (`plan` is ignored). CUDA leaves the
// scale to the caller; `plan` may be null (looked up in the device's cache) or one from fft_plan()
// for the same layout; c2r transforms write to their input (cuFFT may overwrite it, and the
// imaginary parts of DC and Nyquist are zeroed as NumPy ignores them).
#define TESSEL_FFT_BACKEND(X) \
  X(void, fft, (const FFTProblem& problem, const std::shared_ptr<void>& plan, const Stream& stream))
TESSEL_BACKEND_FAMILY(TESSEL_FFT_BACKEND)

struct FFTPlanCacheInfo {  // of one CUDA device
  std::size_t plans = 0, max_plans = 0;
  std::size_t workspace_bytes = 0, max_workspace_bytes = 0;
  std::uint64_t hits = 0, misses = 0, evictions = 0;
};

// cuFFT's plans, CUDA only. fft_plan: a plan for the layout of `problem` (its pointers and scale
// are ignored) on the device of `stream` (a new workspace is allocated on it) from the device's
// bounded LRU plan cache; holding the pointer keeps the plan alive after eviction. fft_exec_raw:
// the bare cufftExec* call on a plan, for benchmarks to compare against (no checks beyond the
// cuFFT status, no workspace switching). Then the plan cache's counters and limits.
#define TESSEL_FFT_CUDA_ONLY(X)                                                                     \
  X(std::shared_ptr<void>, fft_plan, (const FFTProblem& problem, const Stream& stream))               \
  X(void, fft_exec_raw, (const std::shared_ptr<void>& plan, const FFTProblem& problem, const Stream& stream)) \
  X(FFTPlanCacheInfo, fft_plan_cache_info, (int device))                                              \
  X(void, set_fft_plan_cache_limits, (int device, std::size_t max_plans, std::size_t max_workspace_bytes)) \
  X(void, clear_fft_plan_cache, (int device))
TESSEL_BACKEND_CUDA_ONLY(TESSEL_FFT_CUDA_ONLY)

}  // namespace tessel::backend
