#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. Element i of a draw depends only on (seed, offset, i), so the CPU and
// GPU backends produce the same numbers for the same seed, in any order and with any launch shape.
// Shared by the host compiler, nvcc and NVRTC.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TESSEL_HD __host__ __device__ __forceinline__
#else
#include <cstdint>
#define TESSEL_HD inline
#endif

namespace tessel::philox {

struct U32x4 {
  unsigned int v[4];
};

TESSEL_HD void mulhilo(unsigned int a, unsigned int b, unsigned int& hi, unsigned int& lo) {
  const unsigned long long product = static_cast<unsigned long long>(a) * b;
  hi = static_cast<unsigned int>(product >> 32);
  lo = static_cast<unsigned int>(product);
}

// Four 32-bit random words for counter (block, stream) under key seed.
TESSEL_HD U32x4 generate(unsigned long long block, unsigned long long stream, unsigned long long seed) {
  unsigned int c0 = static_cast<unsigned int>(block), c1 = static_cast<unsigned int>(block >> 32);
  unsigned int c2 = static_cast<unsigned int>(stream), c3 = static_cast<unsigned int>(stream >> 32);
  unsigned int k0 = static_cast<unsigned int>(seed), k1 = static_cast<unsigned int>(seed >> 32);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    unsigned int hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, hi0, lo0);
    mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    const unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return U32x4{{c0, c1, c2, c3}};
}

// [0, 1) with 24 random bits (exact in float).
TESSEL_HD float uniform_float(unsigned int x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
// [0, 1) with 53 random bits (exact in double).
TESSEL_HD double uniform_double(unsigned int hi, unsigned int lo) {
  const unsigned long long bits = (static_cast<unsigned long long>(hi) << 32 | lo) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}
// An unbiased-enough integer in [0, range): 64 random bits times range, high 64 bits of the
// 128-bit product (bias below 2^-64 * range).
TESSEL_HD unsigned long long below(unsigned int hi, unsigned int lo, unsigned long long range) {
  const unsigned long long r = static_cast<unsigned long long>(hi) << 32 | lo;
#if defined(__CUDA_ARCH__)
  return __umul64hi(r, range);
#else
  __extension__ typedef unsigned __int128 u128;
  return static_cast<unsigned long long>((static_cast<u128>(r) * range) >> 64);
#endif
}

}  // namespace tessel::philox
