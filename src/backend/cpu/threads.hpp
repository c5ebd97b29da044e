#pragma once
// How many threads a CPU loop runs on: the one setting of every CPU op (tessel::num_threads(),
// TESSEL_NUM_THREADS / ts.set_num_threads), fewer when the loop is too small to pay for them, and
// one inside another OpenMP region (the fused evaluator's blocks, linalg's batches): a nested
// region would only oversubscribe the cores the outer one already uses.
//
//   const int nt = cpu::loop_threads(n, cpu::kMinElementsPerThread);
//   #pragma omp parallel for num_threads(nt) if (nt > 1)
//
// The BLAS follows the same rule (blas_threads.hpp).
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "tessel/core/config.hpp"

namespace tessel::backend::cpu {

// Elements of a cheap elementwise loop (an add: a few ns per element at memory speed) below which a
// second thread costs more than it saves. Measured on the 2-core EPYC build machine: a + b over
// float32 gains from 2 threads from about 64K elements (256 KiB per operand) up; fork and join of
// libgomp's pool is about 2-5 us there.
constexpr std::int64_t kMinElementsPerThread = 32768;
// The same for loops whose elements each cost a transcendental function (exp, sin, pow...).
constexpr std::int64_t kMinCostlyElementsPerThread = 4096;

// Threads for `work` units when each thread should get at least `min_per_thread` of them: 1 inside
// an active OpenMP region or below 2 * min_per_thread, else at most num_threads().
inline int loop_threads(std::int64_t work, std::int64_t min_per_thread) {
  const int limit = tessel::num_threads();
  if (limit <= 1 || work < 2 * min_per_thread || omp_in_parallel()) return 1;
  return static_cast<int>(std::min<std::int64_t>(limit, work / std::max<std::int64_t>(min_per_thread, 1)));
}

}  // namespace tessel::backend::cpu
