// tessel's own Hopper GEMM (sm90) against cuBLASLt in the same run: bf16, 8192^3, 4096^3 and
// the M=16384 N=4096 K=1024, B k-contiguous and n-contiguous, every tile config, with no epilogue and with bias+relu.
// cuBLASLt runs the same row-major problem (as D^T = B^T A^T in column-major terms) with its
// default heuristic's first algorithm and no epilogue. Each sm90 result is checked against the
// cuBLASLt output (norm-wise relative error < 1e-2, sampled) before it is timed. Times are
// medians of CUDA-event-timed repeats after a warm-up; results go under "matmul_sm90".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/tessel.hpp"

#if !defined(TESSEL_HAVE_CUDA)
int main() {
  std::printf("matmul_sm90_bench: skipped: tessel was built without CUDA\n");
  return 0;
}
#else
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "tessel/core/cublas_check.hpp"
#include "tessel/ops/matmul_kernels.hpp"

using namespace tessel;
namespace sm90 = tessel::internal::sm90;

namespace {


double bf16_to_double(std::uint16_t bits) { return static_cast<double>(bfloat16::from_bits(bits)); }

}  // namespace

int main() {
  if (bench::skip_without_cuda("matmul_sm90_bench")) return 0;
  const DeviceProperties& props = device_properties(0);
  if (props.cc_major != 9 || props.cc_minor != 0) {
    std::printf("matmul_sm90_bench: skipped: needs compute capability 9.0, device 0 is %s\n", props.name.c_str());
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const Stream stream = current_stream(gpu);
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle());
  nlohmann::json results;
  results["device"] = props.name;
  bool all_ok = true;

  cublasLtHandle_t lt = nullptr;
  TESSEL_CUBLAS_CHECK(cublasLtCreate(&lt), "create");
  const std::size_t workspace_bytes = 64 << 20;
  auto workspace = Buffer::allocate(gpu, workspace_bytes, stream);

  struct Shape3 { std::int64_t m, n, k; };
  for (const Shape3 shape : {Shape3{8192, 8192, 8192}, Shape3{4096, 4096, 4096}, Shape3{16384, 4096, 1024}}) {
    for (bool b_k_contiguous : {true, false}) {
      const std::int64_t m = shape.m, n = shape.n, k = shape.k;
      Array a = random::uniform({m, k}, -1, 1, DType::bfloat16, gpu);
      Array b = b_k_contiguous ? random::uniform({n, k}, -1, 1, DType::bfloat16, gpu)
                               : random::uniform({k, n}, -1, 1, DType::bfloat16, gpu);
      Array bias = random::uniform({n}, -1, 1, DType::bfloat16, gpu);
      Array d_lt = empty({m, n}, DType::bfloat16, gpu);
      Array d = empty({m, n}, DType::bfloat16, gpu);
      const std::string label = (m == n && n == k ? std::to_string(m) + "^3"
                                                  : std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k)) +
                                " bf16 B " + (b_k_contiguous ? "k-contiguous" : "n-contiguous");

      // cuBLASLt, column-major: D^T[n x m] = op(B)[n x k] * A^T[k x m].
      cublasLtMatmulDesc_t desc = nullptr;
      cublasLtMatrixLayout_t layout_b = nullptr, layout_a = nullptr, layout_d = nullptr;
      cublasLtMatmulPreference_t pref = nullptr;
      TESSEL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
      const cublasOperation_t op_b = b_k_contiguous ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = CUBLAS_OP_N;
      TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b), "transa");
      TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a), "transb");
      TESSEL_CUBLAS_CHECK(b_k_contiguous ? cublasLtMatrixLayoutCreate(&layout_b, CUDA_R_16BF, k, n, k)
                              : cublasLtMatrixLayoutCreate(&layout_b, CUDA_R_16BF, n, k, n), "layout B");
      TESSEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_a, CUDA_R_16BF, k, m, k), "layout A");
      TESSEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_d, CUDA_R_16BF, n, m, n), "layout D");
      TESSEL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref), "preference");
      TESSEL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                    sizeof workspace_bytes), "workspace");
      cublasLtMatmulHeuristicResult_t heuristic{};
      int found = 0;
      TESSEL_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, layout_b, layout_a, layout_d, layout_d, pref, 1, &heuristic, &found),
               "heuristic");
      if (found < 1) throw Error("cuBLASLt: no algorithm for " + label);
      const float one = 1.0f, zero = 0.0f;
      auto run_lt = [&] {
        TESSEL_CUBLAS_CHECK(cublasLtMatmul(lt, desc, &one, b.data(), layout_b, a.data(), layout_a, &zero, d_lt.data(), layout_d,
                                d_lt.data(), layout_d, &heuristic.algo, workspace->data(), workspace_bytes, cuda_stream),
                 "matmul");
      };
      const double flops = 2.0 * m * n * k;
      const double lt_ms = profile::time_on_stream(run_lt, stream, {3, 20}).median_ms;
      const std::vector<bfloat16> ref = d_lt.to_vector<bfloat16>();
      const std::vector<bfloat16> bias_host = bias.to_vector<bfloat16>();
      nlohmann::json entry;
      entry["cublaslt_ms"] = lt_ms;
      entry["cublaslt_tflops"] = flops / lt_ms / 1e9;
      std::printf("%s: cuBLASLt %.3f ms, %.1f TFLOP/s\n", label.c_str(), lt_ms, flops / lt_ms / 1e9);

      for (int config = 0; config < sm90::num_configs(); ++config) {
        for (sm90::Epilogue epilogue : {sm90::Epilogue::none, sm90::Epilogue::bias_relu}) {
          sm90::GemmArgs args{};
          args.m = m; args.n = n; args.k = k; args.batch = 1; args.dtype = 1;
          args.a = a.data(); args.lda = k;
          args.b = b.data(); args.ldb = b_k_contiguous ? k : n; args.b_k_contiguous = b_k_contiguous;
          args.d = d.data(); args.ldd = n;
          args.bias = bias.data(); args.alpha = 1.0f; args.epilogue = epilogue;
          const std::string name = std::string(sm90::config_name(config)) +
                                   (epilogue == sm90::Epilogue::none ? "" : "+bias_relu");
          if (!sm90::can_implement(args, config)) {
            std::printf("  %-32s cannot implement\n", name.c_str());
            entry[name] = "cannot implement";
            continue;
          }
          // Poison, run once, check against cuBLASLt (plus the epilogue on the host).
          if (cudaMemsetAsync(d.data(), 0xFF, m * n * 2, cuda_stream) != cudaSuccess) throw Error("memset failed");
          sm90::run(args, config, stream.handle());
          const std::vector<bfloat16> got = d.to_vector<bfloat16>();
          double err2 = 0, ref2 = 0;
          for (std::size_t i = 0; i < got.size(); i += 13) {
            double want = static_cast<double>(ref[i]);
            if (epilogue == sm90::Epilogue::bias_relu)
              want = std::max(0.0, want + static_cast<double>(bias_host[i % static_cast<std::size_t>(n)]));
            const double have = static_cast<double>(got[i]);
            err2 += (have - want) * (have - want);
            ref2 += want * want;
          }
          for (const bfloat16& v : got)
            if (std::isnan(static_cast<float>(v))) err2 = INFINITY;
          const double rel = std::sqrt(err2 / ref2);
          const bool ok = rel < 1e-2;
          all_ok = all_ok && ok;
          const double ms =
              profile::time_on_stream([&] { sm90::run(args, config, stream.handle()); }, stream, {3, 20}).median_ms;
          entry[name] = {{"ms", ms}, {"tflops", flops / ms / 1e9}, {"fraction_of_cublaslt", lt_ms / ms},
                         {"rel_error_vs_cublaslt", rel}, {"ok", ok}};
          std::printf("  %-32s %.3f ms %.1f TFLOP/s = %.1f%% of cuBLASLt (rel err %.1e)%s\n", name.c_str(), ms,
                      flops / ms / 1e9, 100.0 * lt_ms / ms, rel, ok ? "" : "  WRONG");
        }
      }
      results[label] = entry;
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(layout_a);
      cublasLtMatrixLayoutDestroy(layout_b);
      cublasLtMatrixLayoutDestroy(layout_d);
      cublasLtMatmulDescDestroy(desc);
    }
  }
  cublasLtDestroy(lt);
  tessel::bench::write_results("matmul_sm90", results);
  return all_ok ? 0 : 1;
}
#endif
