// Routes to the thin SVD of one tall m x n float32 matrix (4096 x 1024 by default), timed against
// each other in alternating rounds with CUDA events, each checked by its reconstruction error
// max|A - U diag(S) V^T| / max|A| and the orthogonality max|U^T U - I|, max|V^T V - I|:
//   gesvdj tall:  cusolverDnSgesvdj of A itself (econ; PyTorch's call);
//   QR+gesvdj:    geqrf, gesvdj of R, orgqr, U = Q U_R (tessel's route before this benchmark);
//   gesvdp tall:  cusolverDnXgesvdp of A (polar decomposition, then syevd), also on a repeated
//                 column, graded columns and the zero matrix (its perturbation h_err_sigma and its
//                 singular values against float64 Xgesvd's);
//   QR+syevd JW:  geqrf, then syevd of the 2n x 2n symmetric [[0, R], [R^T, 0]] (its eigenvalues
//                 are +-S, its eigenvectors [u; v] / sqrt(2)), the u and v halves of the top n
//                 normalized, orgqr, U = Q U_R.
// Also times the values-only calls (QR + gesvdj, gesvdp) and prints gesvdj's sweeps and
// residual. Prints the median, min and max of the rounds.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o svd_routes bench/peers/svd_routes.cu -lcusolver -lcublas
//   ./svd_routes [m n rounds]
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda_check.cuh"

// b (2n x 2n, column-major): lower-left block R^T (R upper triangular, n x n, leading dim ldr),
// everything else of the lower triangle zero (syevd reads the lower triangle only).
__global__ void jordan_wielandt(const float* r, int ldr, int n, float* b) {
  const long long two = 2LL * n, total = two * two;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    const int row = (int)(e % two), col = (int)(e / two);
    float v = 0.f;
    if (row >= n && col < n) {
      const int i = row - n;          // B[n + i, j] = R^T[i, j] = R[j, i]
      if (col <= i) v = r[col + (long long)i * ldr];
    }
    b[e] = v;
  }
}

// Column k of (u, v) from eigenvector 2n-1-k of w (2n x 2n), each half normalized. One block per k.
__global__ void split_halves(const float* w, int n, float* u, float* v) {
  const int k = blockIdx.x;
  const float* x = w + (long long)(2 * n - 1 - k) * 2 * n;
  __shared__ float sums[2][32];
  float su = 0.f, sv = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    su += x[i] * x[i];
    sv += x[n + i] * x[n + i];
  }
  for (int o = 16; o > 0; o >>= 1) {
    su += __shfl_xor_sync(0xffffffffu, su, o);
    sv += __shfl_xor_sync(0xffffffffu, sv, o);
  }
  if ((threadIdx.x & 31) == 0) {
    sums[0][threadIdx.x / 32] = su;
    sums[1][threadIdx.x / 32] = sv;
  }
  __syncthreads();
  float tu = 0.f, tv = 0.f;
  for (int i = 0; i < (int)blockDim.x / 32; ++i) {
    tu += sums[0][i];
    tv += sums[1][i];
  }
  const float iu = rsqrtf(tu), iv = rsqrtf(tv);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    u[i + (long long)k * n] = x[i] * iu;
    v[i + (long long)k * n] = x[n + i] * iv;
  }
}

__global__ void top_values(const float* lambda, int n, float* s) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) s[k] = lambda[2 * n - 1 - k];
}

// Upper triangle of a (m x n, lda m) into r (n x n), zeros below.
__global__ void upper_of(const float* a, int m, int n, float* r) {
  const long long total = (long long)n * n;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    const int i = (int)(e % n), j = (int)(e / n);
    r[e] = i <= j ? a[i + (long long)j * m] : 0.f;
  }
}

struct Result {
  std::string name;
  std::vector<float> ms;
  double residual = 0, orth_u = 0, orth_v = 0;
};

int main(int argc, char** argv) {
  const int m = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int n = argc > 2 ? std::atoi(argv[2]) : 1024;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  std::vector<float> h((size_t)m * n);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  for (auto& x : h) x = dist(rng);

  float *a0, *a, *s, *u, *v, *tau, *r, *ur, *b, *lam, *work, *check;
  int* info;
  const size_t two = 2 * (size_t)n;
  CK(cudaMalloc(&a0, h.size() * 4));
  CK(cudaMalloc(&a, h.size() * 4));
  CK(cudaMalloc(&s, n * 4));
  CK(cudaMalloc(&u, (size_t)m * n * 4));
  CK(cudaMalloc(&v, (size_t)n * n * 4));
  CK(cudaMalloc(&tau, n * 4));
  CK(cudaMalloc(&r, (size_t)n * n * 4));
  CK(cudaMalloc(&ur, (size_t)n * n * 4));
  CK(cudaMalloc(&b, two * two * 4));
  CK(cudaMalloc(&lam, two * 4));
  CK(cudaMalloc(&check, (size_t)m * n * 4));
  CK(cudaMalloc(&info, 4));
  CK(cudaMemcpy(a0, h.data(), h.size() * 4, cudaMemcpyHostToDevice));

  cusolverDnHandle_t sh;
  cublasHandle_t bh;
  CK(cusolverDnCreate(&sh));
  CK(cublasCreate(&bh));
  cusolverDnParams_t params;
  CK(cusolverDnCreateParams(&params));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  CK(cusolverDnSetStream(sh, st));
  CK(cublasSetStream(bh, st));
  gesvdjInfo_t jp;
  CK(cusolverDnCreateGesvdjInfo(&jp));
  CK(cusolverDnXgesvdjSetMaxSweeps(jp, 100));
  CK(cusolverDnXgesvdjSetTolerance(jp, 1.1920929e-07));  // tessel's: float32's epsilon

  // Workspaces: the largest of every routine's.
  size_t dev = 0, host = 0, d1 = 0, h1 = 0;
  int lw = 0;
  CK(cusolverDnSgesvdj_bufferSize(sh, CUSOLVER_EIG_MODE_VECTOR, 1, m, n, a, m, s, u, m, v, n, &lw, jp));
  dev = std::max(dev, (size_t)lw * 4);
  CK(cusolverDnSgesvdj_bufferSize(sh, CUSOLVER_EIG_MODE_VECTOR, 1, n, n, r, n, s, ur, n, v, n, &lw, jp));
  dev = std::max(dev, (size_t)lw * 4);
  CK(cusolverDnXgeqrf_bufferSize(sh, params, m, n, CUDA_R_32F, a, m, CUDA_R_32F, tau, CUDA_R_32F, &d1, &h1));
  dev = std::max(dev, d1), host = std::max(host, h1);
  CK(cusolverDnSorgqr_bufferSize(sh, m, n, n, a, m, tau, &lw));
  dev = std::max(dev, (size_t)lw * 4);
  CK(cusolverDnXsyevd_bufferSize(sh, params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, (int64_t)two, CUDA_R_32F,
                                 b, (int64_t)two, CUDA_R_32F, lam, CUDA_R_32F, &d1, &h1));
  dev = std::max(dev, d1), host = std::max(host, h1);
  const bool gesvdp_ok = cusolverDnXgesvdp_bufferSize(sh, params, CUSOLVER_EIG_MODE_VECTOR, 1, m, n, CUDA_R_32F, a, m,
                                                       CUDA_R_32F, s, CUDA_R_32F, u, m, CUDA_R_32F, v, n, CUDA_R_32F,
                                                       &d1, &h1) == CUSOLVER_STATUS_SUCCESS;
  if (gesvdp_ok) dev = std::max(dev, d1), host = std::max(host, h1);
  std::printf("workspace %.1f MB device, %zu B host; gesvdp buffer size %s\n", dev / 1e6, host,
              gesvdp_ok ? "ok" : "FAILED");
  CK(cudaMalloc(&work, dev));
  std::vector<char> hostw(host + 16);
  const int lwork = (int)(dev / 4);

  const float one = 1.f, zero = 0.f, minus = -1.f;
  // U (m x n) scaled by S, times V^T, minus A: the residual; U^T U - I and V^T V - I.
  auto verify = [&](Result& res) {
    std::vector<float> hs(n);
    CK(cudaMemcpy(hs.data(), s, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(check, u, (size_t)m * n * 4, cudaMemcpyDeviceToDevice));
    CK(cublasSdgmm(bh, CUBLAS_SIDE_RIGHT, m, n, check, m, s, 1, check, m));
    CK(cudaMemcpy(a, a0, h.size() * 4, cudaMemcpyDeviceToDevice));
    CK(cublasSgemm(bh, CUBLAS_OP_N, CUBLAS_OP_T, m, n, n, &one, check, m, v, n, &minus, a, m));
    std::vector<float> d((size_t)m * n);
    CK(cudaMemcpy(d.data(), a, d.size() * 4, cudaMemcpyDeviceToHost));
    double mx = 0, amax = 0;
    for (size_t i = 0; i < d.size(); ++i) mx = std::max(mx, (double)std::fabs(d[i])), amax = std::max(amax, (double)std::fabs(h[i]));
    res.residual = mx / amax;
    auto orth = [&](const float* q, int rows) {
      float* g = check;
      CK(cublasSgemm(bh, CUBLAS_OP_T, CUBLAS_OP_N, n, n, rows, &one, q, rows, q, rows, &zero, g, n));
      std::vector<float> hg((size_t)n * n);
      CK(cudaMemcpy(hg.data(), g, hg.size() * 4, cudaMemcpyDeviceToHost));
      double e = 0;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) e = std::max(e, std::fabs(hg[i + (size_t)j * n] - (i == j ? 1.0 : 0.0)));
      return e;
    };
    res.orth_u = orth(u, m);
    res.orth_v = orth(v, n);
  };

  auto qr_r = [&]() {
    CK(cusolverDnXgeqrf(sh, params, m, n, CUDA_R_32F, a, m, CUDA_R_32F, tau, CUDA_R_32F, work, dev, hostw.data(), host,
                        info));
    upper_of<<<1024, 256, 0, st>>>(a, m, n, r);
    CK(cudaGetLastError());
  };
  auto q_times = [&]() {  // U = Q ur, Q formed in a by orgqr
    CK(cusolverDnSorgqr(sh, m, n, n, a, m, tau, work, lwork, info));
    CK(cublasSgemm(bh, CUBLAS_OP_N, CUBLAS_OP_N, m, n, n, &one, a, m, ur, n, &zero, u, m));
  };
  auto syevd_jw = [&](bool vectors) {
    jordan_wielandt<<<2048, 256, 0, st>>>(r, n, n, b);
    CK(cudaGetLastError());
    CK(cusolverDnXsyevd(sh, params, vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR,
                        CUBLAS_FILL_MODE_LOWER, (int64_t)two, CUDA_R_32F, b, (int64_t)two, CUDA_R_32F, lam, CUDA_R_32F,
                        work, dev, hostw.data(), host, info));
    top_values<<<4, 256, 0, st>>>(lam, n, s);
    if (vectors) split_halves<<<n, 256, 0, st>>>(b, n, ur, v);
    CK(cudaGetLastError());
  };

  std::vector<Result> routes;
  std::vector<std::function<void()>> runs;
  double err_sigma = 0;
  cusolverStatus_t gesvdp_status = CUSOLVER_STATUS_SUCCESS;
  auto gesvdp = [&](bool vectors) {
    gesvdp_status = cusolverDnXgesvdp(sh, params, vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR, 1, m,
                                      n, CUDA_R_32F, a, m, CUDA_R_32F, s, CUDA_R_32F, u, m, CUDA_R_32F, v, n, CUDA_R_32F,
                                      work, dev, hostw.data(), host, info, &err_sigma);
  };
  routes.push_back({"gesvdj tall"});
  runs.push_back([&] {
    CK(cusolverDnSgesvdj(sh, CUSOLVER_EIG_MODE_VECTOR, 1, m, n, a, m, s, u, m, v, n, work, lwork, info, jp));
  });
  routes.push_back({"QR+gesvdj"});
  runs.push_back([&] {
    qr_r();
    CK(cusolverDnSgesvdj(sh, CUSOLVER_EIG_MODE_VECTOR, 1, n, n, r, n, s, ur, n, v, n, work, lwork, info, jp));
    q_times();
  });
  if (gesvdp_ok) {
    routes.push_back({"gesvdp tall"});
    runs.push_back([&] { gesvdp(true); });
  }
  routes.push_back({"QR+syevd JW"});
  runs.push_back([&] {
    qr_r();
    syevd_jw(true);
    q_times();
  });
  const size_t checked = routes.size();
  // Values only.
  routes.push_back({"vals: QR+gesvdj"});
  runs.push_back([&] {
    qr_r();
    CK(cusolverDnSgesvdj(sh, CUSOLVER_EIG_MODE_NOVECTOR, 1, n, n, r, n, s, ur, n, v, n, work, lwork, info, jp));
  });
  if (gesvdp_ok) {
    routes.push_back({"vals: gesvdp"});
    runs.push_back([&] { gesvdp(false); });
  }

  // gesvdp's accuracy on harder inputs: its perturbation (h_err_sigma) and its singular values
  // against float64 Xgesvd's, for a Gaussian matrix, a repeated column, graded columns (condition
  // 1e3 and 1e6) and the zero matrix.
  if (gesvdp_ok) {
    double* a64;
    double* s64;
    CK(cudaMalloc(&a64, h.size() * 8));
    CK(cudaMalloc(&s64, n * 8));
    size_t d64 = 0, h64 = 0;
    CK(cusolverDnXgesvd_bufferSize(sh, params, 'N', 'N', m, n, CUDA_R_64F, a64, m, CUDA_R_64F, s64, CUDA_R_64F, nullptr, m,
                                   CUDA_R_64F, nullptr, n, CUDA_R_64F, &d64, &h64));
    void* w64;
    CK(cudaMalloc(&w64, d64));
    std::vector<char> hw64(h64 + 16);
    const char* cases[] = {"gaussian", "repeated column", "graded 1e3", "graded 1e6", "zero"};
    for (int c = 0; c < 5; ++c) {
      std::vector<float> hc = h;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          float& x = hc[i + (size_t)j * m];
          if (c == 1 && j == n - 1) x = hc[i];
          if (c == 2) x *= std::pow(1e3f, -(float)j / (n - 1));
          if (c == 3) x *= std::pow(1e6f, -(float)j / (n - 1));
          if (c == 4) x = 0.f;
        }
      std::vector<double> hd(hc.begin(), hc.end());
      CK(cudaMemcpy(a64, hd.data(), hd.size() * 8, cudaMemcpyHostToDevice));
      CK(cusolverDnXgesvd(sh, params, 'N', 'N', m, n, CUDA_R_64F, a64, m, CUDA_R_64F, s64, CUDA_R_64F, nullptr, m,
                          CUDA_R_64F, nullptr, n, CUDA_R_64F, w64, d64, hw64.data(), h64, info));
      std::vector<double> ref(n);
      CK(cudaMemcpy(ref.data(), s64, n * 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(a, hc.data(), hc.size() * 4, cudaMemcpyHostToDevice));
      gesvdp(true);
      CK(cudaStreamSynchronize(st));
      int hinfo = 0;
      CK(cudaMemcpy(&hinfo, info, 4, cudaMemcpyDeviceToHost));
      std::vector<float> got(n);
      CK(cudaMemcpy(got.data(), s, n * 4, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (int k = 0; k < n; ++k) worst = std::max(worst, std::fabs(got[k] - ref[k]));
      std::printf("gesvdp %-16s status %d info %d h_err_sigma %.3e  sigma max %.4g min %.4g  max|sigma - ref| %.3e (%.3e of max)\n",
                  cases[c], (int)gesvdp_status, hinfo, err_sigma, ref[0], ref[n - 1], worst, ref[0] > 0 ? worst / ref[0] : 0.0);
    }
  }

  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto time_route = [&](size_t i) {
    CK(cudaMemcpyAsync(a, a0, h.size() * 4, cudaMemcpyDeviceToDevice, st));
    CK(cudaEventRecord(e0, st));
    runs[i]();
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
  };
  for (size_t i = 0; i < routes.size(); ++i) {
    time_route(i);  // warm-up
    if (i < checked) {
      int hinfo = 0;
      CK(cudaMemcpy(&hinfo, info, 4, cudaMemcpyDeviceToHost));
      if (i < 2 || routes[i].name == "gesvdp tall") {
        int sweeps = 0;
        double res = 0;
        CK(cusolverDnXgesvdjGetSweeps(sh, jp, &sweeps));
        CK(cusolverDnXgesvdjGetResidual(sh, jp, &res));
        std::printf("%-14s info %d, gesvdj sweeps %d residual %.3g; gesvdp status %d h_err_sigma %.3e\n",
                    routes[i].name.c_str(), hinfo, sweeps, res, (int)gesvdp_status, err_sigma);
      }
      verify(routes[i]);
    }
  }
  for (int rr = 0; rr < rounds; ++rr)
    for (size_t k = 0; k < routes.size(); ++k) {
      const size_t i = rr % 2 == 0 ? k : routes.size() - 1 - k;
      routes[i].ms.push_back(time_route(i));
    }
  std::printf("svd %d x %d float32, %d rounds\n", m, n, rounds);
  for (size_t i = 0; i < routes.size(); ++i) {
    auto& t = routes[i].ms;
    std::sort(t.begin(), t.end());
    std::printf("  %-20s median %8.3f ms (min %8.3f max %8.3f)", routes[i].name.c_str(), t[t.size() / 2], t.front(),
                t.back());
    std::string params = "\"m\": " + std::to_string(m) + ", \"n\": " + std::to_string(n) + ", \"dtype\": \"float32\"";
    if (i < checked) {
      std::printf("  residual %.2e  |U^T U - I| %.2e  |V^T V - I| %.2e", routes[i].residual, routes[i].orth_u,
                  routes[i].orth_v);
      char checks[160];
      std::snprintf(checks, sizeof checks, ", \"residual\": %.3e, \"orth_u\": %.3e, \"orth_v\": %.3e", routes[i].residual,
                    routes[i].orth_u, routes[i].orth_v);
      params += checks;
    }
    std::printf("\n");
    print_result(routes[i].name, params, t);
  }
  return 0;
}
