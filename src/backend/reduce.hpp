#pragma once
// Reductions and scans, implemented by backend/cpu/reduce.cpp and backend/cuda/reduce.cu with
// the same signatures. The backend-neutral layer (src/ops/reduce.cpp) has already validated,
// cast the input to one of the few compute dtypes (int64, uint64, float32, float64) and laid it
// out as a contiguous (outer, len, inner) block whose middle axis is the one reduced, so the
// backends instantiate only those four element types.
#include <cstdint>

#include "backend/dispatch.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::backend {

enum class ReduceOp {
  sum, prod, min, max, nansum, nanprod, nanmin, nanmax,
  any, all,               // output bool
  argmin, argmax, nanargmin, nanargmax,  // output int64; -1 for an all-NaN slice (nanarg*)
  mean, nanmean,          // output in the compute dtype: sum / count (count of non-NaN for nanmean)
  var, nanvar,            // sum((x - mean)^2) / (count - ddof); `mean` holds one value per output
  std, nanstd,            // sqrt of var
};

struct ReduceProblem {
  ReduceOp op = ReduceOp::sum;
  DType dtype = DType::float32;  // compute dtype of `in`: int64, uint64, float32 or float64
  const void* in = nullptr;      // contiguous (outer, len, inner)
  std::int64_t outer = 1, len = 0, inner = 1;
  void* out = nullptr;           // contiguous (outer, inner): dtype, bool (any/all) or int64 (arg*)
  const void* mean = nullptr;    // var/std: (outer, inner) means in `dtype`
  double ddof = 0;  // var/std: divide by count - ddof
};

enum class ScanOp { cumsum, cumprod };

struct ScanProblem {
  ScanOp op = ScanOp::cumsum;
  DType dtype = DType::float64;  // int64, uint64, float32 or float64
  const void* in = nullptr;      // contiguous (rows, len), scanned along len
  void* out = nullptr;           // same layout and dtype
  std::int64_t rows = 1, len = 0;
};

#define TESSEL_REDUCE_BACKEND(X)                               \
  X(void, reduce, (const ReduceProblem& problem, const Stream& stream)) \
  X(void, scan, (const ScanProblem& problem, const Stream& stream))
TESSEL_BACKEND_FAMILY(TESSEL_REDUCE_BACKEND)

}  // namespace tessel::backend
