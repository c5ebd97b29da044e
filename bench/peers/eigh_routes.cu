// cuSOLVER's two APIs for the eigendecomposition of one n x n float32 symmetric matrix (n = 4096):
// the 64-bit cusolverDnXsyevd reading the lower triangle (tessel's route) or the upper one, against
// the legacy cusolverDnSsyevd (CuPy's), in alternating rounds with CUDA events, vectors wanted.
// Prints the median, min and max of the rounds.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/eigh_routes bench/peers/eigh_routes.cu -lcusolver && /tmp/eigh_routes [n] [rounds]
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cuda_check.cuh"

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  std::vector<float> h((size_t)n * n);
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) h[(size_t)i * n + j] = h[(size_t)j * n + i] = d(rng);
  float *a0, *a, *w;
  int* info;
  CK(cudaMalloc(&a0, h.size() * 4));
  CK(cudaMalloc(&a, h.size() * 4));
  CK(cudaMalloc(&w, n * 4));
  CK(cudaMalloc(&info, 4));
  CK(cudaMemcpy(a0, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  cusolverDnHandle_t s;
  CK(cusolverDnCreate(&s));
  cusolverDnParams_t params;
  CK(cusolverDnCreateParams(&params));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  CK(cusolverDnSetStream(s, st));
  const auto jobz = CUSOLVER_EIG_MODE_VECTOR;
  const auto uplo = CUBLAS_FILL_MODE_LOWER;
  int lw = 0;
  CK(cusolverDnSsyevd_bufferSize(s, jobz, uplo, n, a, n, w, &lw));
  size_t dev_bytes = 0, host_bytes = 0;
  CK(cusolverDnXsyevd_bufferSize(s, params, jobz, uplo, n, CUDA_R_32F, a, n, CUDA_R_32F, w, CUDA_R_32F, &dev_bytes,
                                 &host_bytes));
  size_t upper_dev = 0, upper_host = 0;
  CK(cusolverDnXsyevd_bufferSize(s, params, jobz, CUBLAS_FILL_MODE_UPPER, n, CUDA_R_32F, a, n, CUDA_R_32F, w, CUDA_R_32F,
                                 &upper_dev, &upper_host));
  dev_bytes = std::max(dev_bytes, upper_dev);
  host_bytes = std::max(host_bytes, upper_host);
  void* work;
  CK(cudaMalloc(&work, std::max(dev_bytes, (size_t)lw * 4)));
  std::vector<char> host(host_bytes + 16);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto run = [&](int route) {
    CK(cudaMemcpyAsync(a, a0, h.size() * 4, cudaMemcpyDeviceToDevice, st));
    CK(cudaEventRecord(e0, st));
    if (route < 2)
      CK(cusolverDnXsyevd(s, params, jobz, route == 0 ? uplo : CUBLAS_FILL_MODE_UPPER, n, CUDA_R_32F, a, n, CUDA_R_32F,
                          w, CUDA_R_32F, work, dev_bytes, host.data(), host_bytes, info));
    else
      CK(cusolverDnSsyevd(s, jobz, uplo, n, a, n, w, static_cast<float*>(work), lw, info));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
  };
  constexpr int kRoutes = 3;
  for (int i = 0; i < kRoutes; ++i) run(i);
  std::vector<float> t[kRoutes];
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < kRoutes; ++i) {
      const int route = r % 2 == 0 ? i : kRoutes - 1 - i;
      t[route].push_back(run(route));
    }
  const char* names[] = {"Xsyevd lower", "Xsyevd upper", "Ssyevd (legacy)"};
  for (int i = 0; i < kRoutes; ++i) {
    std::sort(t[i].begin(), t[i].end());
    std::printf("eigh %d: %-16s median %.3f ms (min %.3f max %.3f)\n", n, names[i], t[i][t[i].size() / 2], t[i].front(),
                t[i].back());
  }
  return 0;
}
