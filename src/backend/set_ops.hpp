#pragma once
// Set functions and repeat, implemented by backend/cpu/set_ops.cpp and backend/cuda/set_ops.cu
// with the same signatures. Keys arrive sorted (ascending, NaN last) in one of the six key dtypes
// of backend/sort.hpp; src/ops/set_ops.cpp sorts and widens them.
#include <cstdint>

#include "backend/dispatch.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::backend {

struct UniqueProblem {
  DType dtype = DType::int64;
  const void* sorted = nullptr;          // n keys, ascending, NaN last
  const std::int64_t* order = nullptr;   // input position of each sorted key (null: not needed)
  std::int64_t n = 0;
  std::int64_t* rank = nullptr;          // scratch, n: number of distinct values in sorted[0..i]
};

// Outputs of unique_write, sized by unique_rank's count; null pointers are not written.
struct UniqueOutputs {
  void* values = nullptr;               // count keys
  std::int64_t* indices = nullptr;      // count: order[] of each value's first sorted position
  std::int64_t* inverse = nullptr;      // n: rank - 1 at input position order[i]
  std::int64_t* counts = nullptr;       // count
  std::int64_t* starts = nullptr;       // scratch, count (used when counts is set)
};

struct IsinProblem {
  DType dtype = DType::int64;
  const void* sorted = nullptr;  // x2 sorted, n2 keys
  std::int64_t n2 = 0;
  const void* values = nullptr;  // x1, contiguous, n1 keys
  std::int64_t n1 = 0;
  bool* out = nullptr;           // n1
  bool invert = false;
};

// out[o, j, i] = in[o, k, i] for the k with ends[k-1] <= j < ends[k] (ends: inclusive cumsum of
// the counts along the repeated axis); elements are copied as `itemsize`-byte words.
struct RepeatProblem {
  const void* in = nullptr;           // contiguous (outer, len, inner)
  void* out = nullptr;                // contiguous (outer, total, inner)
  const std::int64_t* ends = nullptr; // len
  std::int64_t outer = 1, len = 0, inner = 1, total = 0, itemsize = 4;
};

// unique_rank fills rank and returns the number of distinct values (on CUDA it queues the scan and
// reads the count back: it waits for the stream).
#define TESSEL_SET_OPS_BACKEND(X)                                                                      \
  X(std::int64_t, unique_rank, (const UniqueProblem& problem, const Stream& stream))                     \
  X(void, unique_write,                                                                                  \
    (const UniqueProblem& problem, const UniqueOutputs& out, std::int64_t count, const Stream& stream))  \
  X(void, isin, (const IsinProblem& problem, const Stream& stream))                                     \
  X(void, repeat, (const RepeatProblem& problem, const Stream& stream))
TESSEL_BACKEND_FAMILY(TESSEL_SET_OPS_BACKEND)

}  // namespace tessel::backend
