#pragma once
// tessel's float32 SIMT GEMM kernel template, self-contained so that it compiles both in
// matmul_simt.cu (nvcc, the instantiations the library ships) and under NVRTC in
// bench/matmul_simt_variants_bench.cpp (tile-configuration experiments without growing the
// AOT build). SimtArgs is plain C++ (the bench's host code fills it); the device code is only
// seen by CUDA compilers. No namespace-scope includes under NVRTC: the bench puts
// backend/activation.hpp's text before this file's.
//
// Layout: a block computes a BM x BN tile of D with (BM/TM)*(BN/TN) threads, each holding a
// TM x TN accumulator in registers. Per BK-slice of K, A's BM x BK tile is stored transposed
// (As[k][m]) and B's BK x BN tile as is (Bs[k][n]), so the inner loop reads one column of As
// and one row of Bs and forms an outer product. A thread's TM rows are two groups of TM/2 at
// ty*(TM/2) and BM/2 + ty*(TM/2) (likewise its columns), so shared-memory reads are float4s.
// WarpX = 0: thread (tx, ty) = (tid % (BN/TN), tid / (BN/TN)), a warp spans 2 rows of 16
// threads; WarpX > 0: a warp is a (32/WarpX) x WarpX patch of threads (e.g. 4 x 8), which
// reads fewer distinct shared-memory words per k (4 + 8 float4s instead of 2 + 16). Two shared
// buffers: while the block computes on one slice, the next slice's global loads are in
// registers and go to the other buffer.
#if defined(__CUDACC_RTC__)
typedef long long tessel_simt_int64;
#else
#include <cstdint>

#include "backend/activation.hpp"
typedef std::int64_t tessel_simt_int64;
#endif

namespace tessel_simt {

constexpr int kRelu = 1, kGelu = 2, kGeluTanh = 3;

struct SimtArgs {
  const float* a;
  tessel_simt_int64 lda, batch_stride_a;
  const float* b;
  tessel_simt_int64 ldb, batch_stride_b;
  float* d;
  tessel_simt_int64 ldd, batch_stride_d;
  float* aux;
  tessel_simt_int64 ldaux, batch_stride_aux;
  const float* bias;
  int m, n, k;
  float alpha, beta;
  int epilogue;
  bool vec_a, vec_b;  // float4 loads allowed (16-byte aligned rows)
  tessel_simt_int64 batch_offset;
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
template <class T>
__device__ __forceinline__ T activate(T x, int epilogue) {
  switch (epilogue) {
    case kRelu: return tessel::activation::relu(x);
    case kGelu: return tessel::activation::gelu(x);
    case kGeluTanh: return tessel::activation::gelu_tanh(x);
    default: return x;
  }
}

// Count consecutive shared floats into registers: float4 reads when Count is a multiple of 4,
// float2 when even (src is then aligned to Count floats).
template <int Count>
__device__ __forceinline__ void read_group(const float* src, float* dst) {
  if constexpr (Count % 4 == 0) {
#pragma unroll
    for (int q = 0; q < Count; q += 4) {
      const float4 v = *reinterpret_cast<const float4*>(src + q);
      dst[q] = v.x; dst[q + 1] = v.y; dst[q + 2] = v.z; dst[q + 3] = v.w;
    }
  } else if constexpr (Count % 2 == 0) {
#pragma unroll
    for (int q = 0; q < Count; q += 2) {
      const float2 v = *reinterpret_cast<const float2*>(src + q);
      dst[q] = v.x; dst[q + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int q = 0; q < Count; ++q) dst[q] = src[q];
  }
}

template <int BM, int BN, int BK, int TM, int TN, int WarpX = 0>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) simt_gemm_kernel(SimtArgs args) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  constexpr int kPatchX = WarpX == 0 ? 1 : WarpX;  // avoids a division by zero in the check
  static_assert(WarpX == 0 || (32 % kPatchX == 0 && (BN / TN) % kPatchX == 0 && (BM / TM) % (32 / kPatchX) == 0),
                "a warp patch must tile the thread grid");
  constexpr int kLoadsA = (BM * BK / 4 + kThreads - 1) / kThreads;  // float4s per thread
  constexpr int kLoadsB = (BK * BN / 4 + kThreads - 1) / kThreads;
  static_assert(BK % 4 == 0 && BN % 8 == 0 && BM % 8 == 0 && TM % 2 == 0 && TN % 2 == 0, "tile shape");
  __shared__ __align__(16) float As[2][BK][BM];
  __shared__ __align__(16) float Bs[2][BK][BN];

  const int tid = static_cast<int>(threadIdx.x);
  int tx, ty;
  if constexpr (WarpX == 0) {
    tx = tid % (BN / TN);
    ty = tid / (BN / TN);
  } else {
    constexpr int kWarpY = 32 / kPatchX, kWarpsX = (BN / TN) / kPatchX;
    const int warp = tid / 32, lane = tid % 32;
    tx = (warp % kWarpsX) * kPatchX + lane % kPatchX;
    ty = (warp / kWarpsX) * kWarpY + lane / kPatchX;
  }
  const int block_m = static_cast<int>(blockIdx.y) * BM, block_n = static_cast<int>(blockIdx.x) * BN;
  const tessel_simt_int64 batch = args.batch_offset + blockIdx.z;
  const float* a = args.a + batch * args.batch_stride_a;
  const float* b = args.b + batch * args.batch_stride_b;
  const int m = args.m, n = args.n, k = args.k;

  float4 ra[kLoadsA], rb[kLoadsB];
  auto load_global = [&](int k0) {
#pragma unroll
    for (int l = 0; l < kLoadsA; ++l) {
      const int v = tid + l * kThreads;
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (v < BM * BK / 4) {
        const int row = v / (BK / 4), kq = (v % (BK / 4)) * 4;
        const int gr = block_m + row, gk = k0 + kq;
        if (gr < m) {
          const float* p = a + static_cast<tessel_simt_int64>(gr) * args.lda + gk;
          if (args.vec_a && gk + 3 < k) {
            x = __ldg(reinterpret_cast<const float4*>(p));
          } else {
            if (gk < k) x.x = __ldg(p);
            if (gk + 1 < k) x.y = __ldg(p + 1);
            if (gk + 2 < k) x.z = __ldg(p + 2);
            if (gk + 3 < k) x.w = __ldg(p + 3);
          }
        }
      }
      ra[l] = x;
    }
#pragma unroll
    for (int l = 0; l < kLoadsB; ++l) {
      const int v = tid + l * kThreads;
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (v < BK * BN / 4) {
        const int kr = v / (BN / 4), nq = (v % (BN / 4)) * 4;
        const int gk = k0 + kr, gc = block_n + nq;
        if (gk < k) {
          const float* p = b + static_cast<tessel_simt_int64>(gk) * args.ldb + gc;
          if (args.vec_b && gc + 3 < n) {
            x = __ldg(reinterpret_cast<const float4*>(p));
          } else {
            if (gc < n) x.x = __ldg(p);
            if (gc + 1 < n) x.y = __ldg(p + 1);
            if (gc + 2 < n) x.z = __ldg(p + 2);
            if (gc + 3 < n) x.w = __ldg(p + 3);
          }
        }
      }
      rb[l] = x;
    }
  };
  auto store_shared = [&](int buf) {
#pragma unroll
    for (int l = 0; l < kLoadsA; ++l) {
      const int v = tid + l * kThreads;
      if (v < BM * BK / 4) {
        const int row = v / (BK / 4), kq = (v % (BK / 4)) * 4;
        As[buf][kq + 0][row] = ra[l].x;
        As[buf][kq + 1][row] = ra[l].y;
        As[buf][kq + 2][row] = ra[l].z;
        As[buf][kq + 3][row] = ra[l].w;
      }
    }
#pragma unroll
    for (int l = 0; l < kLoadsB; ++l) {
      const int v = tid + l * kThreads;
      if (v < BK * BN / 4) {
        const int kr = v / (BN / 4), nq = (v % (BN / 4)) * 4;
        *reinterpret_cast<float4*>(&Bs[buf][kr][nq]) = rb[l];
      }
    }
  };

  // Row of accumulator i and column of accumulator j inside the block tile.
  auto tile_row = [&](int i) { return (i / (TM / 2)) * (BM / 2) + ty * (TM / 2) + i % (TM / 2); };
  auto tile_col = [&](int j) { return (j / (TN / 2)) * (BN / 2) + tx * (TN / 2) + j % (TN / 2); };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  const int tiles = (k + BK - 1) / BK;
  load_global(0);
  store_shared(0);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int buf = t & 1;
    if (t + 1 < tiles) load_global((t + 1) * BK);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      // Each operand's fragment is two groups (TM/2 rows, TN/2 columns), read as float4s (or
      // float2s when a group has 2 elements); the group starts are multiples of the group size.
      float af[TM], bf[TN];
      read_group<TM / 2>(&As[buf][kk][ty * (TM / 2)], af);
      read_group<TM / 2>(&As[buf][kk][BM / 2 + ty * (TM / 2)], af + TM / 2);
      read_group<TN / 2>(&Bs[buf][kk][tx * (TN / 2)], bf);
      read_group<TN / 2>(&Bs[buf][kk][BN / 2 + tx * (TN / 2)], bf + TN / 2);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
    }
    if (t + 1 < tiles) store_shared(buf ^ 1);
    __syncthreads();
  }

  float* d = args.d + batch * args.batch_stride_d;
  float* aux = args.aux ? args.aux + batch * args.batch_stride_aux : nullptr;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = block_m + tile_row(i);
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = block_n + tile_col(j);
      if (col >= n) continue;
      float* out = d + static_cast<tessel_simt_int64>(row) * args.ldd + col;
      float v = args.alpha * acc[i][j];
      if (args.beta != 0.0f) v = fmaf(args.beta, *out, v);
      if (args.bias) v += args.bias[col];
      if (aux) aux[static_cast<tessel_simt_int64>(row) * args.ldaux + col] = v;
      *out = activate(v, args.epilogue);
    }
  }
}

#endif  // CUDA compilers

}  // namespace tessel_simt
