// tessel's own float32 SIMT GEMM (register-blocked shared-memory tiles, float4 loads, double
// buffering, fused bias/activation epilogue), the benchmark ladder's naive and tiled kernels, and
// the unfused epilogue kernel used where a library has no fused form.
// The SIMT kernel template itself is in matmul_simt_kernel.cuh (shared with the NVRTC-compiled
// tile experiments of bench/matmul_simt_variants_bench.cpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "backend/cuda/matmul_simt_kernel.cuh"
#include "backend/matmul.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cuda {
namespace {

using tessel_simt::activate;
using tessel_simt::kGelu;
using tessel_simt::kGeluTanh;
using tessel_simt::kRelu;
using tessel_simt::simt_gemm_kernel;
using tessel_simt::SimtArgs;

// The *_grad epilogues, which only apply_epilogue runs (D = v * act'(aux), aux the forward's aux);
// the SIMT kernel's own epilogue has the forward activations (kRelu, kGelu, kGeluTanh) only.
constexpr int kReluGrad = 4, kGeluGrad = 5, kGeluTanhGrad = 6;

int epilogue_code(MatmulEpilogue e) {
  switch (e) {
    case MatmulEpilogue::none: return 0;
    case MatmulEpilogue::relu: return kRelu;
    case MatmulEpilogue::gelu: return kGelu;
    case MatmulEpilogue::gelu_tanh: return kGeluTanh;
    case MatmulEpilogue::relu_grad: return kReluGrad;
    case MatmulEpilogue::gelu_grad: return kGeluGrad;
    case MatmulEpilogue::gelu_tanh_grad: return kGeluTanhGrad;
  }
  return 0;
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

// The ladder's one-thread-per-output kernels. WarpAlongRow: consecutive threads of a warp take
// consecutive columns of D, so the loads of B coalesce. Otherwise they take consecutive rows (the
// first rung as the seeds' technique starts it), and each load of B is 32 scattered words.
template <bool WarpAlongRow>
__global__ void naive_sgemm_kernel(const float* a, const float* b, float* d, int m, int n, int k) {
  const int fast = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int slow = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  const int row = WarpAlongRow ? slow : fast, col = WarpAlongRow ? fast : slow;
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

// g * act'(z), z being the forward's aux.
template <class T>
__device__ __forceinline__ T activate_grad(T g, T z, int epilogue) {
  switch (epilogue) {
    case kReluGrad: return tessel::activation::relu_grad(g, z);
    case kGeluGrad: return tessel::activation::gelu_grad(g, z);
    case kGeluTanhGrad: return tessel::activation::gelu_tanh_grad(g, z);
    default: return g;
  }
}

// Acc is float for the 16/32-bit types and double for float64.
template <class T, class Acc>
__global__ void epilogue_kernel(T* d, std::int64_t ldd, std::int64_t bsd, T* aux, std::int64_t ldaux, std::int64_t bsaux,
                                const T* bias, std::int64_t m, std::int64_t n, std::int64_t total, int epilogue) {
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t j = idx % n, i = (idx / n) % m, bi = idx / (n * m);
    T* p = d + bi * bsd + i * ldd + j;
    Acc v;
    if (epilogue >= kReluGrad) {  // aux is the forward's aux, read
      if constexpr (sizeof(Acc) == 8) {
        *p = activate_grad<Acc>(*p, aux[bi * bsaux + i * ldaux + j], epilogue);
      } else {
        store_f(p, activate_grad<Acc>(load_f(p), load_f(aux + bi * bsaux + i * ldaux + j), epilogue));
      }
      continue;
    }
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
  if (is_matmul_grad_epilogue(p.epilogue)) return false;  // its epilogue has the forward activations only
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

namespace {
// One thread per element of D in 16x16 blocks; the grid's x dimension runs along the index the
// warp walks (columns of D when WarpAlongRow).
template <bool WarpAlongRow>
void launch_naive_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k,
                        void* stream, const char* op) {
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  const std::int64_t fast = WarpAlongRow ? n : m, slow = WarpAlongRow ? m : n;
  const dim3 threads(16, 16);
  const dim3 grid(static_cast<unsigned>((fast + 15) / 16), static_cast<unsigned>((slow + 15) / 16));
  naive_sgemm_kernel<WarpAlongRow><<<grid, threads, 0, cuda_stream>>>(a, b, d, static_cast<int>(m),
                                                                      static_cast<int>(n), static_cast<int>(k));
  TESSEL_CUDA_CHECK_LAUNCH(cuda_stream, op);
}
}  // namespace

void naive_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k, void* stream) {
  launch_naive_sgemm<true>(a, b, d, m, n, k, stream, "naive_sgemm");
}

void naive_uncoalesced_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k,
                             void* stream) {
  launch_naive_sgemm<false>(a, b, d, m, n, k, stream, "naive_uncoalesced_sgemm");
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
