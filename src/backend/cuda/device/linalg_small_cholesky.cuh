#pragma once
// Cholesky, one matrix per thread in registers.
// Included through linalg_small.cuh, which undefines the helper macros at its end.
#include "linalg_small_common.cuh"

namespace tessel_linalg_small {

// ---- Cholesky: the factor replaces the `Upper` triangle; info = order of the failing minor ----
template <class T, int N, bool Upper>
__global__ void cholesky(T* __restrict__ a, int* __restrict__ info, long long batch) {
  TESSEL_FOR_EACH_MATRIX(b, batch) {
    T* m = a + b * N * N;
    T l[N * N];  // l[i + j * N] = L(i, j), i >= j; read from the chosen triangle
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j)
      TESSEL_UNROLL
      for (int i = j; i < N; ++i) l[i + j * N] = Upper ? m[j + i * N] : m[i + j * N];
    int failed = 0;
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j) {
      T d = l[j + j * N];
      TESSEL_UNROLL
      for (int k = 0; k < j; ++k) d -= l[j + k * N] * l[j + k * N];
      if (!(d > T(0)) && failed == 0) failed = j + 1;  // also NaN
      const T r = sqrt_of(d);
      l[j + j * N] = r;
      TESSEL_UNROLL
      for (int i = j + 1; i < N; ++i) {
        T s = l[i + j * N];
        TESSEL_UNROLL
        for (int k = 0; k < j; ++k) s -= l[i + k * N] * l[j + k * N];
        l[i + j * N] = s / r;
      }
    }
    TESSEL_UNROLL
    for (int j = 0; j < N; ++j)
      TESSEL_UNROLL
      for (int i = j; i < N; ++i) {
        if (Upper) m[j + i * N] = l[i + j * N];
        else m[i + j * N] = l[i + j * N];
      }
    info[b] = failed;
  }
}

}  // namespace tessel_linalg_small
