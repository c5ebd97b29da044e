// CPU reductions and scans over the canonical (outer, len, inner) block (see backend/reduce.hpp).
// One templated kernel per compute dtype (int64, uint64, float32, float64), OpenMP over the
// outputs. float32 accumulates in double; float64 sums are pairwise (blocks of 128, then a
// binary tree), which keeps the rounding error O(log n) as NumPy's.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/reduce.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    (void)x;
    return false;
  }
}

// Accumulation type: double for floats, the type itself for 64-bit integers.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;

// One strided slice: element k is data[k * stride].
template <class T>
struct Slice {
  const T* data;
  std::int64_t stride;
  std::int64_t len;
  T operator[](std::int64_t k) const { return data[k * stride]; }
};

constexpr std::int64_t pairwise_block = 128;

// Pairwise sum of [begin, end), NaNs replaced by zero when skip_nan.
template <class T>
Acc<T> pairwise_sum(const Slice<T>& s, std::int64_t begin, std::int64_t end, bool skip_nan) {
  if (end - begin <= pairwise_block) {
    Acc<T> acc = 0;
    for (std::int64_t k = begin; k < end; ++k) {
      const T x = s[k];
      if (!(skip_nan && is_nan(x))) acc += static_cast<Acc<T>>(x);
    }
    return acc;
  }
  const std::int64_t mid = begin + (end - begin) / 2;
  return pairwise_sum(s, begin, mid, skip_nan) + pairwise_sum(s, mid, end, skip_nan);
}

// A parallel pairwise sum for few long slices (full reductions): the slice is cut into one
// block per thread, each summed pairwise, and the block sums are added in order, so the result
// does not depend on scheduling.
template <class T>
Acc<T> parallel_sum(const Slice<T>& s, bool skip_nan) {
  constexpr std::int64_t blocks = 64;
  if (s.len < blocks * 16384) return pairwise_sum(s, 0, s.len, skip_nan);
  Acc<T> partial[blocks];
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    partial[b] = pairwise_sum(s, s.len * b / blocks, s.len * (b + 1) / blocks, skip_nan);
  }
  Acc<T> total = 0;
  for (std::int64_t b = 0; b < blocks; ++b) total += partial[b];
  return total;
}

template <class T>
std::int64_t count_valid(const Slice<T>& s, bool skip_nan) {
  if (!skip_nan) return s.len;
  std::int64_t n = 0;
  for (std::int64_t k = 0; k < s.len; ++k) n += is_nan(s[k]) ? 0 : 1;
  return n;
}

// Index of the first minimum (less) or maximum; NaN wins unless skip_nan; -1 if nothing valid.
template <class T>
std::int64_t arg_extremum(const Slice<T>& s, bool want_min, bool skip_nan) {
  std::int64_t best = -1;
  for (std::int64_t k = 0; k < s.len; ++k) {
    const T x = s[k];
    if (is_nan(x)) {
      if (skip_nan) continue;
      return k;
    }
    if (best < 0 || (want_min ? x < s[best] : x > s[best])) best = k;
  }
  return best;
}

template <class T>
T extremum(const Slice<T>& s, bool want_min, bool skip_nan) {
  const std::int64_t k = arg_extremum(s, want_min, skip_nan);
  if (k < 0) {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::quiet_NaN();
    return T{};
  }
  return s[k];
}

template <class T>
double variance(const Slice<T>& s, double m, double ddof, bool skip_nan) {
  double ss = 0;
  std::int64_t n = 0;
  for (std::int64_t k = 0; k < s.len; ++k) {
    const T x = s[k];
    if (skip_nan && is_nan(x)) continue;
    const double d = static_cast<double>(x) - m;
    ss += d * d;
    ++n;
  }
  const double dof = static_cast<double>(n) - ddof;
  return dof > 0 ? ss / dof : std::numeric_limits<double>::quiet_NaN();
}

template <class T>
void reduce_typed(const ReduceProblem& p) {
  const T* in = static_cast<const T*>(p.in);
  const std::int64_t outputs = p.outer * p.inner;
  const ReduceOp op = p.op;
  const bool nan_variant = op == ReduceOp::nansum || op == ReduceOp::nanprod || op == ReduceOp::nanmin ||
                           op == ReduceOp::nanmax || op == ReduceOp::nanargmin || op == ReduceOp::nanargmax ||
                           op == ReduceOp::nanmean || op == ReduceOp::nanvar || op == ReduceOp::nanstd;
  if (outputs == 1 && (op == ReduceOp::sum || op == ReduceOp::nansum)) {
    // One long slice: parallelize inside it instead of over outputs.
    const Slice<T> s{in, 1, p.len};
    static_cast<T*>(p.out)[0] = static_cast<T>(parallel_sum(s, nan_variant));
    return;
  }
#pragma omp parallel for schedule(static) if (outputs > 1 && outputs * p.len > 32768)
  for (std::int64_t o = 0; o < outputs; ++o) {
    const std::int64_t outer = o / p.inner, inner = o % p.inner;
    const Slice<T> s{in + outer * p.len * p.inner + inner, p.inner, p.len};
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::nansum:
        static_cast<T*>(p.out)[o] = static_cast<T>(pairwise_sum(s, 0, s.len, nan_variant));
        break;
      case ReduceOp::prod:
      case ReduceOp::nanprod: {
        Acc<T> acc = 1;
        for (std::int64_t k = 0; k < s.len; ++k) {
          const T x = s[k];
          if (!(nan_variant && is_nan(x))) acc *= static_cast<Acc<T>>(x);
        }
        static_cast<T*>(p.out)[o] = static_cast<T>(acc);
        break;
      }
      case ReduceOp::min:
      case ReduceOp::nanmin:
      case ReduceOp::max:
      case ReduceOp::nanmax:
        static_cast<T*>(p.out)[o] = extremum(s, op == ReduceOp::min || op == ReduceOp::nanmin, nan_variant);
        break;
      case ReduceOp::argmin:
      case ReduceOp::nanargmin:
      case ReduceOp::argmax:
      case ReduceOp::nanargmax:
        static_cast<std::int64_t*>(p.out)[o] =
            arg_extremum(s, op == ReduceOp::argmin || op == ReduceOp::nanargmin, nan_variant);
        break;
      case ReduceOp::any:
      case ReduceOp::all: {
        const bool want_any = op == ReduceOp::any;
        bool result = !want_any;
        for (std::int64_t k = 0; k < s.len; ++k) {
          if ((s[k] != T{0}) == want_any) {
            result = want_any;
            break;
          }
        }
        static_cast<bool*>(p.out)[o] = result;
        break;
      }
      case ReduceOp::mean:
      case ReduceOp::nanmean: {
        const double total = static_cast<double>(pairwise_sum(s, 0, s.len, nan_variant));
        const std::int64_t n = count_valid(s, nan_variant);
        // 0 / 0 is NaN for an empty or all-NaN slice, as NumPy.
        static_cast<T*>(p.out)[o] =
            static_cast<T>(n > 0 ? total / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN());
        break;
      }
      case ReduceOp::var:
      case ReduceOp::nanvar:
      case ReduceOp::std:
      case ReduceOp::nanstd: {
        const double m = static_cast<double>(static_cast<const T*>(p.mean)[o]);
        double v = variance(s, m, p.ddof, nan_variant);
        if (op == ReduceOp::std || op == ReduceOp::nanstd) v = std::sqrt(v);
        static_cast<T*>(p.out)[o] = static_cast<T>(v);
        break;
      }
    }
  }
}

template <class T>
void scan_typed(const ScanProblem& p) {
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
#pragma omp parallel for schedule(static) if (p.rows > 1 && p.rows * p.len > 32768)
  for (std::int64_t r = 0; r < p.rows; ++r) {
    // Accumulates in the output dtype, so the result matches NumPy's running value exactly.
    T acc = p.op == ScanOp::cumsum ? T{0} : T{1};
    for (std::int64_t k = 0; k < p.len; ++k) {
      const T x = in[r * p.len + k];
      acc = p.op == ScanOp::cumsum ? static_cast<T>(acc + x) : static_cast<T>(acc * x);
      out[r * p.len + k] = acc;
    }
  }
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
