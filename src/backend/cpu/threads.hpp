#pragma once
// How many threads a CPU loop runs on: the one setting of every CPU op (tessel::num_threads(),
// TESSEL_NUM_THREADS / ts.set_num_threads), fewer when the loop is too small to pay for them, and
// one inside another OpenMP region (the fused evaluator's blocks, linalg's batches): a nested
// region would only oversubscribe the cores the outer one already uses.
//
//   const int nt = cpu::loop_threads(n, cpu::kMinElementsPerThread);
//   #pragma omp parallel for num_threads(nt) if (nt > 1)
//
// or, for loops that must not wait on a thread the OS runs late, tessel's own workers:
//
//   cpu::parallel_pieces(pieces, nt, [&](std::int64_t piece) { ... });
//
// The BLAS follows the same rule (blas_threads.hpp).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tessel/core/config.hpp"

namespace tessel::backend::cpu {

// Elements of a cheap elementwise loop (an add: a few ns per element at memory speed) below which a
// second thread costs more than it saves. Measured on the 2-core EPYC build machine: a + b over
// float32 gains from 2 threads from about 64K elements (256 KiB per operand) up; fork and join of
// libgomp's pool is about 2-5 us there.
constexpr std::int64_t kMinElementsPerThread = 32768;
// The same for loops whose elements each cost a transcendental function (exp, sin, pow...).
constexpr std::int64_t kMinCostlyElementsPerThread = 4096;

// True on a thread running pieces of run_pieces (the caller's or a worker's).
bool in_parallel_pieces();

// Threads for `work` units when each thread should get at least `min_per_thread` of them: 1 inside
// an active OpenMP region or run_pieces, or below 2 * min_per_thread, else at most num_threads().
inline int loop_threads(std::int64_t work, std::int64_t min_per_thread) {
  const int limit = tessel::num_threads();
  if (limit <= 1 || work < 2 * min_per_thread || omp_in_parallel() || in_parallel_pieces()) return 1;
  return static_cast<int>(std::min<std::int64_t>(limit, work / std::max<std::int64_t>(min_per_thread, 1)));
}

// Calls fn(ctx, piece) for every piece in [0, pieces), on the calling thread and up to threads - 1
// of tessel's CPU workers (threads.cpp), which take pieces from one counter as they come free. The
// call returns when every piece is done, without waiting for a worker that has not started (one
// the OS has not yet run, another process holding its core): the others take its pieces. Nested
// calls, and calls while another thread holds the workers, run on the calling thread. The first
// exception of a piece is rethrown (the pieces not yet started are skipped).
void run_pieces(std::int64_t pieces, int threads, void (*fn)(void*, std::int64_t), void* ctx);

// run_pieces over a callable: body(piece).
template <class Body>
void parallel_pieces(std::int64_t pieces, int threads, Body&& body) {
  using B = std::remove_reference_t<Body>;
  run_pieces(pieces, threads, [](void* ctx, std::int64_t piece) { (*static_cast<B*>(ctx))(piece); },
             const_cast<void*>(static_cast<const void*>(&body)));
}

}  // namespace tessel::backend::cpu
