#pragma once
// Sorting and searching, implemented by backend/cpu/sort.cpp and backend/cuda/sort.cu with the
// same signatures. Keys arrive contiguous as (rows, len) in one of the six key dtypes int32,
// int64, uint32, uint64, float32, float64; src/ops/sort.cpp widens the narrower dtypes (bool,
// int8/16, uint8/16 and float16/bfloat16) to one of them first, so CUB is instantiated for six
// key types only. Order: ascending, stable, NaN last (any sign, any payload); -0.0 and +0.0
// compare equal, so ties between them keep their input order.
#include <cstddef>
#include <cstdint>

#include "backend/dispatch.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::backend {

struct SortProblem {
  DType dtype = DType::float32;
  const void* keys_in = nullptr;   // contiguous (rows, len)
  void* keys_out = nullptr;        // sorted keys, same layout (may be null for argsort only)
  std::int64_t* indices_out = nullptr;  // argsort: positions within the row (may be null)
  std::int64_t rows = 1, len = 0;
};

struct SearchProblem {
  DType dtype = DType::float32;
  const void* sorted = nullptr;  // contiguous 1-D, ascending with NaN last
  std::int64_t sorted_len = 0;
  const void* values = nullptr;  // contiguous
  std::int64_t count = 0;
  std::int64_t* out = nullptr;   // insertion points
  bool right = false;
};

#define TESSEL_SORT_BACKEND(X)                               \
  X(void, sort, (const SortProblem& problem, const Stream& stream)) \
  X(void, searchsorted, (const SearchProblem& problem, const Stream& stream))
TESSEL_BACKEND_FAMILY(TESSEL_SORT_BACKEND)

// CUDA only: the bare cub::DeviceRadixSort::SortPairs call (int32 keys, int64 values) that argsort
// of one int32 row makes, for bench/reduce_sort_bench.cpp to compare against. Two-phase as in CUB:
// temp == nullptr sets temp_bytes.
#define TESSEL_SORT_CUDA_ONLY(X)                                                                         \
  X(void, cub_sort_pairs_int32,                                                                          \
    (void* temp, std::size_t& temp_bytes, const std::int32_t* keys_in, std::int32_t* keys_out,            \
     const std::int64_t* values_in, std::int64_t* values_out, std::int64_t n, const Stream& stream))
TESSEL_BACKEND_CUDA_ONLY(TESSEL_SORT_CUDA_ONLY)

}  // namespace tessel::backend
