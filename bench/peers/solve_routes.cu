// The two ways to finish an LU solve of one n x n float32 matrix with k right-hand sides after
// cusolverDnSgetrf (n = 4096 and k = 64 by default; also over orders and right-hand sides), timed against each other in alternating rounds with CUDA events:
//   getrs:  cusolverDnSgetrs (row swaps and both triangular solves inside cuSOLVER);
//   trsm:   two cublasStrsm calls, then the row permutation as one scatter, its index computed
//           from getrf's pivots by one thread in shared memory (the route PyTorch takes for n > 128).
// As tessel solves it: the row-major matrix is factored as its transpose (getrf of A^T, getrs with
// CUBLAS_OP_T). Also times getrf alone and the permutation kernels alone, and checks that both
// routes give the same solution. Prints the median, min and max of 15 rounds.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/solve_routes bench/peers/solve_routes.cu -lcusolver -lcublas
//   /tmp/solve_routes [n k] ...      (pairs; default 4096 64)
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cuda_check.cuh"

// perm[i] = the row of z that row i of x = P z comes from, inverted: x[perm[i]] = z[i], where
// P^T applies getrf's swaps (row i with piv[i] - 1) in order.
__global__ void pivots_to_permutation(const int* piv, int n, int* perm) {
  extern __shared__ int s[];
  int* idx = s;
  int* p = s + n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    idx[i] = i;
    p[i] = piv[i] - 1;
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 0; i < n; ++i) {
      const int q = p[i];
      const int t = idx[i];
      idx[i] = idx[q];
      idx[q] = t;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) perm[i] = idx[i];
}

__global__ void scatter_rows(const float* z, const int* perm, int n, int k, float* x) {
  const long long total = (long long)n * k;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    const int i = (int)(e % n);
    const long long c = e / n;
    x[perm[i] + c * n] = z[e];
  }
}

int measure(int n, int k);

int main(int argc, char** argv) {
  if (argc < 3) return measure(4096, 64);
  for (int i = 1; i + 1 < argc; i += 2)
    if (measure(std::atoi(argv[i]), std::atoi(argv[i + 1])) != 0) return 1;
  return 0;
}

int measure(int n, int k) {
  std::printf("\n== n %d, k %d\n", n, k);
  std::vector<float> h((size_t)n * n), hb((size_t)n * k);
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  for (auto& v : h) v = d(rng);
  for (auto& v : hb) v = d(rng);
  float *a0, *a, *b0, *b, *z;
  int *piv, *info, *perm;
  CK(cudaMalloc(&a0, h.size() * 4));
  CK(cudaMalloc(&a, h.size() * 4));
  CK(cudaMalloc(&b0, hb.size() * 4));
  CK(cudaMalloc(&b, hb.size() * 4));
  CK(cudaMalloc(&z, hb.size() * 4));
  CK(cudaMalloc(&piv, n * 4));
  CK(cudaMalloc(&perm, n * 4));
  CK(cudaMalloc(&info, 4));
  CK(cudaMemcpy(a0, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b0, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
  cusolverDnHandle_t s;
  CK(cusolverDnCreate(&s));
  cublasHandle_t blas;
  CK(cublasCreate(&blas));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  CK(cusolverDnSetStream(s, st));
  CK(cublasSetStream(blas, st));
  int lw = 0;
  CK(cusolverDnSgetrf_bufferSize(s, n, n, a, n, &lw));
  float* w;
  CK(cudaMalloc(&w, (size_t)lw * 4));
  CK(cudaFuncSetAttribute(pivots_to_permutation, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * n * 4));
  cudaEvent_t e0, e1, e2;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  const float one = 1.0f;
  // Returns {getrf ms, finish ms}.
  auto run = [&](int route) {
    CK(cudaMemcpyAsync(a, a0, h.size() * 4, cudaMemcpyDeviceToDevice, st));
    CK(cudaMemcpyAsync(b, b0, hb.size() * 4, cudaMemcpyDeviceToDevice, st));
    CK(cudaEventRecord(e0, st));
    CK(cusolverDnSgetrf(s, n, n, a, n, w, piv, info));
    CK(cudaEventRecord(e1, st));
    if (route == 0) {
      CK(cusolverDnSgetrs(s, CUBLAS_OP_T, n, k, a, n, piv, b, n, info));
    } else {
      CK(cudaMemcpyAsync(z, b, hb.size() * 4, cudaMemcpyDeviceToDevice, st));
      CK(cublasStrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, n, k, &one, a, n, z, n));
      CK(cublasStrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, CUBLAS_DIAG_UNIT, n, k, &one, a, n, z, n));
      pivots_to_permutation<<<1, 256, 2 * n * 4, st>>>(piv, n, perm);
      CK(cudaGetLastError());
      scatter_rows<<<264, 256, 0, st>>>(z, perm, n, k, b);
      CK(cudaGetLastError());
    }
    CK(cudaEventRecord(e2, st));
    CK(cudaEventSynchronize(e2));
    float f, g;
    CK(cudaEventElapsedTime(&f, e0, e1));
    CK(cudaEventElapsedTime(&g, e1, e2));
    return std::make_pair(f, g);
  };
  std::vector<float> x0(hb.size()), x1(hb.size());
  run(0);
  CK(cudaMemcpy(x0.data(), b, hb.size() * 4, cudaMemcpyDeviceToHost));
  run(1);
  CK(cudaMemcpy(x1.data(), b, hb.size() * 4, cudaMemcpyDeviceToHost));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < x0.size(); ++i) {
    diff = std::max(diff, std::fabs((double)x0[i] - x1[i]));
    norm = std::max(norm, std::fabs((double)x0[i]));
  }
  std::printf("routes agree: max|getrs - trsm| / max|x| = %.2e\n", diff / norm);
  // The permutation kernels alone.
  std::vector<float> tperm;
  for (int r = 0; r < 15; ++r) {
    CK(cudaEventRecord(e0, st));
    pivots_to_permutation<<<1, 256, 2 * n * 4, st>>>(piv, n, perm);
    CK(cudaEventRecord(e1, st));
    scatter_rows<<<264, 256, 0, st>>>(z, perm, n, k, b);
    CK(cudaEventRecord(e2, st));
    CK(cudaEventSynchronize(e2));
    float f;
    CK(cudaEventElapsedTime(&f, e0, e1));
    tperm.push_back(f);
  }
  std::sort(tperm.begin(), tperm.end());
  std::printf("pivots_to_permutation alone: median %.3f ms\n", tperm[7]);
  std::vector<float> tf[2], tg[2], tt[2];
  for (int r = 0; r < 15; ++r)
    for (int i = 0; i < 2; ++i) {
      const int route = r % 2 == 0 ? i : 1 - i;
      auto [f, g] = run(route);
      tf[route].push_back(f);
      tg[route].push_back(g);
      tt[route].push_back(f + g);
    }
  const char* names[] = {"getrf + getrs", "getrf + trsm route"};
  for (int i = 0; i < 2; ++i) {
    std::sort(tf[i].begin(), tf[i].end());
    std::sort(tg[i].begin(), tg[i].end());
    std::sort(tt[i].begin(), tt[i].end());
    std::printf("%-20s total median %.3f ms (min %.3f max %.3f); getrf %.3f; finish %.3f (min %.3f max %.3f)\n", names[i],
                tt[i][7], tt[i][0], tt[i][14], tf[i][7], tg[i][7], tg[i][0], tg[i][14]);
    print_result(names[i], "\"n\": " + std::to_string(n) + ", \"k\": " + std::to_string(k) + ", \"dtype\": \"float32\"",
                 tt[i]);
  }
  for (void* p : {(void*)a0, (void*)a, (void*)b0, (void*)b, (void*)z, (void*)piv, (void*)perm, (void*)info, (void*)w})
    CK(cudaFree(p));
  CK(cusolverDnDestroy(s));
  CK(cublasDestroy(blas));
  CK(cudaStreamDestroy(st));
  return 0;
}
