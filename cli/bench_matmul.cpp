// GEMM workloads: float32 1024^2 x100 (fp32 and tf32), relu(a @ b + bias) in bf16 at three
// shapes through an autotuned plan, and the seeds' optimization ladder on 2048^3 float32.
#include <cmath>
#include <array>
#include <cstring>
#include <functional>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "bench_suite.hpp"
#include "tessel/core/event.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/matmul.hpp"
#include "tessel/ops/matmul_kernels.hpp"
#include "tessel/ops/random.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace tessel::cli::bench {
namespace {

// Largest |got - want| over sampled entries of d = epilogue(a @ b + bias), relative to the
// largest |want| (norm-wise, as METHOD.md measures precision), from float64 host copies.
double sampled_error(const Array& a, const Array& b, const Array& bias, bool relu, const Array& d, int samples = 256) {
  const std::vector<double> av = host_doubles(a), bv = host_doubles(b), dv = host_doubles(d);
  const std::vector<double> biasv = bias.defined() ? host_doubles(bias) : std::vector<double>();
  const std::int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  std::mt19937_64 rng(std::random_device{}());
  double worst = 0, scale = 1e-30;
  for (int s = 0; s < samples; ++s) {
    const std::int64_t i = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(m));
    const std::int64_t j = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
    double want = biasv.empty() ? 0.0 : biasv[static_cast<std::size_t>(j)];
    for (std::int64_t kk = 0; kk < k; ++kk) want += av[static_cast<std::size_t>(i * k + kk)] * bv[static_cast<std::size_t>(kk * n + j)];
    if (relu) want = std::max(want, 0.0);
    const double got = dv[static_cast<std::size_t>(i * n + j)];
    if (!std::isfinite(got)) return INFINITY;
    worst = std::max(worst, std::abs(got - want));
    scale = std::max(scale, std::abs(want));
  }
  return worst / scale;
}

Row gemm_row(const std::string& workload, const std::string& variant, double ms, double flops, double ceiling_TFLOPs,
             const std::string& ceiling) {
  Row r;
  r.workload = workload;
  r.variant = variant;
  r.ms = ms;
  r.unit = "TFLOP/s";
  r.rate = flops / ms / 1e9;
  r.ceiling = ceiling;
  r.pct_of_ceiling = ceiling_TFLOPs > 0 ? 100 * r.rate / ceiling_TFLOPs : 0;
  return r;
}

std::vector<Row> matmul_fp32(Context& ctx) {
  const std::int64_t n = 1024, products = ctx.device.is_cpu() ? 10 : 100;  // 100 takes minutes on a small CPU
  std::vector<Row> rows;
  Array a = random::uniform({n, n}, -1, 1, DType::float32, ctx.device, ctx.stream);
  Array b = random::uniform({n, n}, -1, 1, DType::float32, ctx.device, ctx.stream);
  for (const auto& [mode, compute, tol, ceiling, ceiling_rate] :
       {std::tuple{"fp32", MatmulCompute::fp32, 1e-5, "cuBLAS fp32", ctx.ceilings.gemm_fp32_TFLOPs},
        std::tuple{"tf32", MatmulCompute::tf32, 3e-3, "cuBLAS tf32", ctx.ceilings.gemm_tf32_TFLOPs}}) {
    const std::string variant = fmt::format("1024^2 x{}, {}", products, mode);
    MatmulOptions options;
    options.compute = compute;
    Array d = matmul(a, b, options, Array(), ctx.stream);
    const double err = sampled_error(a, b, Array(), false, d);
    if (!(err <= tol)) {
      rows.push_back(failed_row("matmul_fp32", variant, fmt::format("relative error {:.3g} > {:g}", err, tol)));
      continue;
    }
    const double ms = ctx.median_ms([&] {
      for (int i = 0; i < products; ++i) matmul(a, b, options, d, ctx.stream);
    });
    Row r = gemm_row("matmul_fp32", variant, ms, 2.0 * n * n * n * products, ceiling_rate, ctx.device.is_cuda() ? ceiling : "");
    rows.push_back(r);
  }
  return rows;
}

std::vector<Row> relu_matmul_bf16(Context& ctx) {
  std::vector<std::array<std::int64_t, 3>> shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}, {16384, 4096, 1024}};
  if (ctx.quick) shapes = {{4096, 4096, 4096}};
  if (ctx.device.is_cpu()) shapes = {{512, 512, 512}};
  std::vector<Row> rows;
  for (const auto& [m, n, k] : shapes) {
    const std::string variant = fmt::format("{}x{}x{}, autotuned plan", m, n, k);
    Array a = random::uniform({m, k}, -1, 1, DType::bfloat16, ctx.device, ctx.stream);
    Array b = random::uniform({k, n}, -1, 1, DType::bfloat16, ctx.device, ctx.stream);
    MatmulOptions options;
    options.bias = random::uniform({n}, -1, 1, DType::bfloat16, ctx.device, ctx.stream);
    options.epilogue = MatmulEpilogue::relu;
    MatmulPlan plan(a, b, options, ctx.stream);
    if (!ctx.quick) plan.autotune(5);
    Array d = full({m, n}, NAN, DType::bfloat16, ctx.device, ctx.stream);
    plan.execute(a, b, options, d, ctx.stream);
    const double err = sampled_error(a, b, options.bias, true, d, 64);
    if (!(err <= 1e-2)) {
      rows.push_back(failed_row("relu_matmul_bf16", variant, fmt::format("relative error {:.3g} > 1e-2", err)));
      continue;
    }
    const double ms = ctx.median_ms([&] { plan.execute(a, b, options, d, ctx.stream); });
    Row r = gemm_row("relu_matmul_bf16", variant, ms, 2.0 * m * n * k, ctx.ceilings.gemm_bf16_TFLOPs,
                     ctx.device.is_cuda() ? "cuBLAS bf16" : "");
    r.note = plan.selected().name + (plan.from_cache() ? " (tuned earlier)" : "");
    rows.push_back(r);
  }
  return rows;
}

#if defined(TESSEL_HAVE_CUDA)
// The seeds' ladder, end to end from pinned host memory to pinned host memory, 2048^3 float32:
// naive kernel, shared-memory tiles, tiles with 4 streams overlapping the copies, and tessel's
// library path with the same overlap.
std::vector<Row> matmul_ladder(Context& ctx) {
  if (ctx.device.is_cpu()) return {skipped_row("matmul_ladder", "2048^3 float32", "the ladder's kernels are CUDA kernels")};
  const std::int64_t n = 2048, streams = 4, block = n / streams;
  const double flops = 2.0 * n * n * n;
  Array host_a = random::uniform({n, n}, -1, 1, DType::float32, Device::cpu());
  Array host_b = random::uniform({n, n}, -1, 1, DType::float32, Device::cpu());
  auto pinned_a = Buffer::allocate_pinned(n * n * 4), pinned_b = Buffer::allocate_pinned(n * n * 4),
       pinned_d = Buffer::allocate_pinned(n * n * 4);
  std::memcpy(pinned_a->data(), host_a.data(), static_cast<std::size_t>(n * n * 4));
  std::memcpy(pinned_b->data(), host_b.data(), static_cast<std::size_t>(n * n * 4));
  Array a = empty({n, n}, DType::float32, ctx.device, ctx.stream), b = empty({n, n}, DType::float32, ctx.device, ctx.stream),
        d = empty({n, n}, DType::float32, ctx.device, ctx.stream);
  std::vector<Stream> lanes;
  for (int i = 0; i < streams; ++i) lanes.push_back(Stream::create(ctx.device));
  auto copy = [](void* dst, const void* src, std::int64_t bytes, cudaMemcpyKind kind, const Stream& s) {
    if (cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes), kind, static_cast<cudaStream_t>(s.handle())) != cudaSuccess) {
      throw Error("bench matmul_ladder: cudaMemcpyAsync failed");
    }
  };
  char* const pa = static_cast<char*>(pinned_a->data());
  char* const pd = static_cast<char*>(pinned_d->data());
  using Kernel = std::function<void(const float*, const float*, float*, std::int64_t, const Stream&)>;
  auto single_stream = [&](const Kernel& kernel) {
    return [&, kernel] {
      copy(a.data(), pa, n * n * 4, cudaMemcpyHostToDevice, ctx.stream);
      copy(b.data(), pinned_b->data(), n * n * 4, cudaMemcpyHostToDevice, ctx.stream);
      kernel(a.data_as<float>(), b.data_as<float>(), d.data_as<float>(), n, ctx.stream);
      copy(pd, d.data(), n * n * 4, cudaMemcpyDeviceToHost, ctx.stream);
    };
  };
  // Row blocks of A and D move on their own stream while B is copied once up front.
  auto multi_stream = [&](const Kernel& kernel) {
    return [&, kernel] {
      Event b_ready(ctx.device, false);
      copy(b.data(), pinned_b->data(), n * n * 4, cudaMemcpyHostToDevice, ctx.stream);
      b_ready.record(ctx.stream);
      Event start(ctx.device, false);
      for (int i = 0; i < streams; ++i) {
        const std::int64_t offset = i * block * n;
        lanes[i].wait(b_ready);
        copy(a.data_as<float>() + offset, pa + offset * 4, block * n * 4, cudaMemcpyHostToDevice, lanes[i]);
        kernel(a.data_as<float>() + offset, b.data_as<float>(), d.data_as<float>() + offset, block, lanes[i]);
        copy(pd + offset * 4, d.data_as<float>() + offset, block * n * 4, cudaMemcpyDeviceToHost, lanes[i]);
      }
      for (int i = 0; i < streams; ++i) {
        Event done(ctx.device, false);
        done.record(lanes[i]);
        ctx.stream.wait(done);
      }
    };
  };
  const Kernel naive = [](const float* x, const float* y, float* z, std::int64_t rows, const Stream& s) {
    tessel::internal::naive_sgemm(x, y, z, rows, 2048, 2048, s);
  };
  const Kernel tiled = [](const float* x, const float* y, float* z, std::int64_t rows, const Stream& s) {
    tessel::internal::tiled_sgemm(x, y, z, rows, 2048, 2048, s);
  };
  const Kernel library = [&](const float* x, const float* /*b, planned*/, float* z, std::int64_t rows, const Stream& s) {
    const Array xa = a.as_strided({rows, n}, {n, 1}, (x - a.data_as<float>()));
    const Array za = d.as_strided({rows, n}, {n, 1}, (z - d.data_as<float>()));
    MatmulOptions options;
    options.compute = MatmulCompute::fp32;
    matmul(xa, b, options, za, s);
  };
  const std::vector<std::pair<std::string, std::function<void()>>> rungs = {
      {"1 naive kernel", single_stream(naive)},
      {"2 shared-memory tiles", single_stream(tiled)},
      {"3 tiles + 4 streams", multi_stream(tiled)},
      {"4 tessel matmul + 4 streams", multi_stream(library)}};
  std::vector<Row> rows;
  double naive_ms = 0;
  for (const auto& [name, body] : rungs) {
    std::memset(pd, 0xff, static_cast<std::size_t>(n * n * 4));  // NaN poison
    body();
    ctx.stream.synchronize();
    for (auto& lane : lanes) lane.synchronize();
    const Array got = from_host(pd, {n, n}, DType::float32, Device::cpu());
    const double err = sampled_error(host_a, host_b, Array(), false, got, 128);
    if (!(err <= 1e-5)) {
      rows.push_back(failed_row("matmul_ladder", name, fmt::format("relative error {:.3g}", err)));
      continue;
    }
    const double ms = ctx.median_ms(body);
    Row r = gemm_row("matmul_ladder", name, ms, flops, ctx.ceilings.gemm_fp32_TFLOPs, "cuBLAS fp32");
    if (naive_ms == 0) naive_ms = ms;
    r.note = fmt::format("{:.1f}x the naive rung, host to host", naive_ms / ms);
    rows.push_back(r);
  }
  return rows;
}
#else
std::vector<Row> matmul_ladder(Context&) {
  return {skipped_row("matmul_ladder", "2048^3 float32", "tessel was built without CUDA")};
}
#endif

}  // namespace

std::vector<Workload> matmul_workloads() {
  return {
      {"matmul_fp32", "100 products of 1024x1024 float32, fp32 and tf32 compute", matmul_fp32},
      {"relu_matmul_bf16", "relu(a @ b + bias) in bfloat16 at three shapes, autotuned plan", relu_matmul_bf16},
      {"matmul_ladder", "2048^3 float32 host to host: naive, tiled, tiled + streams, library", matmul_ladder},
  };
}

}  // namespace tessel::cli::bench
