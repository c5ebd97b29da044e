// CPU reductions and scans over the canonical (outer, len, inner) block (see backend/reduce.hpp).
// One templated kernel per compute dtype (int64, uint64, float32, float64).
//
// Sums (sum, nansum, mean, nanmean, the squared deviations of var/std) are pairwise, as NumPy's:
// blocks of up to kPairwiseBlock elements summed in kLanes independent lanes (which the compiler
// keeps in vector registers), halves added recursively above that, so the rounding error grows as
// O(log n). float32 accumulates in double. A long full reduction is cut into kParallelBlocks fixed
// blocks summed on the threads and added in order, so its result does not depend on the thread
// count.
//
// Two layouts: inner == 1 (each output reduces a contiguous slice: full and last-axis reductions)
// runs the lanes along the slice; inner > 1 (the reduced axis is not last: column sums and the like)
// walks the rows of a tile of kTile neighbouring outputs at once, so every load is contiguous and
// the tile's accumulators are the vector lanes. Threads: over outputs (or tiles), or inside one long
// slice; never more than num_threads() (threads.hpp).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cpu/threads.hpp"
#include "backend/reduce.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

template <class T>
inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    (void)x;
    return false;
  }
}

// Accumulation type: double for floats, the type itself for 64-bit integers.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;

constexpr std::int64_t kPairwiseBlock = 128;  // NumPy's PW_BLOCKSIZE
constexpr int kLanes = 8;                     // independent partial sums of a block
constexpr std::int64_t kParallelBlocks = 64;  // fixed blocks of a long full sum
constexpr std::int64_t kTile = 64;            // outputs of one column tile (inner > 1)

// ---- pairwise sums of a transform of the elements ---------------------------------------------
// Term(x) is the value summed for element x: x, x or 0 for NaN (nansum), (x - mean)^2 (var)...

// Term summed over one block of up to kPairwiseBlock contiguous elements, in kLanes lanes.
template <class A, class T, class Term>
[[gnu::always_inline]] inline A block_sum(const T* x, std::int64_t n, const Term& term) {
  A lane[kLanes] = {};
  std::int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) lane[j] += static_cast<A>(term(x[k + j]));
  }
  A tail = 0;
  for (; k < n; ++k) tail += static_cast<A>(term(x[k]));
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])) + tail;
}

// Pairwise sum of Term over x[0, n), contiguous, accumulated in A: the block sums combined as a
// binary counter combines bits (two partial sums of the same level make one of the next), so
// every element passes O(log n) additions, without recursion.
template <class A, class T, class Term>
[[gnu::always_inline]] inline A pairwise(const T* x, std::int64_t n, const Term& term) {
  if (n <= kPairwiseBlock) return block_sum<A>(x, n, term);
  A partial[64];
  int level[64];
  int top = 0;
  for (std::int64_t first = 0; first < n; first += kPairwiseBlock) {
    A sum = block_sum<A>(x + first, std::min(kPairwiseBlock, n - first), term);
    int l = 0;
    while (top > 0 && level[top - 1] == l) sum = partial[--top] + sum, ++l;
    partial[top] = sum;
    level[top++] = l;
  }
  A total = partial[--top];
  while (top > 0) total = partial[--top] + total;
  return total;
}

// Pairwise sums over rows of a tile: out[j] = sum over r < rows of Term(x[r * stride + j]), j < w,
// halves of rows added recursively above kPairwiseBlock rows.
template <class A, class T, class Term>
void pairwise_columns(const T* x, std::int64_t rows, std::int64_t stride, std::int64_t w, const Term& term, A* out) {
  if (rows <= kPairwiseBlock) {
    for (std::int64_t j = 0; j < w; ++j) out[j] = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * stride;
#pragma omp simd
      for (std::int64_t j = 0; j < w; ++j) out[j] += static_cast<A>(term(row[j]));
    }
    return;
  }
  const std::int64_t half = rows / 2;
  A second[kTile];
  pairwise_columns<A>(x, half, stride, w, term, out);
  pairwise_columns<A>(x + half * stride, rows - half, stride, w, term, second);
#pragma omp simd
  for (std::int64_t j = 0; j < w; ++j) out[j] += second[j];
}

// The sums of float32 and float64 data (sum, nansum, mean), compiled also for x86-64-v3 and
// x86-64-v4 and chosen by the CPU at load time (GCC's target_clones): the block sums' conversions to
// double and additions take 4 or 8 lanes per instruction instead of 2. The same additions in the
// same order on every target, so the same result.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define TESSEL_SUM_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define TESSEL_SUM_CLONES
#endif

template <class T>
struct Plain;
template <class T>
struct SkipNan;

TESSEL_SUM_CLONES double sum_f32(const float* x, std::int64_t n, bool skip_nan);
TESSEL_SUM_CLONES double sum_f64(const double* x, std::int64_t n, bool skip_nan);

// A long contiguous slice: kParallelBlocks fixed blocks summed pairwise on the threads, added in
// order (the same result on any number of threads).
template <class A, class T, class Term>
A long_sum(const T* x, std::int64_t n, const Term& term) {
  if (n < kParallelBlocks * 2048) return pairwise<A>(x, n, term);
  const int threads = loop_threads(n, kMinElementsPerThread);
  A partial[kParallelBlocks];
  parallel_pieces(kParallelBlocks, threads, [&](std::int64_t b) {
    // Block bounds at multiples of 16 elements (one cache line of float32 per thread boundary).
    const std::int64_t lo = (n * b / kParallelBlocks) & ~std::int64_t{15};
    const std::int64_t hi = b + 1 == kParallelBlocks ? n : (n * (b + 1) / kParallelBlocks) & ~std::int64_t{15};
    partial[b] = pairwise<A>(x + lo, hi - lo, term);
  });
  A total = 0;
  for (std::int64_t b = 0; b < kParallelBlocks; ++b) total += partial[b];
  return total;
}

template <class T>
struct Plain {
  Acc<T> operator()(T x) const { return static_cast<Acc<T>>(x); }
};
template <class T>
struct SkipNan {
  Acc<T> operator()(T x) const { return is_nan(x) ? Acc<T>(0) : static_cast<Acc<T>>(x); }
};

TESSEL_SUM_CLONES double sum_f32(const float* x, std::int64_t n, bool skip_nan) {
  return skip_nan ? pairwise<double>(x, n, SkipNan<float>{}) : pairwise<double>(x, n, Plain<float>{});
}
TESSEL_SUM_CLONES double sum_f64(const double* x, std::int64_t n, bool skip_nan) {
  return skip_nan ? pairwise<double>(x, n, SkipNan<double>{}) : pairwise<double>(x, n, Plain<double>{});
}

// Pairwise sum of x (NaN as 0 with skip_nan) in Acc<T>: the cloned kernels for float and double.
template <class T>
Acc<T> plain_sum(const T* x, std::int64_t n, bool skip_nan) {
  if constexpr (std::is_same_v<T, float>) {
    return sum_f32(x, n, skip_nan);
  } else if constexpr (std::is_same_v<T, double>) {
    return sum_f64(x, n, skip_nan);
  } else {
    return skip_nan ? pairwise<Acc<T>>(x, n, SkipNan<T>{}) : pairwise<Acc<T>>(x, n, Plain<T>{});
  }
}

// The same over kParallelBlocks fixed blocks on the threads for a long slice (see long_sum).
template <class T>
Acc<T> long_plain_sum(const T* x, std::int64_t n, bool skip_nan) {
  if (n < kParallelBlocks * 2048) return plain_sum(x, n, skip_nan);
  const int threads = loop_threads(n, kMinElementsPerThread);
  Acc<T> partial[kParallelBlocks];
  parallel_pieces(kParallelBlocks, threads, [&](std::int64_t b) {
    const std::int64_t lo = (n * b / kParallelBlocks) & ~std::int64_t{15};
    const std::int64_t hi = b + 1 == kParallelBlocks ? n : (n * (b + 1) / kParallelBlocks) & ~std::int64_t{15};
    partial[b] = plain_sum(x + lo, hi - lo, skip_nan);
  });
  Acc<T> total = 0;
  for (std::int64_t b = 0; b < kParallelBlocks; ++b) total += partial[b];
  return total;
}
template <class T>
struct CountValid {  // 1 per non-NaN element (nanmean's count), summed exactly in double
  double operator()(T x) const { return is_nan(x) ? 0.0 : 1.0; }
};
template <class T>
struct SquaredDeviation {
  double mean;
  bool skip_nan;
  double operator()(T x) const {
    const double d = static_cast<double>(x) - mean;
    return skip_nan && is_nan(x) ? 0.0 : d * d;
  }
};

// ---- extrema -------------------------------------------------------------------------------------

// min or max of x[0, n) in lanes. Returns false when no element counts (all NaN with skip_nan, or
// n == 0); NaN (without skip_nan) gives NaN.
template <class T>
bool extremum(const T* x, std::int64_t n, bool want_min, bool skip_nan, T& result) {
  if (n == 0) return false;
  if constexpr (std::is_floating_point_v<T>) {
    const T init = want_min ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity();
    T lane[kLanes];
    bool nan_lane[kLanes] = {}, valid_lane[kLanes] = {};
    for (int j = 0; j < kLanes; ++j) lane[j] = init;
    std::int64_t k = 0;
    if (want_min) {
      for (; k + kLanes <= n; k += kLanes) {
#pragma omp simd
        for (int j = 0; j < kLanes; ++j) {
          const T v = x[k + j];
          lane[j] = v < lane[j] ? v : lane[j];
          nan_lane[j] |= v != v;
          valid_lane[j] |= v == v;
        }
      }
    } else {
      for (; k + kLanes <= n; k += kLanes) {
#pragma omp simd
        for (int j = 0; j < kLanes; ++j) {
          const T v = x[k + j];
          lane[j] = v > lane[j] ? v : lane[j];
          nan_lane[j] |= v != v;
          valid_lane[j] |= v == v;
        }
      }
    }
    T best = init;
    bool any_nan = false, any_valid = false;
    for (int j = 0; j < kLanes; ++j) {
      best = want_min ? (lane[j] < best ? lane[j] : best) : (lane[j] > best ? lane[j] : best);
      any_nan |= nan_lane[j];
      any_valid |= valid_lane[j];
    }
    for (; k < n; ++k) {
      const T v = x[k];
      if (v != v) {
        any_nan = true;
        continue;
      }
      any_valid = true;
      best = want_min ? (v < best ? v : best) : (v > best ? v : best);
    }
    if (any_nan && !skip_nan) {
      result = std::numeric_limits<T>::quiet_NaN();
      return true;
    }
    if (!any_valid) return false;
    result = best;
    return true;
  } else {
    (void)skip_nan;
    T best = x[0];
    if (want_min) {
#pragma omp simd reduction(min : best)
      for (std::int64_t k = 0; k < n; ++k) best = x[k] < best ? x[k] : best;
    } else {
#pragma omp simd reduction(max : best)
      for (std::int64_t k = 0; k < n; ++k) best = x[k] > best ? x[k] : best;
    }
    result = best;
    return true;
  }
}

// Index of the first minimum (or maximum) of x[0, n); the first NaN unless skip_nan; -1 if nothing
// counts. Two passes: the value (vectorized), then its first position.
template <class T>
std::int64_t arg_extremum(const T* x, std::int64_t n, bool want_min, bool skip_nan) {
  T best{};
  if (!extremum(x, n, want_min, skip_nan, best)) return -1;
  if (is_nan(best)) {
    for (std::int64_t k = 0; k < n; ++k) {
      if (is_nan(x[k])) return k;
    }
  }
  for (std::int64_t k = 0; k < n; ++k) {
    if (x[k] == best) return k;
  }
  return -1;  // not reached
}

// ---- one output per contiguous slice (inner == 1) ----------------------------------------------

template <class T>
void reduce_slice(const ReduceProblem& p, const T* s, std::int64_t o, bool nan_variant, bool long_slice) {
  const std::int64_t len = p.len;
  // Sums of a term in accumulator A: on the threads for the one long slice of a full reduction.
  auto sum = [&](auto acc, const auto& term) {
    using A = decltype(acc);
    return long_slice ? long_sum<A>(s, len, term) : pairwise<A>(s, len, term);
  };
  switch (p.op) {
    case ReduceOp::sum:
    case ReduceOp::nansum:
      static_cast<T*>(p.out)[o] = static_cast<T>(long_slice ? long_plain_sum(s, len, nan_variant) : plain_sum(s, len, nan_variant));
      break;
    case ReduceOp::prod:
    case ReduceOp::nanprod: {
      Acc<T> lane[kLanes];
      for (int j = 0; j < kLanes; ++j) lane[j] = 1;
      std::int64_t k = 0;
      for (; k + kLanes <= len; k += kLanes) {
#pragma omp simd
        for (int j = 0; j < kLanes; ++j) {
          const T x = s[k + j];
          lane[j] *= (nan_variant && is_nan(x)) ? Acc<T>(1) : static_cast<Acc<T>>(x);
        }
      }
      Acc<T> acc = ((lane[0] * lane[1]) * (lane[2] * lane[3])) * ((lane[4] * lane[5]) * (lane[6] * lane[7]));
      for (; k < len; ++k) {
        if (!(nan_variant && is_nan(s[k]))) acc *= static_cast<Acc<T>>(s[k]);
      }
      static_cast<T*>(p.out)[o] = static_cast<T>(acc);
      break;
    }
    case ReduceOp::min:
    case ReduceOp::nanmin:
    case ReduceOp::max:
    case ReduceOp::nanmax: {
      T v{};
      if (!extremum(s, len, p.op == ReduceOp::min || p.op == ReduceOp::nanmin, nan_variant, v)) {
        v = std::is_floating_point_v<T> ? std::numeric_limits<T>::quiet_NaN() : T{};
      }
      static_cast<T*>(p.out)[o] = v;
      break;
    }
    case ReduceOp::argmin:
    case ReduceOp::nanargmin:
    case ReduceOp::argmax:
    case ReduceOp::nanargmax:
      static_cast<std::int64_t*>(p.out)[o] =
          arg_extremum(s, len, p.op == ReduceOp::argmin || p.op == ReduceOp::nanargmin, nan_variant);
      break;
    case ReduceOp::any:
    case ReduceOp::all: {
      const bool want_any = p.op == ReduceOp::any;
      bool result = !want_any;
      // Chunks of 256, each tested in lanes, stopping at the first chunk that decides.
      for (std::int64_t k = 0; k < len && result != want_any; k += 256) {
        const std::int64_t end = std::min(len, k + 256);
        int hits = 0;
#pragma omp simd reduction(| : hits)
        for (std::int64_t i = k; i < end; ++i) hits |= ((s[i] != T{0}) == want_any) ? 1 : 0;
        if (hits) result = want_any;
      }
      static_cast<bool*>(p.out)[o] = result;
      break;
    }
    case ReduceOp::mean:
    case ReduceOp::nanmean: {
      const double total = static_cast<double>(long_slice ? long_plain_sum(s, len, nan_variant) : plain_sum(s, len, nan_variant));
      const double n = nan_variant ? sum(0.0, CountValid<T>{}) : static_cast<double>(len);
      // 0 / 0 is NaN for an empty or all-NaN slice, as NumPy.
      static_cast<T*>(p.out)[o] = static_cast<T>(n > 0 ? total / n : std::numeric_limits<double>::quiet_NaN());
      break;
    }
    case ReduceOp::var:
    case ReduceOp::nanvar:
    case ReduceOp::std:
    case ReduceOp::nanstd: {
      const double m = static_cast<double>(static_cast<const T*>(p.mean)[o]);
      const SquaredDeviation<T> term{m, nan_variant};
      const double ss = sum(0.0, term);
      const double n = nan_variant ? sum(0.0, CountValid<T>{}) : static_cast<double>(len);
      const double dof = n - p.ddof;
      double v = dof > 0 ? ss / dof : std::numeric_limits<double>::quiet_NaN();
      if (p.op == ReduceOp::std || p.op == ReduceOp::nanstd) v = std::sqrt(v);
      static_cast<T*>(p.out)[o] = static_cast<T>(v);
      break;
    }
  }
}

// ---- a tile of neighbouring outputs (inner > 1) -------------------------------------------------

// Outputs [j0, j0 + w) of outer index `outer`: column j of the tile reduces x[r * inner + j], r < len.
template <class T>
void reduce_tile(const ReduceProblem& p, std::int64_t outer, std::int64_t j0, std::int64_t w, bool nan_variant) {
  const std::int64_t len = p.len, inner = p.inner;
  const T* x = static_cast<const T*>(p.in) + outer * len * inner + j0;
  const std::int64_t o0 = outer * inner + j0;
  switch (p.op) {
    case ReduceOp::sum:
    case ReduceOp::nansum:
    case ReduceOp::mean:
    case ReduceOp::nanmean: {
      Acc<T> acc[kTile];
      if (nan_variant) pairwise_columns<Acc<T>>(x, len, inner, w, SkipNan<T>{}, acc);
      else pairwise_columns<Acc<T>>(x, len, inner, w, Plain<T>{}, acc);
      T* out = static_cast<T*>(p.out) + o0;
      if (p.op == ReduceOp::sum || p.op == ReduceOp::nansum) {
        for (std::int64_t j = 0; j < w; ++j) out[j] = static_cast<T>(acc[j]);
        break;
      }
      double count[kTile];
      if (nan_variant) {
        pairwise_columns<double>(x, len, inner, w, CountValid<T>{}, count);
      } else {
        for (std::int64_t j = 0; j < w; ++j) count[j] = static_cast<double>(len);
      }
      for (std::int64_t j = 0; j < w; ++j) {
        out[j] = static_cast<T>(count[j] > 0 ? static_cast<double>(acc[j]) / count[j]
                                             : std::numeric_limits<double>::quiet_NaN());
      }
      break;
    }
    case ReduceOp::var:
    case ReduceOp::nanvar:
    case ReduceOp::std:
    case ReduceOp::nanstd: {
      // Rows in order (as NumPy's axis-0 var), the tile's columns in lanes.
      T* out = static_cast<T*>(p.out) + o0;
      const T* means = static_cast<const T*>(p.mean) + o0;
      double m[kTile], ss[kTile] = {}, n[kTile] = {};
      for (std::int64_t j = 0; j < w; ++j) m[j] = static_cast<double>(means[j]);
      for (std::int64_t r = 0; r < len; ++r) {
        const T* row = x + r * inner;
#pragma omp simd
        for (std::int64_t j = 0; j < w; ++j) {
          const bool skip = nan_variant && is_nan(row[j]);
          const double d = static_cast<double>(row[j]) - m[j];
          ss[j] += skip ? 0.0 : d * d;
          n[j] += skip ? 0.0 : 1.0;
        }
      }
      for (std::int64_t j = 0; j < w; ++j) {
        const double dof = n[j] - p.ddof;
        double v = dof > 0 ? ss[j] / dof : std::numeric_limits<double>::quiet_NaN();
        if (p.op == ReduceOp::std || p.op == ReduceOp::nanstd) v = std::sqrt(v);
        out[j] = static_cast<T>(v);
      }
      break;
    }
    case ReduceOp::prod:
    case ReduceOp::nanprod: {
      Acc<T> acc[kTile];
      for (std::int64_t j = 0; j < w; ++j) acc[j] = 1;
      for (std::int64_t r = 0; r < len; ++r) {
        const T* row = x + r * inner;
#pragma omp simd
        for (std::int64_t j = 0; j < w; ++j) acc[j] *= (nan_variant && is_nan(row[j])) ? Acc<T>(1) : static_cast<Acc<T>>(row[j]);
      }
      T* out = static_cast<T*>(p.out) + o0;
      for (std::int64_t j = 0; j < w; ++j) out[j] = static_cast<T>(acc[j]);
      break;
    }
    case ReduceOp::min:
    case ReduceOp::nanmin:
    case ReduceOp::max:
    case ReduceOp::nanmax:
    case ReduceOp::argmin:
    case ReduceOp::nanargmin:
    case ReduceOp::argmax:
    case ReduceOp::nanargmax: {
      const bool want_min = p.op == ReduceOp::min || p.op == ReduceOp::nanmin || p.op == ReduceOp::argmin ||
                            p.op == ReduceOp::nanargmin;
      const bool arg = p.op == ReduceOp::argmin || p.op == ReduceOp::nanargmin || p.op == ReduceOp::argmax ||
                       p.op == ReduceOp::nanargmax;
      // Per column: the best value and its first row; a NaN wins (first one) unless nan_variant.
      T best[kTile];
      std::int64_t at[kTile];
      for (std::int64_t j = 0; j < w; ++j) at[j] = -1;
      for (std::int64_t r = 0; r < len; ++r) {
        const T* row = x + r * inner;
        for (std::int64_t j = 0; j < w; ++j) {
          const T v = row[j];
          if (is_nan(v)) {
            if (nan_variant) continue;
            if (!(at[j] >= 0 && is_nan(best[j]))) best[j] = v, at[j] = r;
            continue;
          }
          if (at[j] < 0 || (!is_nan(best[j]) && (want_min ? v < best[j] : v > best[j]))) best[j] = v, at[j] = r;
        }
      }
      if (arg) {
        std::int64_t* out = static_cast<std::int64_t*>(p.out) + o0;
        for (std::int64_t j = 0; j < w; ++j) out[j] = at[j];
      } else {
        T* out = static_cast<T*>(p.out) + o0;
        for (std::int64_t j = 0; j < w; ++j) {
          out[j] = at[j] >= 0 ? best[j] : (std::is_floating_point_v<T> ? std::numeric_limits<T>::quiet_NaN() : T{});
        }
      }
      break;
    }
    case ReduceOp::any:
    case ReduceOp::all: {
      const bool want_any = p.op == ReduceOp::any;
      bool hit[kTile] = {};
      for (std::int64_t r = 0; r < len; ++r) {
        const T* row = x + r * inner;
#pragma omp simd
        for (std::int64_t j = 0; j < w; ++j) hit[j] |= (row[j] != T{0}) == want_any;
      }
      bool* out = static_cast<bool*>(p.out) + o0;
      for (std::int64_t j = 0; j < w; ++j) out[j] = hit[j] ? want_any : !want_any;
      break;
    }
  }
}

// Long column sums of few tiles (a tall array summed over its rows): kParallelBlocks fixed row
// blocks per tile on the threads, added in order, as long_sum.
template <class T>
bool reduce_tall_columns(const ReduceProblem& p, bool nan_variant) {
  if (!(p.op == ReduceOp::sum || p.op == ReduceOp::nansum) || p.outer != 1 || p.inner > kTile) return false;
  const int threads = loop_threads(p.len * p.inner, kMinElementsPerThread);
  if (threads <= 1 || p.len < kParallelBlocks * 16) return false;
  const T* x = static_cast<const T*>(p.in);
  const std::int64_t w = p.inner;
  Acc<T> partial[kParallelBlocks][kTile];
  parallel_pieces(kParallelBlocks, threads, [&](std::int64_t b) {
    const std::int64_t lo = p.len * b / kParallelBlocks, hi = p.len * (b + 1) / kParallelBlocks;
    if (nan_variant) pairwise_columns<Acc<T>>(x + lo * w, hi - lo, w, w, SkipNan<T>{}, partial[b]);
    else pairwise_columns<Acc<T>>(x + lo * w, hi - lo, w, w, Plain<T>{}, partial[b]);
  });
  T* out = static_cast<T*>(p.out);
  for (std::int64_t j = 0; j < w; ++j) {
    Acc<T> total = 0;
    for (std::int64_t b = 0; b < kParallelBlocks; ++b) total += partial[b][j];
    out[j] = static_cast<T>(total);
  }
  return true;
}

bool is_nan_variant(ReduceOp op) {
  return op == ReduceOp::nansum || op == ReduceOp::nanprod || op == ReduceOp::nanmin || op == ReduceOp::nanmax ||
         op == ReduceOp::nanargmin || op == ReduceOp::nanargmax || op == ReduceOp::nanmean ||
         op == ReduceOp::nanvar || op == ReduceOp::nanstd;
}

template <class T>
void reduce_typed(const ReduceProblem& p) {
  const T* in = static_cast<const T*>(p.in);
  const std::int64_t outputs = p.outer * p.inner;
  const bool nan_variant = is_nan_variant(p.op);
  if (outputs == 0) return;
  if (p.inner == 1) {
    if (outputs == 1) {
      // One long slice: threads inside it (sums; the others run on this thread).
      reduce_slice<T>(p, in, 0, nan_variant, true);
      return;
    }
    const int threads = loop_threads(outputs * std::max<std::int64_t>(p.len, 1), kMinElementsPerThread);
    // Pieces of consecutive outputs, about 8 per thread.
    const std::int64_t per = std::max<std::int64_t>(1, outputs / (std::int64_t{threads} * 8));
    parallel_pieces((outputs + per - 1) / per, threads, [&](std::int64_t piece) {
      for (std::int64_t o = piece * per; o < std::min(outputs, (piece + 1) * per); ++o) {
        reduce_slice<T>(p, in + o * p.len, o, nan_variant, false);
      }
    });
    return;
  }
  if (reduce_tall_columns<T>(p, nan_variant)) return;
  const std::int64_t tiles_per_outer = (p.inner + kTile - 1) / kTile;
  const std::int64_t tiles = p.outer * tiles_per_outer;
  const int threads = std::min<std::int64_t>(loop_threads(outputs * std::max<std::int64_t>(p.len, 1), kMinElementsPerThread), tiles);
  parallel_pieces(tiles, std::max(threads, 1), [&](std::int64_t t) {
    const std::int64_t outer = t / tiles_per_outer, j0 = (t % tiles_per_outer) * kTile;
    reduce_tile<T>(p, outer, j0, std::min(kTile, p.inner - j0), nan_variant);
  });
}

template <class T>
void scan_typed(const ScanProblem& p) {
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const int threads = p.rows > 1 ? static_cast<int>(std::min<std::int64_t>(loop_threads(p.rows * p.len, kMinElementsPerThread), p.rows)) : 1;
  parallel_pieces(p.rows, std::max(threads, 1), [&](std::int64_t r) {
    // Accumulates in the output dtype, so the result matches NumPy's running value exactly.
    const T* x = in + r * p.len;
    T* y = out + r * p.len;
    T acc = p.op == ScanOp::cumsum ? T{0} : T{1};
    if (p.op == ScanOp::cumsum) {
      for (std::int64_t k = 0; k < p.len; ++k) y[k] = acc = static_cast<T>(acc + x[k]);
    } else {
      for (std::int64_t k = 0; k < p.len; ++k) y[k] = acc = static_cast<T>(acc * x[k]);
    }
  });
}

template <class F>
void dispatch_compute(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::int64: return f(TypeTag<std::int64_t>{});
    case DType::uint64: return f(TypeTag<std::uint64_t>{});
    case DType::float32: return f(TypeTag<float>{});
    case DType::float64: return f(TypeTag<double>{});
    default: throw DTypeError(std::string(op) + ": internal error, compute dtype " + dtype_name(dtype));
  }
}

}  // namespace

void reduce(const ReduceProblem& problem, const Stream& /*stream*/) {
  dispatch_compute(problem.dtype, "reduce", [&](auto tag) { reduce_typed<typename decltype(tag)::type>(problem); });
}

void scan(const ScanProblem& problem, const Stream& /*stream*/) {
  dispatch_compute(problem.dtype, "scan", [&](auto tag) { scan_typed<typename decltype(tag)::type>(problem); });
}

}  // namespace tessel::backend::cpu
