// tessel's own Hopper GEMM (sm_90a), float16 / bfloat16 in, fp32 accumulation, fused epilogue.
//
// One persistent CTA per SM, 384 threads = 3 warpgroups, warp-specialized:
//   warpgroup 0: producer. One thread issues TMA bulk tensor copies (cp.async.bulk.tensor.3d)
//                of the A and B tiles of each 64-wide K block into a ring of STAGES shared
//                memory stages; each stage has a "full" mbarrier (TMA completes its bytes on it)
//                and an "empty" mbarrier (the consumers arrive when their wgmma has read it).
//   warpgroups 1, 2: consumers. Each owns BM/2 rows of the CTA tile and issues
//                wgmma.mma_async m64nBNk16 from shared-memory descriptors (128-byte swizzle,
//                the layout TMA writes), keeping one wgmma group in flight, then applies the
//                epilogue (alpha, bias, relu / gelu) to the fp32 accumulators and stores D.
// Tiles are visited in a grouped order (GROUP_M tile rows at a time) so concurrent CTAs share
// A and B panels in L2. The producer runs ahead into the next tile while consumers store.
// Batches are the third tensor-map dimension. Out-of-range rows/cols/K are zero-filled by TMA
// and masked at the store. See docs/matmul_sm90.md.
#include "tessel/ops/matmul_kernels.hpp"

#include <cuda.h>           // CUtensorMap and the enums only: the driver is reached through
#include <cudaTypedefs.h>   // cudaGetDriverEntryPointByVersion, tessel does not link libcuda.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>

#include "backend/activation.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/error.hpp"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "backend/cuda/matmul_sm90_wgmma.cuh"
#define TESSEL_SM90A_DEVICE 1
#else
#define TESSEL_SM90A_DEVICE 0
#endif

namespace tessel::internal::sm90 {
namespace {

// 1 in the sm_90a device image, 0 in any other (and in the host shadow); read back with
// cudaMemcpyFromSymbol to learn whether the loaded image has the wgmma kernels.
__device__ int g_sm90a_image = TESSEL_SM90A_DEVICE;

constexpr int kBlockK = 64;         // 64 16-bit elements = one 128-byte swizzle row
constexpr int kThreads = 384;       // producer warpgroup + 2 consumer warpgroups
constexpr int kConsumers = 2;
constexpr int kSwizzleAtomBytes = 1024;  // 8 rows x 128 bytes

struct KernelParams {
  int m, n, k;
  int tiles_m, tiles_n, k_blocks;
  int total_tiles;
  int a_batch_step, b_batch_step;   // 1, or 0 when the operand is shared by every batch
  std::uint32_t b_lbo, b_sbo;       // descriptor byte offsets of an N-major B
  void* d;
  long long ldd, batch_stride_d;
  const void* bias;
  float alpha;
  int epilogue;
  void* aux;                         // nullptr, or the pre-activation output (D's dtype)
  long long ldaux, batch_stride_aux;
  int pair_stores;                   // 1: D and aux take 4-byte stores of 2 elements (even strides)
};

// PingPong = false ("cooperative"): both consumer warpgroups work on one tile, BM/2 rows each.
// PingPong = true: each consumer warpgroup owns whole tiles (alternate tiles of the CTA); their
// main loops take turns (ordered by named barriers) so one's epilogue overlaps the other's MMAs.
template <int BN_, int MSlices_, int Stages_, bool PingPong_ = false>
struct TileConfig {
  static constexpr int BN = BN_;
  static constexpr int MSlices = MSlices_;         // m64 slices per consumer warpgroup
  static constexpr bool PingPong = PingPong_;
  static constexpr int BM = 64 * MSlices_ * (PingPong_ ? 1 : kConsumers);
  static constexpr int Stages = Stages_;
  static constexpr int ABytes = BM * kBlockK * 2;
  static constexpr int BBytes = BN * kBlockK * 2;
  static constexpr int StageBytes = ABytes + BBytes;
  static constexpr int SmemBytes = Stages * StageBytes + kSwizzleAtomBytes + 2 * Stages * 8;
};

// Device helpers exist only in the sm_90a pass (elsewhere the kernels are empty).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

constexpr int kGroupM = 16;  // tile rows per raster group (L2 reuse)

__device__ __forceinline__ void decode_tile(const KernelParams& p, int tile, int& batch, int& tm, int& tn) {
  const int per_batch = p.tiles_m * p.tiles_n;
  batch = tile / per_batch;
  const int r = tile - batch * per_batch;
  const int per_group = kGroupM * p.tiles_n;
  const int group = r / per_group;
  const int first_m = group * kGroupM;
  const int group_rows = min(p.tiles_m - first_m, kGroupM);
  const int in_group = r - group * per_group;
  tm = first_m + in_group % group_rows;
  tn = in_group / group_rows;
}

template <class T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <class T> __device__ __forceinline__ std::uint32_t pack2(float a, float b);
template <> __device__ __forceinline__ std::uint32_t pack2<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<std::uint32_t*>(&v);
}
template <> __device__ __forceinline__ std::uint32_t pack2<__half>(float a, float b) {
  __half2 v = __floats2half2_rn(a, b);
  return *reinterpret_cast<std::uint32_t*>(&v);
}
template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Waits until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
      ::"r"(dst), "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
// Keeps the compiler from moving accumulator reads/writes across wgmma issue/wait.
template <int R>
__device__ __forceinline__ void fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor (PTX ISA "matrix descriptor"): start address, leading and
// stride byte offsets (all >> 4), layout type 1 = 128-byte swizzle in bits 62-63.
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t addr, std::uint32_t lbo, std::uint32_t sbo) {
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<std::uint64_t>((lbo & 0x3FFFF) >> 4) << 16) |
         (static_cast<std::uint64_t>((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

template <class T, int N, int TransB>
__device__ __forceinline__ void wgmma_tile(float (&d)[N / 2], std::uint64_t da, std::uint64_t db, int acc) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if constexpr (N == 256) wgmma_m64n256k16_bf16<TransB>(d, da, db, acc);
    else wgmma_m64n128k16_bf16<TransB>(d, da, db, acc);
  } else {
    if constexpr (N == 256) wgmma_m64n256k16_f16<TransB>(d, da, db, acc);
    else wgmma_m64n128k16_f16<TransB>(d, da, db, acc);
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

template <class T, class Cfg, bool BKMajor>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                const KernelParams p) {
  static_assert(Cfg::MSlices == 1 || Cfg::MSlices == 2, "one or two m64 slices per consumer");
  static_assert(!Cfg::PingPong || Cfg::MSlices == 2, "ping-pong consumers own 128-row tiles");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = Cfg::BM, BN = Cfg::BN, S = Cfg::Stages, MS = Cfg::MSlices;
  extern __shared__ std::uint8_t smem_raw[];
  // 128-byte swizzle atoms must start on 1024-byte boundaries (the swizzle uses address bits).
  const std::uint32_t base = (smem_u32(smem_raw) + kSwizzleAtomBytes - 1) & ~std::uint32_t(kSwizzleAtomBytes - 1);
  const std::uint32_t smem_a = base;
  const std::uint32_t smem_b = base + S * Cfg::ABytes;
  const std::uint32_t bars = smem_b + S * Cfg::BBytes;
  auto full_bar = [&](int s) { return bars + 8u * s; };
  auto empty_bar = [&](int s) { return bars + 8u * (S + s); };

  const int warpgroup = threadIdx.x / 128;
  const int tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(full_bar(s), 1);
      mbar_init(empty_bar(s), Cfg::PingPong ? 1 : kConsumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&map_a)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&map_b)) : "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    // Producer: give most registers to the consumers.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {
      int stage = 0;
      std::uint32_t phase = 0;
      for (int tile = blockIdx.x; tile < p.total_tiles; tile += gridDim.x) {
        int batch, tm, tn;
        decode_tile(p, tile, batch, tm, tn);
        for (int kb = 0; kb < p.k_blocks; ++kb) {
          mbar_wait(empty_bar(stage), phase ^ 1);  // a fresh barrier passes parity 1 at once
          mbar_expect_tx(full_bar(stage), Cfg::StageBytes);
          tma_load_3d(smem_a + stage * Cfg::ABytes, &map_a, kb * kBlockK, tm * BM, batch * p.a_batch_step,
                      full_bar(stage));
          if constexpr (BKMajor) {
            tma_load_3d(smem_b + stage * Cfg::BBytes, &map_b, kb * kBlockK, tn * BN, batch * p.b_batch_step,
                        full_bar(stage));
          } else {
            // N-major B: 64 (n) x 64 (k) boxes, each 64 k-rows of 128 bytes = 8 KiB.
#pragma unroll
            for (int j = 0; j < BN / 64; ++j) {
              tma_load_3d(smem_b + stage * Cfg::BBytes + j * 64 * 128, &map_b, tn * BN + j * 64, kb * kBlockK,
                          batch * p.b_batch_step, full_bar(stage));
            }
          }
          if (++stage == S) { stage = 0; phase ^= 1; }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int consumer = warpgroup - 1;
    const int row_slice0 = Cfg::PingPong ? 0 : consumer * MS;  // first m64 slice of this consumer
    float acc[MS][BN / 2];
    int stage = 0;
    std::uint32_t phase = 0;
    const int warp = tid / 32, lane = tid % 32;
    const int first_local = Cfg::PingPong ? consumer : 0;
    const int local_step = Cfg::PingPong ? kConsumers : 1;
    for (int local = first_local;; local += local_step) {
      const int tile = blockIdx.x + local * gridDim.x;
      if (tile >= p.total_tiles) break;
      int batch, tm, tn;
      decode_tile(p, tile, batch, tm, tn);
      if constexpr (Cfg::PingPong) {
        // This tile's K blocks follow the other consumer's in the stage ring.
        const long long count = static_cast<long long>(local) * p.k_blocks;
        stage = static_cast<int>(count % S);
        phase = static_cast<std::uint32_t>((count / S) & 1);
        // Wait for the other consumer's main loop on the previous tile (named barrier 1 + c:
        // 128 threads arrive from the other consumer, 128 sync here). The mbarrier parities are
        // only unambiguous once every earlier K block has been consumed.
        if (local > 0) asm volatile("bar.sync %0, 256;" ::"r"(1 + consumer) : "memory");
      }
      int prev_stage = -1;
      for (int kb = 0; kb < p.k_blocks; ++kb) {
        mbar_wait(full_bar(stage), phase);
#pragma unroll
        for (int ms = 0; ms < MS; ++ms) fence_operands(acc[ms]);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kBlockK / 16; ++ks) {
          std::uint64_t db;
          if constexpr (BKMajor) {
            // K-major: rows of 128 bytes (64 k), 8-row atoms 1024 bytes apart; a k16 step is
            // 32 bytes into the (swizzled) row.
            db = smem_desc(smem_b + stage * Cfg::BBytes + ks * 32, 16, 1024);
          } else {
            // N-major: 128-byte rows hold 64 n; a k16 step is 16 rows down.
            db = smem_desc(smem_b + stage * Cfg::BBytes + ks * 16 * 128, p.b_lbo, p.b_sbo);
          }
#pragma unroll
          for (int ms = 0; ms < MS; ++ms) {
            const std::uint32_t a_addr =
                smem_a + stage * Cfg::ABytes + (row_slice0 + ms) * 64 * 128 + ks * 32;
            wgmma_tile<T, BN, BKMajor ? 0 : 1>(acc[ms], smem_desc(a_addr, 16, 1024), db, (kb > 0 || ks > 0) ? 1 : 0);
          }
        }
        wgmma_commit();
#pragma unroll
        for (int ms = 0; ms < MS; ++ms) fence_operands(acc[ms]);
        // The previous K block's wgmma group is done once at most this one is pending.
        wgmma_wait<1>();
        if (prev_stage >= 0 && tid == 0) mbar_arrive(empty_bar(prev_stage));
        prev_stage = stage;
        if (++stage == S) { stage = 0; phase ^= 1; }
      }
      if constexpr (Cfg::PingPong) {
        // Hand the tensor cores to the other consumer if it has a next tile.
        if (static_cast<long long>(blockIdx.x) + static_cast<long long>(local + 1) * gridDim.x < p.total_tiles)
          asm volatile("bar.arrive %0, 256;" ::"r"(1 + (consumer ^ 1)) : "memory");
      }
      wgmma_wait<0>();
#pragma unroll
      for (int ms = 0; ms < MS; ++ms) fence_operands(acc[ms]);
      if (prev_stage >= 0 && tid == 0) mbar_arrive(empty_bar(prev_stage));

      // Epilogue. Accumulator layout of m64nNk16: thread (warp w, lane l) holds rows
      // w*16 + l/4 (+8) and columns 8j + 2(l%4) (+1) in d[4j + 2i + c]. Three passes over the
      // registers (scale + bias, activation, store) keep the code small: the activation is
      // chosen once per tile, not once per element.
      const T* bias = static_cast<const T*>(p.bias);
      const int col0 = tn * BN + 2 * (lane % 4);
      if (bias != nullptr || p.alpha != 1.0f) {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = col0 + 8 * j;
          float b0 = 0.0f, b1 = 0.0f;
          if (bias != nullptr) {
            if (col < p.n) b0 = to_float(bias[col]);
            if (col + 1 < p.n) b1 = to_float(bias[col + 1]);
          }
#pragma unroll
          for (int ms = 0; ms < MS; ++ms) {
            acc[ms][4 * j + 0] = fmaf(p.alpha, acc[ms][4 * j + 0], b0);
            acc[ms][4 * j + 1] = fmaf(p.alpha, acc[ms][4 * j + 1], b1);
            acc[ms][4 * j + 2] = fmaf(p.alpha, acc[ms][4 * j + 2], b0);
            acc[ms][4 * j + 3] = fmaf(p.alpha, acc[ms][4 * j + 3], b1);
          }
        }
      }
      // Masked stores straight from the registers: 4-byte stores of 2 elements when the row
      // strides are even (the usual case), else 2-byte stores (odd n, e.g. x @ W.T with W n x k).
      // The choice is uniform and made outside the loops.
      auto store_tile = [&](T* out_batch, long long ld) {
        auto rows = [&](auto pairs) {
#pragma unroll
          for (int ms = 0; ms < MS; ++ms) {
            const int row0 = tm * BM + (row_slice0 + ms) * 64 + warp * 16 + lane / 4;
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              const int row = row0 + 8 * i;
              if (row >= p.m) continue;
              T* out_row = out_batch + static_cast<long long>(row) * ld;
#pragma unroll
              for (int j = 0; j < BN / 8; ++j) {
                const int col = col0 + 8 * j;
                const float v0 = acc[ms][4 * j + 2 * i], v1 = acc[ms][4 * j + 2 * i + 1];
                if constexpr (decltype(pairs)::value) {
                  if (col + 1 < p.n) *reinterpret_cast<std::uint32_t*>(out_row + col) = pack2<T>(v0, v1);
                  else if (col < p.n) out_row[col] = from_float<T>(v0);
                } else {
                  if (col < p.n) out_row[col] = from_float<T>(v0);
                  if (col + 1 < p.n) out_row[col + 1] = from_float<T>(v1);
                }
              }
            }
          }
        };
        if (p.pair_stores) rows(std::true_type{});
        else rows(std::false_type{});
      };
      // Training's aux output: the activation's input, stored before the activation pass.
      if (p.aux != nullptr) store_tile(static_cast<T*>(p.aux) + static_cast<long long>(batch) * p.batch_stride_aux, p.ldaux);
      switch (static_cast<Epilogue>(p.epilogue)) {
        case Epilogue::bias_relu:
        case Epilogue::relu:
#pragma unroll
          for (int ms = 0; ms < MS; ++ms)
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) acc[ms][r] = tessel::activation::relu(acc[ms][r]);
          break;
        case Epilogue::bias_gelu:
        case Epilogue::gelu:
#pragma unroll
          for (int ms = 0; ms < MS; ++ms)
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) acc[ms][r] = tessel::activation::gelu(acc[ms][r]);
          break;
        case Epilogue::bias_gelu_tanh:
        case Epilogue::gelu_tanh:
#pragma unroll
          for (int ms = 0; ms < MS; ++ms)
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) acc[ms][r] = tessel::activation::gelu_tanh(acc[ms][r]);
          break;
        default:
          break;
      }
      store_tile(static_cast<T*>(p.d) + static_cast<long long>(batch) * p.batch_stride_d, p.ldd);
    }
  }
#endif
}

// ---------------------------------------------------------------------------------------------
// Host side.

struct ConfigInfo {
  const char* name;
  int bm, bn;
};
constexpr std::array<ConfigInfo, 4> kConfigs = {{
    {"sm90_128x256x64_s4", 128, 256},
    {"sm90_256x128x64_s4", 256, 128},
    {"sm90_128x128x64_s6", 128, 128},
    {"sm90_128x128x64_s6_pingpong", 128, 128},
}};
using Config0 = TileConfig<256, 1, 4>;
using Config1 = TileConfig<128, 2, 4>;
using Config2 = TileConfig<128, 1, 6>;
using Config3 = TileConfig<128, 2, 6, true>;

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::none: return "none";
    case Epilogue::bias: return "bias";
    case Epilogue::bias_relu: return "bias_relu";
    case Epilogue::bias_gelu: return "bias_gelu";
    case Epilogue::bias_gelu_tanh: return "bias_gelu_tanh";
    case Epilogue::relu: return "relu";
    case Epilogue::gelu: return "gelu";
    case Epilogue::gelu_tanh: return "gelu_tanh";
  }
  return "?";
}

bool epilogue_uses_bias(Epilogue e) {
  return e == Epilogue::bias || e == Epilogue::bias_relu || e == Epilogue::bias_gelu ||
         e == Epilogue::bias_gelu_tanh;
}

// Whether `device` is compute capability 9.0 and the loaded image is the sm_90a one.
bool device_supported(int device) {
  static std::mutex mutex;
  static std::array<int, 64> cache{};  // 0 unknown, 1 yes, 2 no
  if (device < 0 || device >= static_cast<int>(cache.size())) return false;
  std::lock_guard<std::mutex> lock(mutex);
  if (cache[device] == 0) {
    int major = 0, minor = 0, image = 0;
    bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
              cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
              major == 9 && minor == 0;
    if (ok) {
      int previous = -1;
      TESSEL_CUDA_CHECK(cudaGetDevice(&previous), "matmul_sm90");
      if (previous != device) TESSEL_CUDA_CHECK(cudaSetDevice(device), "matmul_sm90");
      const cudaError_t status = cudaMemcpyFromSymbol(&image, g_sm90a_image, sizeof(int));
      if (previous != device) TESSEL_CUDA_CHECK(cudaSetDevice(previous), "matmul_sm90");
      // No kernel image for this device (a build without sm_90a) is "not supported".
      if (status != cudaSuccess) {
        (void)cudaGetLastError();
        image = 0;
      }
      ok = image == 1;
    }
    cache[device] = ok ? 1 : 2;
  }
  return cache[device] == 1;
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15) == 0; }

// The reason `args` cannot run with `config`, or "" when it can (device aside).
std::string unsupported_reason(const GemmArgs& a, int config) {
  constexpr std::int64_t kMaxDim = (std::int64_t{1} << 31) - 1;
  if (config < 0 || config >= static_cast<int>(kConfigs.size())) return "no such config " + std::to_string(config);
  if (a.dtype != 0 && a.dtype != 1) return "dtype must be 0 (float16) or 1 (bfloat16)";
  if (a.m < 1 || a.n < 1 || a.k < 1 || a.batch < 1) return "m, n, k and batch must be >= 1";
  if (a.m > kMaxDim || a.n > kMaxDim || a.k > kMaxDim || a.batch > 65535) return "problem too large";
  const std::int64_t tiles = ((a.m + kConfigs[config].bm - 1) / kConfigs[config].bm) *
                             ((a.n + kConfigs[config].bn - 1) / kConfigs[config].bn) * a.batch;
  if (tiles > kMaxDim) return "too many tiles";
  if (a.a == nullptr || a.b == nullptr || a.d == nullptr) return "null operand";
  // A and B are read by TMA (16-byte aligned base and strides); D and aux are written with plain
  // stores (2-byte elements; pairs when the strides are even, see pair_stores).
  if (!aligned16(a.a) || !aligned16(a.b)) return "A and B must be 16-byte aligned";
  if ((reinterpret_cast<std::uintptr_t>(a.d) & 1) != 0) return "D must be 2-byte aligned";
  if (a.lda % 8 != 0 || a.ldb % 8 != 0) return "leading dimensions of A and B must be multiples of 8";
  if (a.lda < a.k || a.ldb < (a.b_k_contiguous ? a.k : a.n) || a.ldd < a.n) return "leading dimension too small";
  if (a.batch > 1) {
    if (a.batch_stride_a < 0 || a.batch_stride_b < 0 || a.batch_stride_d <= 0) return "bad batch strides";
    if (a.batch_stride_a % 8 != 0 || a.batch_stride_b % 8 != 0) return "batch strides of A and B must be multiples of 8";
  }
  if (a.aux != nullptr) {
    if ((reinterpret_cast<std::uintptr_t>(a.aux) & 1) != 0 || a.ldaux < a.n) return "aux must be 2-byte aligned with ldaux >= n";
    if (a.batch > 1 && a.batch_stride_aux <= 0) return "bad aux batch stride";
  }
  if (epilogue_uses_bias(a.epilogue) && a.bias == nullptr) return std::string("epilogue ") + epilogue_name(a.epilogue) + " needs a bias";
  if (static_cast<int>(a.epilogue) < 0 || static_cast<int>(a.epilogue) > static_cast<int>(Epilogue::gelu_tanh))
    return "unknown epilogue";
  return "";
}

PFN_cuTensorMapEncodeTiled_v12000 encode_function() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    TESSEL_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &query),
                      "matmul_sm90");
    if (query != cudaDriverEntryPointSuccess || entry == nullptr)
      throw CudaError("matmul_sm90: the driver has no cuTensorMapEncodeTiled", 0, false);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  return fn;
}

// A rank-3 (inner, outer, batch) tiled tensor map with 128-byte swizzle.
CUtensorMap make_map(const void* ptr, CUtensorMapDataType type, std::int64_t inner, std::int64_t outer,
                     std::int64_t ld, std::int64_t batches, std::int64_t batch_stride, int box_inner, int box_outer,
                     const char* what) {
  CUtensorMap map;
  if (batches == 1) batch_stride = ld * outer;  // unused, but must be a valid stride
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer),
                              static_cast<cuuint64_t>(batches)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld * 2), static_cast<cuuint64_t>(batch_stride * 2)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_inner), static_cast<cuuint32_t>(box_outer), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult status = encode_function()(&map, type, 3, const_cast<void*>(ptr), dims, strides, box, element_strides,
                                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw CudaError(std::string("matmul_sm90: cuTensorMapEncodeTiled failed for ") + what + " (CUresult " +
                        std::to_string(static_cast<int>(status)) + ", dims " + std::to_string(inner) + "x" +
                        std::to_string(outer) + "x" + std::to_string(batches) + ", ld " + std::to_string(ld) + ")",
                    static_cast<int>(status), false);
  }
  return map;
}

constexpr int kMaxDevices = 64;

template <class T, class Cfg, bool BKMajor>
void launch(const GemmArgs& a, cudaStream_t stream, std::uint32_t b_lbo, std::uint32_t b_sbo) {
  const CUtensorMapDataType type =
      std::is_same_v<T, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const std::int64_t a_batches = (a.batch > 1 && a.batch_stride_a != 0) ? a.batch : 1;
  const std::int64_t b_batches = (a.batch > 1 && a.batch_stride_b != 0) ? a.batch : 1;
  const CUtensorMap map_a = make_map(a.a, type, a.k, a.m, a.lda, a_batches, a.batch_stride_a, kBlockK, Cfg::BM, "A");
  const CUtensorMap map_b =
      BKMajor ? make_map(a.b, type, a.k, a.n, a.ldb, b_batches, a.batch_stride_b, kBlockK, Cfg::BN, "B")
              : make_map(a.b, type, a.n, a.k, a.ldb, b_batches, a.batch_stride_b, 64, kBlockK, "B");

  KernelParams p{};
  p.m = static_cast<int>(a.m);
  p.n = static_cast<int>(a.n);
  p.k = static_cast<int>(a.k);
  p.tiles_m = static_cast<int>((a.m + Cfg::BM - 1) / Cfg::BM);
  p.tiles_n = static_cast<int>((a.n + Cfg::BN - 1) / Cfg::BN);
  p.k_blocks = static_cast<int>((a.k + kBlockK - 1) / kBlockK);
  p.total_tiles = static_cast<int>(static_cast<std::int64_t>(p.tiles_m) * p.tiles_n * a.batch);
  p.a_batch_step = a_batches > 1 ? 1 : 0;
  p.b_batch_step = b_batches > 1 ? 1 : 0;
  p.b_lbo = b_lbo;
  p.b_sbo = b_sbo;
  p.d = a.d;
  p.ldd = a.ldd;
  p.batch_stride_d = a.batch > 1 ? a.batch_stride_d : 0;
  p.bias = epilogue_uses_bias(a.epilogue) ? a.bias : nullptr;
  p.alpha = a.alpha;
  p.epilogue = static_cast<int>(a.epilogue);
  p.aux = a.aux;
  p.ldaux = a.ldaux;
  p.batch_stride_aux = a.batch > 1 ? a.batch_stride_aux : 0;
  auto even = [](long long x) { return x % 2 == 0; };
  auto aligned4 = [](const void* x) { return (reinterpret_cast<std::uintptr_t>(x) & 3) == 0; };
  p.pair_stores = aligned4(a.d) && even(a.ldd) && even(p.batch_stride_d) &&
                  (a.aux == nullptr || (aligned4(a.aux) && even(a.ldaux) && even(p.batch_stride_aux)));

  // The SM count and the shared-memory opt-in are per device and kernel: asked once, so that a
  // run costs the autotuner (and small problems) no more host time than needed.
  int device = 0;
  TESSEL_CUDA_CHECK(cudaGetDevice(&device), "matmul_sm90");
  if (device < 0 || device >= kMaxDevices) throw ValueError("matmul_sm90: device index out of range");
  static std::array<int, kMaxDevices> sm_count{};      // 0: not asked yet
  static std::array<bool, kMaxDevices> smem_opted_in{};
  static std::mutex launch_mutex;
  int sms = 0;
  auto kernel = gemm_kernel<T, Cfg, BKMajor>;
  {
    std::lock_guard<std::mutex> lock(launch_mutex);
    if (sm_count[device] == 0) {
      TESSEL_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count[device], cudaDevAttrMultiProcessorCount, device), "matmul_sm90");
    }
    if (!smem_opted_in[device]) {
      TESSEL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SmemBytes),
                        "matmul_sm90");
      smem_opted_in[device] = true;
    }
    sms = sm_count[device];
  }
  const int grid = p.total_tiles < sms ? p.total_tiles : sms;
  kernel<<<grid, kThreads, Cfg::SmemBytes, stream>>>(map_a, map_b, p);
  TESSEL_CUDA_CHECK_LAUNCH(stream, "matmul_sm90");
}

template <class T, class Cfg>
void launch_layout(const GemmArgs& a, cudaStream_t stream, std::uint32_t b_lbo, std::uint32_t b_sbo) {
  if (a.b_k_contiguous) launch<T, Cfg, true>(a, stream, b_lbo, b_sbo);
  else launch<T, Cfg, false>(a, stream, b_lbo, b_sbo);
}

template <class T>
void launch_config(const GemmArgs& a, int config, cudaStream_t stream, std::uint32_t b_lbo, std::uint32_t b_sbo) {
  switch (config) {
    case 0: launch_layout<T, Config0>(a, stream, b_lbo, b_sbo); break;
    case 1: launch_layout<T, Config1>(a, stream, b_lbo, b_sbo); break;
    case 2: launch_layout<T, Config2>(a, stream, b_lbo, b_sbo); break;
    default: launch_layout<T, Config3>(a, stream, b_lbo, b_sbo); break;
  }
}

}  // namespace

int num_configs() { return static_cast<int>(kConfigs.size()); }

const char* config_name(int config) {
  if (config < 0 || config >= num_configs()) return "invalid";
  return kConfigs[config].name;
}

bool can_implement(const GemmArgs& args, int config) {
  if (!unsupported_reason(args, config).empty()) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return device_supported(device);
}

// Descriptor offsets of an N-major B tile (64-column boxes 8 KiB apart, 8-row k groups 1 KiB
// apart): leading byte offset = distance between swizzle atoms along N, stride byte offset =
// distance between atoms along K. Exposed for the standalone device test, which can try others.
void run_with_offsets(const GemmArgs& args, int config, void* stream, std::uint32_t lbo, std::uint32_t sbo);

void run(const GemmArgs& args, int config, void* stream) {
  run_with_offsets(args, config, stream, 64 * 128, kSwizzleAtomBytes);
}

void run_with_offsets(const GemmArgs& args, int config, void* stream, std::uint32_t lbo, std::uint32_t sbo) {
  const std::string reason = unsupported_reason(args, config);
  if (!reason.empty()) {
    throw ValueError("matmul_sm90: cannot run " + std::to_string(args.m) + "x" + std::to_string(args.n) + "x" +
                     std::to_string(args.k) + " (batch " + std::to_string(args.batch) + ") with config " +
                     config_name(config) + ": " + reason);
  }
  int device = 0;
  TESSEL_CUDA_CHECK(cudaGetDevice(&device), "matmul_sm90");
  if (!device_supported(device)) {
    throw ValueError("matmul_sm90: device " + std::to_string(device) +
                     " is not compute capability 9.0 or tessel was built without sm_90a");
  }
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (args.dtype == 1) launch_config<__nv_bfloat16>(args, config, cuda_stream, lbo, sbo);
  else launch_config<__half>(args, config, cuda_stream, lbo, sbo);
}

}  // namespace tessel::internal::sm90
