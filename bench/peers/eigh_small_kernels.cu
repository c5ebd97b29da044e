// tessel's per-thread tridiagonal eigh kernel (src/backend/cuda/device/linalg_small.cuh) at order 8
// on one batch of random symmetric float32 matrices, timed without tessel's host path: its phases
// (no QR steps, no eigenvectors) and launch variants (register caps, the unstaged path). Each
// variant's time per launch comes from K back-to-back launches between CUDA events (the device's
// throughput), and from one launch between events (what one synchronous call sees), in
// alternating rounds, against the device copy bandwidth measured in the same run. GB/s counts the
// input, the eigenvalues and the eigenvectors once each for every variant, so for the phases it
// is a ratio of times, not the bytes they move. Every complete variant's result is checked on the
// host in float64 (A v = v w and V^T V = I, per matrix, over a sample) before it is timed.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -cudart static -o /tmp/eigh_small_kernels bench/peers/eigh_small_kernels.cu
//   /tmp/eigh_small_kernels [batch] [rounds]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cuda_check.cuh"

#include "../../src/backend/cuda/device/linalg_small.cuh"

constexpr int N = 8;

// tridiagonal_eigh as linalg_small.cuh has it, with a register cap from __launch_bounds__ (the
// block of kStagedBlock threads, at least MinBlocks of them per multiprocessor).
template <int MinBlocks>
__global__ void __launch_bounds__(tessel_linalg_small::kStagedBlock, MinBlocks)
    tridiagonal_eigh_capped(const float* a, float* v, float* __restrict__ w, int vectors, int max_iterations,
                            int* __restrict__ info, long long batch) {
  using namespace tessel_linalg_small;
  for_each_staged_matrix<float, N, true>(a, vectors ? v : static_cast<float*>(nullptr), batch, [&](float* slot, long long b) {
    info[b] = tridiagonal_eigh_one<float, N>(slot, w + b * N, slot, vectors, max_iterations);
  });
}

using Kernel = void (*)(const float*, float*, float*, int, int, int*, long long);

// vectors and max_iterations as the kernels take them; the parts (no vectors, no QR steps) time a
// kernel's phases by difference and are not checked.
struct Variant {
  const char* name;
  Kernel kernel;
  int vectors = 1;
  int max_iterations = 30 * N;
  bool checked = true;
  int block = tessel_linalg_small::kStagedBlock;  // another block size takes the kernels' unstaged path
};

static const Variant kVariants[] = {
    {"tridiagonal_eigh", tessel_linalg_small::tridiagonal_eigh<float, N>},
    {"tridiagonal values", tessel_linalg_small::tridiagonal_eigh<float, N>, 0, 30 * N, false},
    {"tridiagonal no QR", tessel_linalg_small::tridiagonal_eigh<float, N>, 1, 0, false},
    {"tridiagonal no QR/vec", tessel_linalg_small::tridiagonal_eigh<float, N>, 0, 0, false},
    {"tridiagonal <=96 regs", tridiagonal_eigh_capped<10>},
    {"tridiagonal <=80 regs", tridiagonal_eigh_capped<12>},
    {"tridiagonal <=64 regs", tridiagonal_eigh_capped<16>},
    {"tridiagonal unstaged 128", tessel_linalg_small::tridiagonal_eigh<float, N>, 1, 30 * N, true, 128},
    {"tridiagonal unstaged 32", tessel_linalg_small::tridiagonal_eigh<float, N>, 1, 30 * N, true, 32},
};

struct Buffers {
  float *a, *v, *w;
  int* info;
};

static int grid_for(Kernel k, long long batch, int block) {
  int sms = 0, per_sm = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, block, 0));
  const long long blocks = (batch + block - 1) / block;
  return static_cast<int>(std::min<long long>(blocks, 8LL * sms * per_sm));
}

static void launch(const Variant& variant, const Buffers& b, long long batch) {
  const int block = variant.block;
  Kernel k = variant.kernel;
  k<<<grid_for(k, batch, block), block>>>(b.a, b.v, b.w, variant.vectors, variant.max_iterations, b.info, batch);
  CK(cudaGetLastError());
}

// Worst relative residual max|A v - v w| / max|A| and orthogonality max|V^T V - I| over the first
// `sample` matrices; eigenvalues must ascend.
static bool check(const std::vector<float>& a, const Buffers& b, long long batch, const char* name) {
  const long long sample = std::min<long long>(batch, 20000);
  std::vector<float> v(sample * N * N), w(sample * N);
  std::vector<int> info(sample);
  CK(cudaMemcpy(v.data(), b.v, v.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(w.data(), b.w, w.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(info.data(), b.info, info.size() * 4, cudaMemcpyDeviceToHost));
  double worst_res = 0, worst_orth = 0;
  long long bad_info = 0, unsorted = 0;
  for (long long m = 0; m < sample; ++m) {
    const float* am = &a[m * N * N];
    const float* vm = &v[m * N * N];  // row-major: column j is eigenvector j
    const float* wm = &w[m * N];
    double amax = 0;
    for (int i = 0; i < N * N; ++i) amax = std::max(amax, std::fabs((double)am[i]));
    for (int j = 0; j < N; ++j) {
      if (j > 0 && !(wm[j - 1] <= wm[j])) ++unsorted;
      for (int i = 0; i < N; ++i) {
        double r = 0;
        for (int k = 0; k < N; ++k) r += (double)am[i * N + k] * vm[k * N + j];
        r -= (double)wm[j] * vm[i * N + j];
        worst_res = std::max(worst_res, std::fabs(r) / amax);
      }
      for (int k = 0; k < N; ++k) {
        double d = 0;
        for (int i = 0; i < N; ++i) d += (double)vm[i * N + j] * vm[i * N + k];
        worst_orth = std::max(worst_orth, std::fabs(d - (j == k ? 1.0 : 0.0)));
      }
    }
    if (info[m] != 0) ++bad_info;
  }
  const bool ok = worst_res < 2e-5 && worst_orth < 2e-5 && bad_info == 0 && unsorted == 0;
  std::printf("check %-24s residual %.2e orthogonality %.2e info!=0 %lld unsorted %lld: %s\n", name, worst_res,
              worst_orth, bad_info, unsorted, ok ? "ok" : "WRONG");
  return ok;
}

int main(int argc, char** argv) {
  const long long batch = argc > 1 ? std::atoll(argv[1]) : 100000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 9;
  const int launches = 20;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, batch %lld of %dx%d float32\n", prop.name, prop.multiProcessorCount, batch, N, N);

  std::mt19937 rng(12345);
  std::normal_distribution<float> normal;
  std::vector<float> a(batch * N * N);
  for (long long m = 0; m < batch; ++m)
    for (int i = 0; i < N; ++i)
      for (int j = 0; j <= i; ++j) a[m * N * N + i * N + j] = a[m * N * N + j * N + i] = normal(rng);
  Buffers b;
  CK(cudaMalloc(&b.a, a.size() * 4));
  CK(cudaMalloc(&b.v, a.size() * 4));
  CK(cudaMalloc(&b.w, batch * N * 4));
  CK(cudaMalloc(&b.info, batch * 4));
  CK(cudaMemcpy(b.a, a.data(), a.size() * 4, cudaMemcpyHostToDevice));

  // The copy ceiling: 1 GiB device to device, bytes read plus written.
  const size_t copy_bytes = size_t(1) << 30;
  void *src, *dst;
  CK(cudaMalloc(&src, copy_bytes));
  CK(cudaMalloc(&dst, copy_bytes));
  CK(cudaMemset(src, 1, copy_bytes));
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  auto time_ms = [&](auto&& body, int repeats) {
    CK(cudaEventRecord(start));
    for (int r = 0; r < repeats; ++r) body();
    CK(cudaEventRecord(stop));
    CK(cudaEventSynchronize(stop));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, start, stop));
    return ms / repeats;
  };
  std::vector<double> copy_ms;
  for (int r = 0; r < 5; ++r)
    copy_ms.push_back(time_ms([&] { CK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); }, 5));
  std::sort(copy_ms.begin(), copy_ms.end());
  const double copy_gbps = 2.0 * copy_bytes / copy_ms[copy_ms.size() / 2] / 1e6;
  std::printf("copy bandwidth %.0f GB/s\n", copy_gbps);
  CK(cudaFree(src));
  CK(cudaFree(dst));

  const int count = sizeof(kVariants) / sizeof(kVariants[0]);
  std::vector<bool> ok(count);
  for (int k = 0; k < count; ++k) {
    CK(cudaMemset(b.v, 0xff, a.size() * 4));  // NaN: every output must be written
    CK(cudaMemset(b.w, 0xff, batch * N * 4));
    launch(kVariants[k], b, batch);
    CK(cudaDeviceSynchronize());
    ok[k] = !kVariants[k].checked || check(a, b, batch, kVariants[k].name);
  }
  std::vector<std::vector<double>> piped(count), single(count);
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < count; ++i) {
      const int k = r % 2 == 0 ? i : count - 1 - i;
      if (!ok[k]) continue;
      launch(kVariants[k], b, batch);  // warm
      piped[k].push_back(time_ms([&] { launch(kVariants[k], b, batch); }, launches));
      single[k].push_back(time_ms([&] { launch(kVariants[k], b, batch); }, 1));
    }
  const double bytes = double(batch) * (2 * N * N + N) * 4;
  std::printf("\n%-24s %12s %12s %10s %10s %12s\n", "kernel", "piped us", "(min-max)", "GB/s", "of copy", "single us");
  for (int k = 0; k < count; ++k) {
    if (!ok[k]) continue;
    auto& p = piped[k];
    auto& s = single[k];
    std::sort(p.begin(), p.end());
    std::sort(s.begin(), s.end());
    const double us = p[p.size() / 2] * 1e3;
    std::printf("%-24s %12.2f %5.1f-%-6.1f %10.0f %9.1f%% %12.2f\n", kVariants[k].name, us, p.front() * 1e3,
                p.back() * 1e3, bytes / us / 1e3, 100.0 * bytes / us / 1e3 / copy_gbps, s[s.size() / 2] * 1e3);
  }
  return 0;
}
