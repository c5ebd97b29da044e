// tessel's own float32 SIMT GEMM (register-blocked shared-memory tiles, float4 loads, double
// buffering, fused bias/activation epilogue), the benchmark ladder's naive and tiled kernels, and
// the unfused epilogue kernel used where a library has no fused form.
//
// SIMT kernel layout: a block computes a BM x BN tile of D with (BM/TM)*(BN/TN) = 256 threads,
// each holding a TM x TN accumulator in registers. Per BK-slice of K, A's BM x BK tile is stored
// transposed (As[k][m]) and B's BK x BN tile as is (Bs[k][n]), so the inner loop reads one column
// of As and one row of Bs and forms an outer product. A thread's TM rows are two groups of TM/2
// at ty*(TM/2) and BM/2 + ty*(TM/2) (likewise its columns), so a warp's shared-memory reads are
// consecutive float4s without bank conflicts. Two shared buffers: while the block computes on
// one slice, the next slice's global loads are in registers and go to the other buffer.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "backend/matmul.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cuda {
namespace {

constexpr int kRelu = 1, kGelu = 2, kGeluTanh = 3;

int epilogue_code(MatmulEpilogue e) {
  switch (e) {
    case MatmulEpilogue::none: return 0;
    case MatmulEpilogue::relu: return kRelu;
    case MatmulEpilogue::gelu: return kGelu;
    case MatmulEpilogue::gelu_tanh: return kGeluTanh;
  }
  return 0;
}

__device__ __forceinline__ float activate(float x, int epilogue) {
  switch (epilogue) {
    case kRelu: return x > 0.0f ? x : (x != x ? x : 0.0f);  // NaN propagates
    case kGelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case kGeluTanh: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    default: return x;
  }
}
__device__ __forceinline__ double activate(double x, int epilogue) {
  switch (epilogue) {
    case kRelu: return x > 0.0 ? x : (x != x ? x : 0.0);
    case kGelu: return 0.5 * x * (1.0 + erf(x * 0.70710678118654752));
    case kGeluTanh: return 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
    default: return x;
  }
}

struct SimtArgs {
  const float* a;
  std::int64_t lda, batch_stride_a;
  const float* b;
  std::int64_t ldb, batch_stride_b;
  float* d;
  std::int64_t ldd, batch_stride_d;
  float* aux;
  std::int64_t ldaux, batch_stride_aux;
  const float* bias;
  int m, n, k;
  float alpha, beta;
  int epilogue;
  bool vec_a, vec_b;  // float4 loads allowed (16-byte aligned rows)
  std::int64_t batch_offset;
};

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) simt_gemm_kernel(SimtArgs args) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  constexpr int kLoadsA = (BM * BK / 4 + kThreads - 1) / kThreads;  // float4s per thread
  constexpr int kLoadsB = (BK * BN / 4 + kThreads - 1) / kThreads;
  static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 2 == 0 && TN % 2 == 0, "tile shape");
  __shared__ __align__(16) float As[2][BK][BM];
  __shared__ __align__(16) float Bs[2][BK][BN];

  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int block_m = static_cast<int>(blockIdx.y) * BM, block_n = static_cast<int>(blockIdx.x) * BN;
  const std::int64_t batch = args.batch_offset + blockIdx.z;
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
          const float* p = a + static_cast<std::int64_t>(gr) * args.lda + gk;
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
          const float* p = b + static_cast<std::int64_t>(gk) * args.ldb + gc;
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
      float af[TM], bf[TN];
      if constexpr (TM == 8 && TN == 8) {
        // two float4 shared-memory reads per operand (the two groups of four)
        const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][kk][ty * 4]);
        const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][kk][BM / 2 + ty * 4]);
        const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tx * 4]);
        const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][kk][BN / 2 + tx * 4]);
        af[0] = a0.x; af[1] = a0.y; af[2] = a0.z; af[3] = a0.w;
        af[4] = a1.x; af[5] = a1.y; af[6] = a1.z; af[7] = a1.w;
        bf[0] = b0.x; bf[1] = b0.y; bf[2] = b0.z; bf[3] = b0.w;
        bf[4] = b1.x; bf[5] = b1.y; bf[6] = b1.z; bf[7] = b1.w;
      } else {
#pragma unroll
        for (int i = 0; i < TM; ++i) af[i] = As[buf][kk][tile_row(i)];
#pragma unroll
        for (int j = 0; j < TN; ++j) bf[j] = Bs[buf][kk][tile_col(j)];
      }
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
      float* out = d + static_cast<std::int64_t>(row) * args.ldd + col;
      float v = args.alpha * acc[i][j];
      if (args.beta != 0.0f) v = fmaf(args.beta, *out, v);
      if (args.bias) v += args.bias[col];
      if (aux) aux[static_cast<std::int64_t>(row) * args.ldaux + col] = v;
      *out = activate(v, args.epilogue);
    }
  }
}

struct SimtConfig {
  const char* name;
  int block_m, block_n;
  void (*kernel)(SimtArgs);
};
const SimtConfig simt_configs[] = {
    {"128x128x8_8x8", 128, 128, simt_gemm_kernel<128, 128, 8, 8, 8>},
    {"64x64x8_4x4", 64, 64, simt_gemm_kernel<64, 64, 8, 4, 4>},
};
constexpr int kNumSimtConfigs = sizeof(simt_configs) / sizeof(simt_configs[0]);

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Batches beyond gridDim.z's limit run as several launches.
constexpr std::int64_t kMaxGridZ = 65535;

__global__ void naive_sgemm_kernel(const float* a, const float* b, float* d, int m, int n, int k) {
  const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int row = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (row >= m || col >= n) return;
  float sum = 0.0f;
  for (int kk = 0; kk < k; ++kk) sum = fmaf(a[static_cast<std::int64_t>(row) * k + kk], b[static_cast<std::int64_t>(kk) * n + col], sum);
  d[static_cast<std::int64_t>(row) * n + col] = sum;
}

constexpr int kTile = 16;
__global__ void tiled_sgemm_kernel(const float* a, const float* b, float* d, int m, int n, int k) {
  __shared__ float As[kTile][kTile];
  __shared__ float Bs[kTile][kTile + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int col = static_cast<int>(blockIdx.x) * kTile + tx;
  const int row = static_cast<int>(blockIdx.y) * kTile + ty;
  float sum = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    As[ty][tx] = (row < m && k0 + tx < k) ? a[static_cast<std::int64_t>(row) * k + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < k && col < n) ? b[static_cast<std::int64_t>(k0 + ty) * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) sum = fmaf(As[ty][kk], Bs[kk][tx], sum);
    __syncthreads();
  }
  if (row < m && col < n) d[static_cast<std::int64_t>(row) * n + col] = sum;
}

template <class T>
__device__ __forceinline__ float load_f(const T* p) { return static_cast<float>(*p); }
template <>
__device__ __forceinline__ float load_f<__half>(const __half* p) { return __half2float(*p); }
template <>
__device__ __forceinline__ float load_f<__nv_bfloat16>(const __nv_bfloat16* p) { return __bfloat162float(*p); }
template <class T>
__device__ __forceinline__ void store_f(T* p, float v) { *p = static_cast<T>(v); }
template <>
__device__ __forceinline__ void store_f<__half>(__half* p, float v) { *p = __float2half_rn(v); }
template <>
__device__ __forceinline__ void store_f<__nv_bfloat16>(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Acc is float for the 16/32-bit types and double for float64.
template <class T, class Acc>
__global__ void epilogue_kernel(T* d, std::int64_t ldd, std::int64_t bsd, T* aux, std::int64_t ldaux, std::int64_t bsaux,
                                const T* bias, std::int64_t m, std::int64_t n, std::int64_t total, int epilogue) {
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t j = idx % n, i = (idx / n) % m, bi = idx / (n * m);
    T* p = d + bi * bsd + i * ldd + j;
    Acc v;
    if constexpr (sizeof(Acc) == 8) {
      v = *p;
      if (bias) v += bias[j];
      if (aux) aux[bi * bsaux + i * ldaux + j] = v;
      *p = activate(v, epilogue);
    } else {
      v = load_f(p);
      if (bias) v += load_f(bias + j);
      if (aux) store_f(aux + bi * bsaux + i * ldaux + j, v);
      store_f(p, activate(v, epilogue));
    }
  }
}

template <class T, class Acc>
void launch_epilogue(const MatmulProblem& p, cudaStream_t stream) {
  const std::int64_t total = p.batch * p.m * p.n;
  if (total == 0) return;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((total + threads - 1) / threads, 65536));
  epilogue_kernel<T, Acc><<<blocks, threads, 0, stream>>>(static_cast<T*>(p.d), p.ldd, p.batch_stride_d,
                                                          static_cast<T*>(p.aux), p.ldaux, p.batch_stride_aux,
                                                          static_cast<const T*>(p.bias), p.m, p.n, total,
                                                          epilogue_code(p.epilogue));
  TESSEL_CUDA_CHECK_LAUNCH(stream, "matmul epilogue");
}

}  // namespace

int simt_num_configs() { return kNumSimtConfigs; }
const char* simt_config_name(int config) { return simt_configs[config].name; }

bool simt_can_implement(const MatmulProblem& p, int config) {
  if (config < 0 || config >= kNumSimtConfigs) return false;
  if (p.dtype != DType::float32 || p.out_dtype != DType::float32) return false;
  if (!p.a.row_major() || !p.b.row_major()) return false;  // k-contiguous A, n-contiguous B
  constexpr std::int64_t limit = INT32_MAX;
  if (p.m > limit || p.n > limit || p.k > limit || p.k == 0) return false;
  const SimtConfig& c = simt_configs[config];
  return (p.m + c.block_m - 1) / c.block_m <= 65535;  // gridDim.y's limit
}

void simt_run(const MatmulProblem& p, int config, void* stream) {
  if (!simt_can_implement(p, config)) {
    throw ValueError(fmt::format("matmul: the SIMT kernel {} cannot run this problem", simt_config_name(config)));
  }
  const SimtConfig& c = simt_configs[config];
  SimtArgs args{};
  args.a = static_cast<const float*>(p.a.data);
  args.lda = p.a.row_stride;
  args.batch_stride_a = p.a.batch_stride;
  args.b = static_cast<const float*>(p.b.data);
  args.ldb = p.b.row_stride;
  args.batch_stride_b = p.b.batch_stride;
  args.d = static_cast<float*>(p.d);
  args.ldd = p.ldd;
  args.batch_stride_d = p.batch_stride_d;
  args.aux = static_cast<float*>(p.aux);
  args.ldaux = p.ldaux;
  args.batch_stride_aux = p.batch_stride_aux;
  args.bias = static_cast<const float*>(p.bias);
  args.m = static_cast<int>(p.m);
  args.n = static_cast<int>(p.n);
  args.k = static_cast<int>(p.k);
  args.alpha = static_cast<float>(p.alpha);
  args.beta = static_cast<float>(p.beta);
  args.epilogue = epilogue_code(p.epilogue);
  args.vec_a = aligned16(args.a) && p.a.row_stride % 4 == 0 && p.a.batch_stride % 4 == 0;
  args.vec_b = aligned16(args.b) && p.b.row_stride % 4 == 0 && p.b.batch_stride % 4 == 0;
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  const dim3 threads(256);
  for (std::int64_t offset = 0; offset < p.batch; offset += kMaxGridZ) {
    args.batch_offset = offset;
    const dim3 grid(static_cast<unsigned>((p.n + c.block_n - 1) / c.block_n),
                    static_cast<unsigned>((p.m + c.block_m - 1) / c.block_m),
                    static_cast<unsigned>(std::min(kMaxGridZ, p.batch - offset)));
    c.kernel<<<grid, threads, 0, cuda_stream>>>(args);
    TESSEL_CUDA_CHECK_LAUNCH(cuda_stream, "matmul (simt)");
  }
}

void naive_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k, void* stream) {
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  const dim3 threads(16, 16);
  const dim3 grid(static_cast<unsigned>((n + 15) / 16), static_cast<unsigned>((m + 15) / 16));
  naive_sgemm_kernel<<<grid, threads, 0, cuda_stream>>>(a, b, d, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k));
  TESSEL_CUDA_CHECK_LAUNCH(cuda_stream, "naive_sgemm");
}

void tiled_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k, void* stream) {
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  const dim3 threads(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  tiled_sgemm_kernel<<<grid, threads, 0, cuda_stream>>>(a, b, d, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k));
  TESSEL_CUDA_CHECK_LAUNCH(cuda_stream, "tiled_sgemm");
}

void apply_epilogue(const MatmulProblem& p, void* stream) {
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  switch (p.out_dtype) {
    case DType::float16: return launch_epilogue<__half, float>(p, cuda_stream);
    case DType::bfloat16: return launch_epilogue<__nv_bfloat16, float>(p, cuda_stream);
    case DType::float32: return launch_epilogue<float, float>(p, cuda_stream);
    case DType::float64: return launch_epilogue<double, double>(p, cuda_stream);
    default:
      throw DTypeError(fmt::format("matmul: no epilogue kernel for {}", dtype_name(p.out_dtype)));
  }
}

}  // namespace tessel::backend::cuda
