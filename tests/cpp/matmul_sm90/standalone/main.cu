// Standalone device check + benchmark for tessel's sm90 GEMM (not part of the tessel build).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/matmul_sm90.hpp"

namespace tessel::detail::sm90 {
void run_with_offsets(const GemmArgs& args, int config, void* stream, std::uint32_t lbo, std::uint32_t sbo);
}
using namespace tessel::detail::sm90;

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %s:%d: %s\n", cudaGetErrorString(e), __FILE__, __LINE__, #x); exit(1);} } while (0)
#define CKL(x) do { cublasStatus_t e = (x); if (e != CUBLAS_STATUS_SUCCESS) { printf("cublasLt %d at %d: %s\n", (int)e, __LINE__, #x); exit(1);} } while (0)

static std::uint16_t f2h(float v, int dtype) {
  if (dtype == 1) { __nv_bfloat16 b = __float2bfloat16_rn(v); std::uint16_t r; memcpy(&r, &b, 2); return r; }
  __half h = __float2half_rn(v); std::uint16_t r; memcpy(&r, &h, 2); return r;
}
static double h2d(std::uint16_t v, int dtype) {
  if (dtype == 1) { __nv_bfloat16 b; memcpy(&b, &v, 2); return __bfloat162float(b); }
  __half h; memcpy(&h, &v, 2); return __half2float(h);
}

static std::mt19937_64 rng(12345);
static std::vector<std::uint16_t> rand_vec(size_t n, int dtype) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) { float f; do { f = u(rng); } while (f == 0.f); x = f2h(f, dtype); }
  return v;
}

static double act(double x, Epilogue e) {
  switch (e) {
    case Epilogue::relu: case Epilogue::bias_relu: return x > 0 ? x : 0;
    case Epilogue::gelu: case Epilogue::bias_gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Epilogue::gelu_tanh: case Epilogue::bias_gelu_tanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    default: return x;
  }
}
static bool has_bias(Epilogue e) { return e == Epilogue::bias || e == Epilogue::bias_relu || e == Epilogue::bias_gelu || e == Epilogue::bias_gelu_tanh; }

struct Case { long m, n, k, batch; int dtype; bool bk; Epilogue ep; float alpha; int config; int rows_checked; };

static int failures = 0;
// Returns rel error; -1 on exception
static double check(const Case& c, std::uint32_t lbo = 8192, std::uint32_t sbo = 1024, bool quiet = false) {
  long m = c.m, n = c.n, k = c.k, B = c.batch;
  long lda = k + (k % 16 == 0 ? 8 : (8 - k % 8) % 8);  // padded leading dims (multiple of 8)
  long ldb_kc = lda, ldb_nc = n + (8 - n % 8) % 8 + 8;
  long ldb = c.bk ? ldb_kc : ldb_nc;
  long ldd = n + (8 - n % 8) % 8;
  long bsa = m * lda, bsb = c.bk ? n * ldb : k * ldb, bsd = m * ldd;
  auto A = rand_vec(bsa * B, c.dtype), Bm = rand_vec(bsb * B, c.dtype), bias = rand_vec(n, c.dtype);
  void *dA, *dB, *dD, *dbias;
  CK(cudaMalloc(&dA, A.size() * 2)); CK(cudaMalloc(&dB, Bm.size() * 2)); CK(cudaMalloc(&dD, bsd * B * 2)); CK(cudaMalloc(&dbias, n * 2));
  CK(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, Bm.data(), Bm.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dbias, bias.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dD, 0xFF, bsd * B * 2));  // NaN poison
  GemmArgs g{};
  g.m = m; g.n = n; g.k = k; g.batch = B; g.dtype = c.dtype;
  g.a = dA; g.lda = lda; g.batch_stride_a = bsa;
  g.b = dB; g.ldb = ldb; g.batch_stride_b = bsb; g.b_k_contiguous = c.bk;
  g.d = dD; g.ldd = ldd; g.batch_stride_d = bsd;
  g.bias = has_bias(c.ep) ? dbias : nullptr; g.alpha = c.alpha; g.epilogue = c.ep;
  double rel = -1;
  if (!can_implement(g, c.config)) { printf("  can_implement false!\n"); failures++; goto done; }
  try {
    run_with_offsets(g, c.config, nullptr, lbo, sbo);
    CK(cudaDeviceSynchronize());
  } catch (const std::exception& e) { printf("  exception: %s\n", e.what()); failures++; goto done; }
  {
    std::vector<std::uint16_t> D(bsd * B);
    CK(cudaMemcpy(D.data(), dD, D.size() * 2, cudaMemcpyDeviceToHost));
    double num = 0, den = 0; long nan_count = 0;
    for (long b = 0; b < B; ++b) {
      for (long i = 0; i < m; ++i) for (long j = 0; j < n; ++j) if (std::isnan(h2d(D[b * bsd + i * ldd + j], c.dtype))) nan_count++;
      long step = c.rows_checked > 0 ? std::max(1L, m / c.rows_checked) : 1;
      std::vector<double> arow(k), bt(n * k);
      for (long j = 0; j < n; ++j)
        for (long kk = 0; kk < k; ++kk)
          bt[j * k + kk] = c.bk ? h2d(Bm[b * bsb + j * ldb + kk], c.dtype) : h2d(Bm[b * bsb + kk * ldb + j], c.dtype);
      for (long i = 0; i < m; i += step) {
        for (long kk = 0; kk < k; ++kk) arow[kk] = h2d(A[b * bsa + i * lda + kk], c.dtype);
        for (long j = 0; j < n; ++j) {
          double s = 0;
          const double* bj = &bt[j * k];
          for (long kk = 0; kk < k; ++kk) s += arow[kk] * bj[kk];
          double ref = act(c.alpha * s + (has_bias(c.ep) ? h2d(bias[j], c.dtype) : 0.0), c.ep);
          double got = h2d(D[b * bsd + i * ldd + j], c.dtype);
          num += (got - ref) * (got - ref); den += ref * ref;
        }
      }
    }
    rel = std::sqrt(num / den);
    if (nan_count) rel = INFINITY;
    bool ok = rel < 1e-2;
    if (!ok) failures++;
    if (!quiet || !ok)
      printf("  %-4s %ldx%ldx%ld b%ld %s %s ep%d a%.2f %-20s rel %.3e nan %ld\n", ok ? "ok" : "FAIL", m, n, k, B, c.dtype ? "bf16" : "fp16",
             c.bk ? "Bk" : "Bn", (int)c.ep, c.alpha, config_name(c.config), rel, nan_count);
  }
done:
  cudaFree(dA); cudaFree(dB); cudaFree(dD); cudaFree(dbias);
  return rel;
}

struct Timer {
  cudaEvent_t a, b;
  Timer() { cudaEventCreate(&a); cudaEventCreate(&b); }
  template <class F> double median_ms(F f, int reps = 20) {
    for (int i = 0; i < 3; ++i) f();
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) { cudaEventRecord(a); f(); cudaEventRecord(b); CK(cudaEventSynchronize(b)); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms); }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

static void bench(long M, bool bk, std::uint32_t lbo, std::uint32_t sbo) {
  long m = M, n = M, k = M;
  int dtype = 1;
  auto A = rand_vec(m * k, dtype), Bm = rand_vec(n * k, dtype), bias = rand_vec(n, dtype);
  void *dA, *dB, *dD, *dD2, *dbias, *ws;
  size_t ws_size = 64 << 20;
  CK(cudaMalloc(&dA, m * k * 2)); CK(cudaMalloc(&dB, n * k * 2)); CK(cudaMalloc(&dD, m * n * 2)); CK(cudaMalloc(&dD2, m * n * 2));
  CK(cudaMalloc(&dbias, n * 2)); CK(cudaMalloc(&ws, ws_size));
  CK(cudaMemcpy(dA, A.data(), m * k * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, Bm.data(), n * k * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dbias, bias.data(), n * 2, cudaMemcpyHostToDevice));
  // cuBLASLt: column-major D^T[n x m] = op(B)[n x k] * A^T[k x m]
  cublasLtHandle_t lt; CKL(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t desc; CKL(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = bk ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  CKL(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CKL(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, ld;
  if (bk) CKL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, n, k)); else CKL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, k, n));
  CKL(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, k));
  CKL(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, m, n));
  cublasLtMatmulPreference_t pref; CKL(cublasLtMatmulPreferenceCreate(&pref));
  CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof ws_size));
  cublasLtMatmulHeuristicResult_t heur; int found = 0;
  CKL(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heur, &found));
  float one = 1, zero = 0;
  auto lt_run = [&] { CKL(cublasLtMatmul(lt, desc, &one, dB, la, dA, lb, &zero, dD2, ld, dD2, ld, &heur.algo, ws, ws_size, 0)); };
  Timer t;
  double flops = 2.0 * m * n * k;
  double lt_ms = t.median_ms(lt_run);
  std::vector<std::uint16_t> ref(m * n), got(m * n);
  CK(cudaMemcpy(ref.data(), dD2, m * n * 2, cudaMemcpyDeviceToHost));
  printf("BENCH %ld^3 bf16 %s cublasLt: %.3f ms %.1f TFLOP/s\n", M, bk ? "Bk" : "Bn", lt_ms, flops / lt_ms / 1e9);
  for (int cfg = 0; cfg < num_configs(); ++cfg) {
    for (Epilogue ep : {Epilogue::none, Epilogue::bias_relu, Epilogue::none, Epilogue::bias_gelu, Epilogue::bias_relu}) {
      GemmArgs g{};
      g.m = m; g.n = n; g.k = k; g.batch = 1; g.dtype = dtype;
      g.a = dA; g.lda = k; g.b = dB; g.ldb = bk ? k : n; g.b_k_contiguous = bk;
      g.d = dD; g.ldd = n; g.bias = dbias; g.alpha = 1; g.epilogue = ep;
      CK(cudaMemset(dD, 0xFF, m * n * 2));
      try { run_with_offsets(g, cfg, nullptr, lbo, sbo); CK(cudaDeviceSynchronize()); }
      catch (const std::exception& e) { printf("  exception %s\n", e.what()); failures++; continue; }
      CK(cudaMemcpy(got.data(), dD, m * n * 2, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (long i = 0; i < m * n; i += 7) {
        double r = h2d(ref[i], 1);
        if (ep == Epilogue::bias_relu) { r += h2d(bias[i % n], 1); r = r > 0 ? r : 0; }
        if (ep == Epilogue::bias_gelu) { r += h2d(bias[i % n], 1); r = 0.5 * r * (1 + std::erf(r / std::sqrt(2.0))); }
        double gv = h2d(got[i], 1);
        num += (gv - r) * (gv - r); den += r * r;
        if (std::isnan(gv)) num = INFINITY;
      }
      double rel = std::sqrt(num / den);
      double ms = t.median_ms([&] { run_with_offsets(g, cfg, nullptr, lbo, sbo); });
      if (!(rel < 1e-2)) failures++;
      printf("BENCH %ld^3 bf16 %s %-20s %-9s %.3f ms %.1f TFLOP/s = %.1f%% of cuBLASLt (rel vs cublasLt %.2e)\n", M, bk ? "Bk" : "Bn",
             config_name(cfg), ep == Epilogue::none ? "none" : ep == Epilogue::bias_relu ? "bias_relu" : "bias_gelu", ms, flops / ms / 1e9, 100 * lt_ms / ms, rel);
    }
  }
  cudaFree(dA); cudaFree(dB); cudaFree(dD); cudaFree(dD2); cudaFree(dbias); cudaFree(ws);
  cublasLtMatmulPreferenceDestroy(pref); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc); cublasLtDestroy(lt);
}

int main(int argc, char** argv) {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s cc %d.%d sms %d\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  bool do_bench = argc < 2 || std::string(argv[1]) != "nobench";
  // 1. basic K-major
  printf("== K-major basics\n");
  for (int cfg = 0; cfg < num_configs(); ++cfg)
    for (int dt = 0; dt < 2; ++dt) check({128, 128, 64, 1, dt, true, Epilogue::none, 1.f, cfg, 0});
  // 2. N-major: try the default offsets, else the swapped ones
  printf("== N-major basics (lbo 8192, sbo 1024)\n");
  std::uint32_t lbo = 8192, sbo = 1024;
  int before = failures;
  for (int cfg = 0; cfg < num_configs(); ++cfg) check({128, 256, 128, 1, 1, false, Epilogue::none, 1.f, cfg, 0});
  if (failures != before) {
    printf("== N-major with swapped offsets (lbo 1024, sbo 8192)\n");
    int b2 = failures;
    for (int cfg = 0; cfg < num_configs(); ++cfg) check({128, 256, 128, 1, 1, false, Epilogue::none, 1.f, cfg, 0}, 1024, 8192);
    if (failures == b2) { printf("SWAPPED OFFSETS WORK\n"); lbo = 1024; sbo = 8192; }
  }
  printf("== odd shapes, batches, epilogues\n");
  const Epilogue eps[] = {Epilogue::none, Epilogue::bias, Epilogue::bias_relu, Epilogue::bias_gelu, Epilogue::bias_gelu_tanh,
                          Epilogue::relu, Epilogue::gelu, Epilogue::gelu_tanh};
  for (int cfg = 0; cfg < num_configs(); ++cfg)
    for (int dt = 0; dt < 2; ++dt)
      for (bool bk : {true, false}) {
        check({1000, 520, 328, 1, dt, bk, Epilogue::bias_relu, 0.5f, cfg, 0}, lbo, sbo);
        check({77, 1001, 200, 3, dt, bk, Epilogue::bias_gelu, 1.f, cfg, 0}, lbo, sbo);
      }
  for (Epilogue ep : eps)
    for (bool bk : {true, false}) check({300, 264, 136, 2, 1, bk, ep, 0.75f, (int)ep % 3, 0}, lbo, sbo);
  check({1, 8, 1, 1, 1, true, Epilogue::bias, 1.f, 0, 0}, lbo, sbo);
  check({5, 24, 40, 1, 0, false, Epilogue::relu, 1.f, 1, 0}, lbo, sbo);
  check({8192, 8192, 512, 1, 1, true, Epilogue::bias_gelu_tanh, 1.f, 0, 24}, lbo, sbo);
  check({8192, 8192, 512, 1, 0, false, Epilogue::bias_relu, 1.f, 1, 24}, lbo, sbo);
  // misaligned pointer must be rejected
  {
    GemmArgs g{}; g.m = 128; g.n = 128; g.k = 64; g.batch = 1; g.dtype = 1;
    g.a = reinterpret_cast<void*>(0x1000008); g.lda = 64; g.b = reinterpret_cast<void*>(0x2000000); g.ldb = 64; g.b_k_contiguous = true;
    g.d = reinterpret_cast<void*>(0x3000000); g.ldd = 128; g.alpha = 1; g.epilogue = Epilogue::none;
    bool a = can_implement(g, 0); g.a = reinterpret_cast<void*>(0x1000000); bool b = can_implement(g, 0);
    printf("  can_implement misaligned=%d aligned=%d %s\n", a, b, (!a && b) ? "ok" : "FAIL");
    if (a || !b) failures++;
  }
  printf("correctness failures: %d\n", failures);
  if (do_bench) {
    bench(8192, true, lbo, sbo);
    bench(8192, false, lbo, sbo);
    bench(4096, true, lbo, sbo);
    bench(4096, false, lbo, sbo);
  }
  printf("total failures: %d\n", failures);
  return failures ? 1 : 0;
}
