// CPU set functions and repeat: sequential run detection over the sorted keys, OpenMP over the
// binary searches of isin and the rows of repeat.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/set_ops.hpp"
#include "backend/cpu/sort_keys.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

// Whether sorted position i starts a new value: value equality, so each NaN starts its own.
template <class T>
bool starts_run(const T* s, std::int64_t i) {
  return i == 0 || !(s[i - 1] == s[i]);
}

}  // namespace

std::int64_t unique_rank(const UniqueProblem& p, const Stream& /*stream*/) {
  std::int64_t count = 0;
  dispatch_sort_key(p.dtype, "unique/isin", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = static_cast<const T*>(p.sorted);
    for (std::int64_t i = 0; i < p.n; ++i) {
      count += starts_run(s, i) ? 1 : 0;
      p.rank[i] = count;
    }
  });
  return count;
}

void unique_write(const UniqueProblem& p, const UniqueOutputs& out, std::int64_t count, const Stream& /*stream*/) {
  dispatch_sort_key(p.dtype, "unique/isin", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = static_cast<const T*>(p.sorted);
    for (std::int64_t i = 0; i < p.n; ++i) {
      const std::int64_t r = p.rank[i] - 1;
      if (starts_run(s, i)) {
        if (out.values) static_cast<T*>(out.values)[r] = s[i];
        if (out.indices) out.indices[r] = p.order[i];
        if (out.counts) out.starts[r] = i;
      }
      if (out.inverse) out.inverse[p.order[i]] = r;
      if (out.counts && (i + 1 == p.n || starts_run(s, i + 1))) out.counts[r] = i + 1;
    }
    if (out.counts) {
      for (std::int64_t r = 0; r < count; ++r) out.counts[r] -= out.starts[r];
    }
  });
}

void isin(const IsinProblem& p, const Stream& /*stream*/) {
  dispatch_sort_key(p.dtype, "unique/isin", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* sorted = static_cast<const T*>(p.sorted);
    const T* end = sorted + p.n2;
    const T* values = static_cast<const T*>(p.values);
#pragma omp parallel for schedule(static) if (p.n1 > 4096)
    for (std::int64_t i = 0; i < p.n1; ++i) {
      const T v = values[i];
      const T* pos = std::lower_bound(sorted, end, v, nan_last_less<T>);
      const bool found = pos != end && *pos == v;  // NaN == NaN is false: NaN is in nothing
      p.out[i] = found != p.invert;
    }
  });
}

void repeat(const RepeatProblem& p, const Stream& /*stream*/) {
  const auto* in = static_cast<const unsigned char*>(p.in);
  auto* out = static_cast<unsigned char*>(p.out);
  const std::int64_t row = p.inner * p.itemsize;
#pragma omp parallel for schedule(static) if (p.outer * p.total * row > (1 << 16))
  for (std::int64_t o = 0; o < p.outer; ++o) {
    std::int64_t j = 0;
    for (std::int64_t k = 0; k < p.len; ++k) {
      const unsigned char* src = in + (o * p.len + k) * row;
      for (; j < p.ends[k]; ++j) std::memcpy(out + (o * p.total + j) * row, src, static_cast<std::size_t>(row));
    }
  }
}

}  // namespace tessel::backend::cpu
