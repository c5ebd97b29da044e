// Tile-configuration experiment for tessel's float32 SIMT GEMM (issue 5: >= 70% of cuBLAS sgemm
// and >= 10x a naive one-thread-per-output kernel at 4096^2).
//
// The kernel template of src/backend/cuda/matmul_simt_kernel.cuh is compiled at run time with
// NVRTC (tessel::jit::RawKernel) for each configuration below, so the experiment adds nothing to
// the AOT build. Each variant is checked before it is timed: against a float64 host reference on
// an odd problem (517x389x263, unaligned rows: scalar loads, bias + relu epilogue, every element)
// and on sampled outputs of the 4096^3 product. Times are medians of CUDA-event-timed runs after
// warm-up, in the same run as cublasSgemm, the naive kernel and the library's AOT SIMT configs.
// Results go to bench/results/<device>-<date>.json under "matmul_simt_variants".
//
// Usage: matmul_simt_variants_bench [--size=N] (default 4096)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/jit/compiler.hpp"
#include "tessel/jit/kernel.hpp"
#include "tessel/jit/user_kernels.hpp"
#include "tessel/tessel.hpp"

#if !defined(TESSEL_HAVE_CUDA)
int main() {
  std::printf("matmul_simt_variants_bench: skipped: tessel was built without CUDA\n");
  return 0;
}
#else
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "matmul_reference.hpp"
#include "tessel/core/cublas_check.hpp"
#include "tessel/ops/matmul_kernels.hpp"

using namespace tessel;

namespace {

struct Variant {
  internal::SimtTile tile;
  int max_registers = 0;  // > 0: NVRTC's --maxrregcount (e.g. 128: two 256-thread blocks per SM)
  std::string name() const {
    const internal::SimtTile& t = tile;
    std::string s = fmt::format("{}x{}x{}_{}x{}", t.bm, t.bn, t.bk, t.tm, t.tn);
    if (t.warp_x > 0) s += fmt::format("_warp{}x{}", 32 / t.warp_x, t.warp_x);
    if (max_registers > 0) s += fmt::format("_regs{}", max_registers);
    return s;
  }
};

// The configurations tried. Shared memory is static (2 buffers of BK x (BM + BN) floats), so it
// must stay under 48 KiB: BK=16 at 128x128 is 32 KiB.
const std::vector<Variant> kVariants = {
    {{128, 128, 8, 8, 8, 0}},   // the library's default config (JIT vs AOT sanity check)
    {{128, 128, 8, 8, 8, 8}},   // same tile, 4x8 warp patches
    {{128, 128, 8, 8, 8, 4}},   // 8x4 warp patches
    {{128, 128, 16, 8, 8, 0}},  {{128, 128, 16, 8, 8, 8}},
    {{128, 64, 8, 8, 4, 0}},    {{128, 64, 8, 8, 4, 8}},   {{128, 64, 16, 8, 4, 8}},
    {{64, 128, 8, 4, 8, 0}},    {{64, 128, 8, 4, 8, 8}},
    {{256, 128, 8, 16, 8, 0}},  {{256, 128, 8, 16, 8, 8}}, {{128, 256, 8, 8, 16, 0}},
    {{64, 64, 8, 4, 4, 0}},     {{64, 64, 16, 4, 4, 8}},
    // BK=16 at 128x128 took 143 registers (one block per SM); capped for two blocks
    {{128, 128, 16, 8, 8, 0}, 128}, {{128, 128, 16, 8, 8, 8}, 128},
};


std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("matmul_simt_variants_bench: cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Largest error of d against a float64 reference of act(a @ b + bias), relative to the sum of
// |products| of each output; every element (samples = 0) or `samples` random ones.
double reference_error(const Array& d, const std::vector<float>& a, const std::vector<float>& b,
                       const std::vector<float>& bias, bool relu, std::int64_t m, std::int64_t n, std::int64_t k,
                       int samples) {
  const std::vector<float> got = d.to(Device::cpu()).to_vector<float>();
  std::mt19937_64 rng(5);
  double worst = 0;
  const std::int64_t count = samples > 0 ? samples : m * n;
  for (std::int64_t s = 0; s < count; ++s) {
    const std::int64_t i = samples > 0 ? static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(m)) : s / n;
    const std::int64_t j = samples > 0 ? static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)) : s % n;
    const bench::ReferenceEntry want = bench::reference_entry(a, b, bias, i, j, n, k);
    double sum = want.value, scale = want.scale;
    if (relu) sum = std::max(sum, 0.0);
    const double g = got[static_cast<std::size_t>(i * n + j)];
    if (!std::isfinite(g)) return INFINITY;
    worst = std::max(worst, std::abs(g - sum) / (scale + 1e-30));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (bench::skip_without_cuda("matmul_simt_variants_bench")) return 0;
  if (!jit::nvrtc_available()) {
    std::printf("matmul_simt_variants_bench: skipped: tessel was built without NVRTC\n");
    return 0;
  }
  std::int64_t size = 4096;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--size=", 0) == 0) {
      size = std::stoll(arg.substr(7));
    } else {
      std::fprintf(stderr, "usage: matmul_simt_variants_bench [--size=N]\n");
      return 2;
    }
  }
  const Device gpu = Device::cuda(0);
  const Stream stream = current_stream(gpu);
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle());
  cublasHandle_t cublas = nullptr;
  TESSEL_CUBLAS_CHECK(cublasCreate(&cublas), "cublasCreate");
  TESSEL_CUBLAS_CHECK(cublasSetStream(cublas, cuda_stream), "cublasSetStream");
  // The activations first: the kernel header includes them only outside NVRTC.
  const std::string source = read_file(TESSEL_SOURCE_DIR "/src/backend/activation.hpp") +
                             read_file(TESSEL_SOURCE_DIR "/src/backend/cuda/matmul_simt_kernel.cuh");

  const std::int64_t n = size;
  const double flop = 2.0 * n * n * n;
  const Array a = random::uniform({n, n}, -1, 1, DType::float32, gpu);
  const Array b = random::uniform({n, n}, -1, 1, DType::float32, gpu);
  const std::vector<float> ah = a.to(Device::cpu()).to_vector<float>(), bh = b.to(Device::cpu()).to_vector<float>();
  Array d = empty({n, n}, DType::float32, gpu);
  // The odd problem every variant must also get right (edges, scalar loads, fused bias + relu).
  const std::int64_t om = 517, on = 389, ok = 263;
  const Array oa = random::uniform({om, ok}, -1, 1, DType::float32, gpu);
  const Array ob = random::uniform({ok, on}, -1, 1, DType::float32, gpu);
  const Array obias = random::uniform({on}, -1, 1, DType::float32, gpu);
  const std::vector<float> oah = oa.to(Device::cpu()).to_vector<float>(), obh = ob.to(Device::cpu()).to_vector<float>(),
                           obiash = obias.to(Device::cpu()).to_vector<float>();
  Array od = empty({om, on}, DType::float32, gpu);
  const double tol = 1e-5;

  nlohmann::json results;
  results["device"] = device_properties(0).name;
  results["size"] = n;
  bool all_ok = true;
  // Checked on the big problem, then timed; -1 when the check failed.
  auto time_checked = [&](const std::string& name, const std::function<void()>& body, nlohmann::json& row) -> double {
    fill(d, std::nan(""));
    body();
    const double error = reference_error(d, ah, bh, {}, false, n, n, n, 256);
    row["error"] = error;
    if (!(error <= tol)) {
      std::printf("%-32s FAILED check (error %.3g > %.3g)\n", name.c_str(), error, tol);
      row["status"] = "FAILED";
      all_ok = false;
      return -1;
    }
    const double ms = profile::time_on_stream(body, stream, {3, 10}).median_ms;
    row["ms"] = ms;
    row["TFLOPs"] = flop / ms / 1e9;
    return ms;
  };

  nlohmann::json rows = nlohmann::json::object();
  const float one = 1.0f, zero = 0.0f;
  nlohmann::json cublas_row, naive_row;
  const double cublas_ms = time_checked("cublas_sgemm", [&] {
    TESSEL_CUBLAS_CHECK(cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(n), static_cast<int>(n),
                             &one, b.data_as<float>(), static_cast<int>(n), a.data_as<float>(), static_cast<int>(n), &zero,
                             d.data_as<float>(), static_cast<int>(n)),
                 "cublasSgemm");
  }, cublas_row);
  const double naive_ms = time_checked("naive", [&] {
    internal::naive_sgemm(a.data_as<float>(), b.data_as<float>(), d.data_as<float>(), n, n, n, stream);
  }, naive_row);
  rows["cublas_sgemm"] = cublas_row;
  rows["naive"] = naive_row;
  std::printf("%lld^3 fp32: cuBLAS %.3f ms (%.1f TFLOP/s), naive %.3f ms (%.2f TFLOP/s); 10x naive needs %.1f TFLOP/s "
              "= %.0f%% of cuBLAS\n",
              static_cast<long long>(n), cublas_ms, flop / cublas_ms / 1e9, naive_ms, flop / naive_ms / 1e9,
              10 * flop / naive_ms / 1e9, 100 * cublas_ms / (naive_ms / 10));

  auto report = [&](const std::string& name, double ms, nlohmann::json& row) {
    if (ms <= 0) return;
    row["pct_of_cublas"] = 100 * cublas_ms / ms;
    row["speedup_over_naive"] = naive_ms / ms;
    std::printf("%-34s %8.3f ms %6.2f TFLOP/s %6.1f%% of cuBLAS %5.2fx naive\n", name.c_str(), ms, flop / ms / 1e9,
                100 * cublas_ms / ms, naive_ms / ms);
  };

  // The library's AOT configurations, through a pinned plan.
  MatmulOptions fp32;
  fp32.compute = MatmulCompute::fp32;
  MatmulPlan plan(a, b, fp32);
  for (const auto& c : plan.candidates()) {
    if (c.name.rfind("simt:", 0) != 0) continue;
    plan.pin(c.name);
    nlohmann::json row = {{"kind", "aot"}};
    const double ms = time_checked(c.name, [&] { plan.execute(a, b, fp32, d); }, row);
    report("aot " + c.name, ms, row);
    rows["aot " + c.name] = row;
  }

  // The JIT-compiled variants.
  std::string best;
  double best_ms = -1;
  for (const Variant& v : kVariants) {
    const std::string name = "jit " + v.name();
    const internal::SimtTile& t = v.tile;
    nlohmann::json row = {{"kind", "jit"}, {"bm", t.bm}, {"bn", t.bn}, {"bk", t.bk}, {"tm", t.tm}, {"tn", t.tn},
                          {"warp_x", t.warp_x}, {"max_registers", v.max_registers}, {"threads", t.threads()}};
    try {
      const jit::RawKernel raw(source, internal::simt_sgemm_name(t),
                               v.max_registers > 0 ? std::vector<std::string>{fmt::format("--maxrregcount={}", v.max_registers)}
                                                   : std::vector<std::string>{});
      const jit::Kernel kernel = raw.kernel(gpu);
      const jit::KernelAttributes attributes = kernel.attributes();
      row["registers"] = attributes.num_registers;
      row["local_bytes"] = attributes.local_bytes;  // > 0: register spills
      row["static_shared_bytes"] = attributes.static_shared_bytes;
      auto run = [&](const Array& x, const Array& y, const Array& out, const Array& bias, internal::SimtEpilogue epilogue) {
        internal::launch_simt_sgemm(kernel, t, x, y, out, bias, epilogue, stream);
      };
      // the odd problem first: every element, fused bias + relu
      fill(od, std::nan(""));
      run(oa, ob, od, obias, internal::SimtEpilogue::relu);
      const double odd_error = reference_error(od, oah, obh, obiash, true, om, on, ok, 0);
      row["odd_error"] = odd_error;
      if (!(odd_error <= tol)) {
        std::printf("%-34s FAILED the odd-size check (error %.3g)\n", name.c_str(), odd_error);
        row["status"] = "FAILED odd-size check";
        all_ok = false;
      } else {
        const double ms = time_checked(name, [&] { run(a, b, d, Array(), internal::SimtEpilogue::none); }, row);
        report(name + fmt::format(" ({} regs{})", attributes.num_registers, attributes.local_bytes ? ", SPILLS" : ""), ms,
               row);
        if (ms > 0 && (best_ms < 0 || ms < best_ms)) {
          best_ms = ms;
          best = v.name();
        }
      }
    } catch (const Error& error) {
      row["status"] = std::string("failed: ") + error.what();
      std::printf("%-34s failed: %s\n", name.c_str(), error.what());
      all_ok = false;
    }
    rows[name] = row;
  }
  results["variants"] = rows;
  if (best_ms > 0) {
    results["best"] = {{"variant", best}, {"ms", best_ms}, {"pct_of_cublas", 100 * cublas_ms / best_ms},
                       {"speedup_over_naive", naive_ms / best_ms}, {"targets", {{"pct_of_cublas", 70}, {"speedup_over_naive", 10}}}};
    std::printf("best JIT variant: %s, %.1f%% of cuBLAS (target 70%%), %.2fx naive (target 10x)\n", best.c_str(),
                100 * cublas_ms / best_ms, naive_ms / best_ms);
  }
  cublasDestroy(cublas);
  bench::write_results("matmul_simt_variants", results);
  return all_ok ? 0 : 1;
}
#endif
