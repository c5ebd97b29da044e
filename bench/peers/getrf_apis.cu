// The cuSOLVER APIs of one LU solve, timed against each other: n x n float32 with 64 right-hand
// sides (n = 4096), the legacy Sgetrf + Sgetrs against the 64-bit Xgetrf + Xgetrs with
// CUSOLVER_ALG_0 and CUSOLVER_ALG_1, in alternating rounds with CUDA events (the data behind
// solve_legacy_api in src/backend/cuda/linalg.cpp). Prints the median, min and max of 15 rounds.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/getrf_apis bench/peers/getrf_apis.cu -lcusolver && /tmp/getrf_apis
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
#include <cstdlib>

#include "cuda_check.cuh"

int main() {
  const int n = 4096, k = 64;
  std::vector<float> h((size_t)n * n), hb((size_t)n * k);
  std::mt19937 rng(1); std::normal_distribution<float> d;
  for (auto& v : h) v = d(rng);
  for (auto& v : hb) v = d(rng);
  float *a0, *a, *b0, *b; int *piv, *info; int64_t* piv64;
  CK(cudaMalloc(&a0, h.size() * 4)); CK(cudaMalloc(&a, h.size() * 4));
  CK(cudaMalloc(&b0, hb.size() * 4)); CK(cudaMalloc(&b, hb.size() * 4));
  CK(cudaMalloc(&piv, n * 4)); CK(cudaMalloc(&piv64, n * 8)); CK(cudaMalloc(&info, 4));
  CK(cudaMemcpy(a0, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b0, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
  cusolverDnHandle_t s; CK(cusolverDnCreate(&s));
  cudaStream_t st; CK(cudaStreamCreate(&st)); CK(cusolverDnSetStream(s, st));
  cusolverDnParams_t p0, p1; CK(cusolverDnCreateParams(&p0)); CK(cusolverDnCreateParams(&p1));
  CK(cusolverDnSetAdvOptions(p1, CUSOLVERDN_GETRF, CUSOLVER_ALG_1));
  int lw = 0; CK(cusolverDnSgetrf_bufferSize(s, n, n, a, n, &lw));
  float* w; CK(cudaMalloc(&w, (size_t)lw * 4));
  size_t db0, hb0, db1, hb1;
  CK(cusolverDnXgetrf_bufferSize(s, p0, n, n, CUDA_R_32F, a, n, CUDA_R_32F, &db0, &hb0));
  CK(cusolverDnXgetrf_bufferSize(s, p1, n, n, CUDA_R_32F, a, n, CUDA_R_32F, &db1, &hb1));
  void* dw; CK(cudaMalloc(&dw, std::max(db0, db1) + 16));
  std::vector<char> hw(std::max(hb0, hb1) + 16);
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto run = [&](int which) -> float {
    CK(cudaMemcpyAsync(a, a0, h.size() * 4, cudaMemcpyDeviceToDevice, st));
    CK(cudaMemcpyAsync(b, b0, hb.size() * 4, cudaMemcpyDeviceToDevice, st));
    CK(cudaEventRecord(e0, st));
    if (which == 0) {
      CK(cusolverDnSgetrf(s, n, n, a, n, w, piv, info));
      CK(cusolverDnSgetrs(s, CUBLAS_OP_T, n, k, a, n, piv, b, n, info));
    } else {
      cusolverDnParams_t p = which == 1 ? p0 : p1;
      CK(cusolverDnXgetrf(s, p, n, n, CUDA_R_32F, a, n, piv64, CUDA_R_32F, dw, std::max(db0, db1), hw.data(), hw.size(), info));
      CK(cusolverDnXgetrs(s, p, CUBLAS_OP_T, n, k, CUDA_R_32F, a, n, piv64, CUDA_R_32F, b, n, info));
    }
    CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); return ms;
  };
  const char* names[] = {"legacy Sgetrf+Sgetrs", "Xgetrf ALG_0", "Xgetrf ALG_1"};
  std::vector<float> t[3];
  for (int w2 = 0; w2 < 3; ++w2) for (int i = 0; i < 3; ++i) run(i);
  for (int r = 0; r < 15; ++r) for (int i = 0; i < 3; ++i) t[i].push_back(run(i));
  for (int i = 0; i < 3; ++i) {
    std::sort(t[i].begin(), t[i].end());
    printf("%-24s median %.3f ms  min %.3f  max %.3f\n", names[i], t[i][7], t[i][0], t[i][14]);
    print_result(names[i], "\"n\": 4096, \"k\": 64, \"dtype\": \"float32\"", t[i]);
  }
  CK(cudaGetLastError());
  return 0;
}
