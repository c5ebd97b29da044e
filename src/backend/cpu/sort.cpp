// CPU sort and search: std::stable_sort of row indices with a NaN-last comparator, parallel over
// rows. Comparing by value (not bits) makes -0.0 and +0.0 equal, so their ties stay stable.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backend/sort.hpp"
#include "backend/cpu/sort_keys.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

template <class T>
void sort_typed(const SortProblem& p) {
  const T* keys = static_cast<const T*>(p.keys_in);
#pragma omp parallel for schedule(dynamic) if (p.rows > 1 && p.rows * p.len > 32768)
  for (std::int64_t r = 0; r < p.rows; ++r) {
    const T* row = keys + r * p.len;
    std::vector<std::int64_t> index(static_cast<std::size_t>(p.len));
    std::iota(index.begin(), index.end(), std::int64_t{0});
    std::stable_sort(index.begin(), index.end(),
                     [row](std::int64_t i, std::int64_t j) { return nan_last_less(row[i], row[j]); });
    for (std::int64_t k = 0; k < p.len; ++k) {
      const std::int64_t i = index[static_cast<std::size_t>(k)];
      if (p.keys_out) static_cast<T*>(p.keys_out)[r * p.len + k] = row[i];
      if (p.indices_out) p.indices_out[r * p.len + k] = i;
    }
  }
}

template <class T>
void search_typed(const SearchProblem& p) {
  const T* sorted = static_cast<const T*>(p.sorted);
  const T* values = static_cast<const T*>(p.values);
#pragma omp parallel for schedule(static) if (p.count > 4096)
  for (std::int64_t i = 0; i < p.count; ++i) {
    const T v = values[i];
    const T* end = sorted + p.sorted_len;
    const T* pos = p.right ? std::upper_bound(sorted, end, v, nan_last_less<T>)
                           : std::lower_bound(sorted, end, v, nan_last_less<T>);
    p.out[i] = pos - sorted;
  }
}

}  // namespace

void sort(const SortProblem& problem, const Stream& /*stream*/) {
  dispatch_sort_key(problem.dtype, "sort", [&](auto tag) { sort_typed<typename decltype(tag)::type>(problem); });
}

void searchsorted(const SearchProblem& problem, const Stream& /*stream*/) {
  dispatch_sort_key(problem.dtype, "sort", [&](auto tag) { search_typed<typename decltype(tag)::type>(problem); });
}

}  // namespace tessel::backend::cpu
