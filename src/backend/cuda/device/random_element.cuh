#pragma once
// How a random draw maps Philox blocks to elements, shared by the CPU and CUDA backends so both
// give the same numbers: element i lives in block i / per_block, at lane i % per_block, and its
// value depends only on (seed, offset, i). Uniform floats and integers are bit-identical across
// backends; normal values use log/cos and can differ by a few ulp between libm and CUDA.
#if !defined(__CUDACC_RTC__)
#include <cmath>
#endif
#include "philox.cuh"

namespace tessel::philox {

// Elements per Philox block (4 words).
constexpr int uniform_f32_per_block = 4;  // 1 word each
constexpr int uniform_f64_per_block = 2;  // 2 words each
constexpr int normal_f32_per_block = 2;   // 2 uniforms each (Box-Muller, cosine branch)
constexpr int normal_f64_per_block = 1;   // 2 double uniforms
constexpr int integer_per_block = 2;      // 64 bits each

TESSEL_HD float uniform_f32(const U32x4& r, int lane) { return uniform_float(r.v[lane]); }
TESSEL_HD double uniform_f64(const U32x4& r, int lane) { return uniform_double(r.v[2 * lane], r.v[2 * lane + 1]); }
// 1 - u keeps log's argument in (0, 1].
TESSEL_HD float normal_f32(const U32x4& r, int lane) {
  const float u1 = 1.0f - uniform_float(r.v[2 * lane]);
  const float u2 = uniform_float(r.v[2 * lane + 1]);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864769f * u2);
}
TESSEL_HD double normal_f64(const U32x4& r, int) {
  const double u1 = 1.0 - uniform_double(r.v[0], r.v[1]);
  const double u2 = uniform_double(r.v[2], r.v[3]);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}
TESSEL_HD unsigned long long integer_below(const U32x4& r, int lane, unsigned long long range) {
  return below(r.v[2 * lane], r.v[2 * lane + 1], range);
}

}  // namespace tessel::philox
