// The ceilings every workload is compared with, measured at the start of the same run:
// device-to-device copy bandwidth, cuBLAS fp32/tf32/bf16 GEMM rates and pinned H2D/D2H
// bandwidth on a GPU; a parallel memcpy on the CPU backend.
#include <cstring>

#include <omp.h>

#include "bench_suite.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/ops/random.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "tessel/core/cublas_check.hpp"
#endif

namespace tessel::cli::bench {

nlohmann::json Ceilings::to_json() const {
  return {{"copy_GBps", copy_GBps},         {"gemm_fp32_TFLOPs", gemm_fp32_TFLOPs}, {"gemm_tf32_TFLOPs", gemm_tf32_TFLOPs},
          {"gemm_bf16_TFLOPs", gemm_bf16_TFLOPs}, {"h2d_GBps", h2d_GBps},          {"d2h_GBps", d2h_GBps}};
}

double Context::median_ms(const std::function<void()>& body) const {
  return profile::time_on_stream(body, stream, timing()).median_ms;
}

namespace {

double cpu_copy_GBps(const Context& ctx) {
  const std::int64_t bytes = ctx.quick ? (std::int64_t{1} << 27) : (std::int64_t{1} << 29);
  auto src = Buffer::allocate(Device::cpu(), bytes);
  auto dst = Buffer::allocate(Device::cpu(), bytes);
  std::memset(src->data(), 0x5a, static_cast<std::size_t>(bytes));  // first touch outside the timing
  std::memset(dst->data(), 0, static_cast<std::size_t>(bytes));
  const double ms = profile::time_on_host([&] {
    const int threads = omp_get_max_threads();
#pragma omp parallel for num_threads(threads)
    for (int t = 0; t < threads; ++t) {
      const std::int64_t begin = bytes * t / threads, end = bytes * (t + 1) / threads;
      std::memcpy(static_cast<char*>(dst->data()) + begin, static_cast<const char*>(src->data()) + begin,
                  static_cast<std::size_t>(end - begin));
    }
  }, ctx.timing()).median_ms;
  return 2.0 * static_cast<double>(bytes) / ms / 1e6;
}

#if defined(TESSEL_HAVE_CUDA)
void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string("bench ceilings: ") + what + ": " + cudaGetErrorString(status));
}

double gpu_copy_GBps(const Context& ctx) {
  const std::int64_t n = ctx.quick ? (std::int64_t{1} << 26) : (std::int64_t{1} << 28);  // float32
  Array src = random::uniform({n}, -1, 1, DType::float32, ctx.device, ctx.stream);
  Array dst = empty({n}, DType::float32, ctx.device, ctx.stream);
  auto s = static_cast<cudaStream_t>(ctx.stream.handle());
  const double ms = ctx.median_ms([&] {
    check_cuda(cudaMemcpyAsync(dst.data(), src.data(), static_cast<std::size_t>(n) * 4, cudaMemcpyDeviceToDevice, s),
               "device copy");
  });
  return 2.0 * static_cast<double>(n) * 4 / ms / 1e6;
}

// One cuBLAS GEMM of size n^3 on random data: its rate in TFLOP/s.
double cublas_gemm_TFLOPs(const Context& ctx, DType dtype, cublasComputeType_t compute, std::int64_t n) {
  cublasHandle_t handle = nullptr;
  TESSEL_CUBLAS_CHECK(cublasCreate(&handle), "cublasCreate");
  struct HandleGuard {
    cublasHandle_t h;
    ~HandleGuard() { cublasDestroy(h); }
  } guard{handle};
  TESSEL_CUBLAS_CHECK(cublasSetStream(handle, static_cast<cudaStream_t>(ctx.stream.handle())), "cublasSetStream");
  auto workspace = Buffer::allocate(ctx.device, std::int64_t{64} << 20, ctx.stream);
  TESSEL_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace->data(), 64u << 20), "cublasSetWorkspace");
  Array a = random::uniform({n, n}, -1, 1, dtype, ctx.device, ctx.stream);
  Array b = random::uniform({n, n}, -1, 1, dtype, ctx.device, ctx.stream);
  Array c = empty({n, n}, dtype, ctx.device, ctx.stream);
  const cudaDataType_t type = dtype == DType::bfloat16 ? CUDA_R_16BF : CUDA_R_32F;
  const float alpha = 1.0f, beta = 0.0f;
  const int dim = static_cast<int>(n);
  const double ms = ctx.median_ms([&] {
    TESSEL_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha, a.data(), type, dim, b.data(), type,
                              dim, &beta, c.data(), type, dim, compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  return 2.0 * static_cast<double>(n) * n * n / ms / 1e9;
}

// One-direction pinned bandwidth, GB/s.
std::pair<double, double> pinned_GBps(const Context& ctx) {
  const std::int64_t bytes = ctx.quick ? (std::int64_t{1} << 27) : (std::int64_t{1} << 29);
  auto host = Buffer::allocate_pinned(bytes);
  std::memset(host->data(), 0x3c, static_cast<std::size_t>(bytes));
  auto device = Buffer::allocate(ctx.device, bytes, ctx.stream);
  auto s = static_cast<cudaStream_t>(ctx.stream.handle());
  const double h2d = ctx.median_ms([&] {
    check_cuda(cudaMemcpyAsync(device->data(), host->data(), static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice, s), "H2D");
  });
  const double d2h = ctx.median_ms([&] {
    check_cuda(cudaMemcpyAsync(host->data(), device->data(), static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost, s), "D2H");
  });
  return {static_cast<double>(bytes) / h2d / 1e6, static_cast<double>(bytes) / d2h / 1e6};
}
#endif

}  // namespace

Ceilings measure_ceilings(Context& ctx) {
  Ceilings c;
  if (ctx.device.is_cpu()) {
    c.copy_GBps = cpu_copy_GBps(ctx);
    return c;
  }
#if defined(TESSEL_HAVE_CUDA)
  c.copy_GBps = gpu_copy_GBps(ctx);
  c.gemm_fp32_TFLOPs = cublas_gemm_TFLOPs(ctx, DType::float32, CUBLAS_COMPUTE_32F, 4096);
  c.gemm_tf32_TFLOPs = cublas_gemm_TFLOPs(ctx, DType::float32, CUBLAS_COMPUTE_32F_FAST_TF32, 4096);
  c.gemm_bf16_TFLOPs = cublas_gemm_TFLOPs(ctx, DType::bfloat16, CUBLAS_COMPUTE_32F, ctx.quick ? 4096 : 8192);
  std::tie(c.h2d_GBps, c.d2h_GBps) = pinned_GBps(ctx);
#endif
  return c;
}

}  // namespace tessel::cli::bench
