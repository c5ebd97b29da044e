// CPU sort and search. Rows are sorted by Highway's vqsort (hwy/contrib/sort/vqsort.h, Debian's
// libhwy-dev; vectorized quicksort with run-time dispatch to AVX2 / AVX-512 / NEON ...). vqsort is
// not stable and knows nothing of NaN, so it sorts records that carry the order of backend/sort.hpp
// in their bits: the order-preserving unsigned image of each key (sort_keys.hpp: every NaN one
// largest image, -0.0 the image of +0.0) above the key's position in the row. Records are then
// unique, so their unsigned order is the key order with ties in position order: a stable sort, NaN
// last, whatever vqsort's algorithm. Records are 64-bit (32-bit image, 32-bit position) for 32-bit
// keys and 128-bit (hwy::uint128_t) for 64-bit keys or rows of 2^32 keys and more. A sort of 64-bit
// keys that asks for no positions sorts the keys (integers) or their images (floats) alone, and
// copies the input's zeros and NaNs back in input order, which is what a stable sort gives.
//
// Sorted keys are decoded from the images, except zeros and NaNs, which are copied from the input
// at their position (keeping the sign of zero and NaN payloads as the stable sort does).
//
// Threads (tessel's setting, TESSEL_NUM_THREADS): rows run in parallel; one long row is cut into one chunk per thread, each sorted by
// vqsort, then the chunks are merged pairwise (std::merge, each merge split between the threads
// at equal output ranks). A sort of 32-bit keys that asks for no positions sorts the keys or images
// alone, as 64-bit keys do, where vqsort is faster on them than on 64-bit records: that differs by
// CPU, several-fold either way (AVX-512 compress-stores of 32-bit lanes are slow on AMD's Zen 4), so
// it is timed once per process (keys32_alone_faster; TESSEL_CPU_SORT32 chooses instead).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <hwy/contrib/sort/vqsort.h>

#include "backend/sort.hpp"
#include "backend/cpu/sort_keys.hpp"
#include "backend/cpu/threads.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

// A chunk of one row smaller than this is not worth a thread: its sort is well under a
// millisecond, against a few microseconds of fork and join.
constexpr std::size_t kMinRecordsPerThread = std::size_t{1} << 15;

const hwy::Sorter& sorter() {
  thread_local const hwy::Sorter instance;  // holds a small buffer; one per thread
  return instance;
}

template <class Rec>
void vqsort(Rec* data, std::size_t n) {
  if (n > 1) sorter()(data, n, hwy::SortAscending());
}

// The first i in [max(0, k - nb), min(k, na)] such that a[0, i) and b[0, k - i) are the first k
// outputs of std::merge(a, b) (a's elements first among equal ones).
template <class Rec>
std::size_t merge_rank(const Rec* a, std::size_t na, const Rec* b, std::size_t nb, std::size_t k) {
  std::size_t lo = k > nb ? k - nb : 0, hi = std::min(k, na);
  while (lo < hi) {
    const std::size_t i = lo + (hi - lo) / 2, j = k - i;
    if (j > 0 && !(b[j - 1] < a[i])) {
      lo = i + 1;  // a[i] comes before b[j - 1]: more of a
    } else {
      hi = i;
    }
  }
  return lo;
}

// Sorts data[0, n) with up to `threads` threads; `scratch` has room for n records when threads > 1.
// Returns where the sorted records are: data or scratch.
template <class Rec>
Rec* sort_records(Rec* data, Rec* scratch, std::size_t n, int threads) {
  const std::size_t chunks = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)),
                                                   std::max<std::size_t>(n / kMinRecordsPerThread, 1));
  if (chunks <= 1) {
    vqsort(data, n);
    return data;
  }
  std::vector<std::size_t> bounds(chunks + 1);
  for (std::size_t c = 0; c <= chunks; ++c) bounds[c] = n * c / chunks;
#pragma omp parallel for schedule(static, 1) num_threads(static_cast<int>(chunks))
  for (std::size_t c = 0; c < chunks; ++c) vqsort(data + bounds[c], bounds[c + 1] - bounds[c]);

  // Pairwise merge rounds, ping-ponging between data and scratch; each merge of a pair is split
  // into `parts` pieces of equal output length so that every thread has one.
  Rec* src = data;
  Rec* dst = scratch;
  while (bounds.size() > 2) {
    const std::size_t runs = bounds.size() - 1, pairs = runs / 2;
    const std::size_t parts = std::max<std::size_t>(1, static_cast<std::size_t>(threads) / std::max<std::size_t>(pairs, 1));
    const std::int64_t tasks = static_cast<std::int64_t>(pairs * parts + (runs % 2));
#pragma omp parallel for schedule(static, 1) num_threads(threads)
    for (std::int64_t t = 0; t < tasks; ++t) {
      const std::size_t pair = static_cast<std::size_t>(t) / parts, part = static_cast<std::size_t>(t) % parts;
      if (pair == pairs) {  // the odd run out: copied as it is
        std::copy(src + bounds[2 * pair], src + bounds[2 * pair + 1], dst + bounds[2 * pair]);
        continue;
      }
      const std::size_t begin = bounds[2 * pair], mid = bounds[2 * pair + 1], end = bounds[2 * pair + 2];
      const Rec* a = src + begin;
      const Rec* b = src + mid;
      const std::size_t na = mid - begin, nb = end - mid, total = na + nb;
      const std::size_t k0 = total * part / parts, k1 = total * (part + 1) / parts;
      const std::size_t i0 = merge_rank(a, na, b, nb, k0), i1 = merge_rank(a, na, b, nb, k1);
      std::merge(a + i0, a + i1, b + (k0 - i0), b + (k1 - i1), dst + begin + k0);
    }
    std::vector<std::size_t> merged;
    for (std::size_t r = 0; r < runs; r += 2) merged.push_back(bounds[r]);
    merged.push_back(n);
    bounds.swap(merged);
    std::swap(src, dst);
  }
  return src;
}

// Per-thread buffers, reused across rows.
struct Buffers {
  std::vector<std::uint64_t> u64, u64_scratch;
  std::vector<hwy::uint128_t> u128, u128_scratch;
  std::vector<std::int64_t> i64, i64_scratch;
};

template <class V>
V* grow(std::vector<V>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Writes sorted keys and/or positions from records sorted by (image, position).
template <class T, class Rec, class ImageOf, class PositionOf>
void write_rows(const T* row, const Rec* recs, std::size_t n, T* keys_out, std::int64_t* indices_out,
                ImageOf image_of, PositionOf position_of) {
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t i = position_of(recs[k]);
    if (keys_out) {
      const KeyBits<T> image = image_of(recs[k]);
      keys_out[k] = image_is_lossy<T>(image) ? row[i] : key_from_image<T>(image);
    }
    if (indices_out) indices_out[k] = static_cast<std::int64_t>(i);
  }
}

// Whether vqsort sorts 32-bit keys faster than 64-bit (key, position) records on this CPU: both are
// timed on the same pseudo-random keys, best of three rounds, on the first sort that could use it
// (unless TESSEL_CPU_SORT32 chooses).
bool keys32_alone_faster() {
  static const bool faster = [] {
    if (config().cpu_sort32 != Config::Sort32::timed) return config().cpu_sort32 == Config::Sort32::keys;
    constexpr std::size_t n = std::size_t{1} << 15;
    std::vector<std::uint32_t> keys(n), k;
    std::vector<std::uint64_t> recs(n), r;
    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    for (std::size_t i = 0; i < n; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      keys[i] = static_cast<std::uint32_t>(x >> 32);
      recs[i] = (static_cast<std::uint64_t>(keys[i]) << 32) | i;
    }
    auto seconds = [](auto& v) {
      const double t0 = omp_get_wtime();
      vqsort(v.data(), v.size());
      return omp_get_wtime() - t0;
    };
    double best_keys = 1e30, best_records = 1e30;
    for (int round = 0; round < 3; ++round) {
      k = keys;
      best_keys = std::min(best_keys, seconds(k));
      r = recs;
      best_records = std::min(best_records, seconds(r));
    }
    return best_keys < best_records;
  }();
  return faster;
}

// Sorts the keys of one row alone (no positions). Integers: the keys themselves (equal keys are the
// same bits, so stability cannot be seen). Floats: their images, then the zeros and NaNs copied
// back in input order, which is what a stable sort gives.
template <class T>
void sort_keys_alone(const T* row, std::size_t n, T* keys_out, Buffers& buf, bool parallel, int threads) {
  using Key = std::conditional_t<std::is_floating_point_v<T>, KeyBits<T>, T>;
  const std::size_t words = (n * sizeof(Key) + 7) / 8;
  Key* keys = reinterpret_cast<Key*>(grow(buf.i64, words));
  Key* scratch = parallel ? reinterpret_cast<Key*>(grow(buf.i64_scratch, words)) : nullptr;
  const std::int64_t count = static_cast<std::int64_t>(n);
  std::int64_t negatives = 0, zeros = 0, nans = 0;
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel) reduction(+ : negatives, zeros, nans)
  for (std::int64_t i = 0; i < count; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      const T v = row[i];
      keys[i] = key_image(v);
      negatives += v < T(0);
      zeros += v == T(0);
      nans += std::isnan(v);
    } else {
      keys[i] = row[i];
    }
  }
  const Key* sorted = sort_records(keys, scratch, n, parallel ? threads : 1);
  if constexpr (std::is_floating_point_v<T>) {
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel)
    for (std::int64_t k = 0; k < count; ++k) keys_out[k] = key_from_image<T>(sorted[k]);
    if (zeros > 0 || nans > 0) {
      std::size_t z = static_cast<std::size_t>(negatives), q = n - static_cast<std::size_t>(nans);
      for (std::size_t i = 0; i < n; ++i) {
        if (row[i] == T(0)) keys_out[z++] = row[i];
        if (std::isnan(row[i])) keys_out[q++] = row[i];
      }
    }
  } else {
    std::memcpy(keys_out, sorted, n * sizeof(T));
  }
}

// Sorts one row of n keys (n >= 2).
template <class T>
void sort_row(const T* row, std::size_t n, T* keys_out, std::int64_t* indices_out, Buffers& buf, int threads) {
  const bool parallel = threads > 1 && n >= 2 * kMinRecordsPerThread;
  if (!indices_out && (sizeof(T) == 8 || (n >= kMinRecordsPerThread && keys32_alone_faster()))) {
    sort_keys_alone(row, n, keys_out, buf, parallel, threads);
    return;
  }
  if constexpr (sizeof(T) == 4) {
    if (n <= (std::size_t{1} << 32)) {
      std::uint64_t* recs = grow(buf.u64, n);
      std::uint64_t* scratch = parallel ? grow(buf.u64_scratch, n) : nullptr;
      const std::int64_t count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel)
      for (std::int64_t i = 0; i < count; ++i) {
        recs[i] = (static_cast<std::uint64_t>(key_image(row[i])) << 32) | static_cast<std::uint64_t>(i);
      }
      const std::uint64_t* sorted = sort_records(recs, scratch, n, parallel ? threads : 1);
      write_rows(row, sorted, n, keys_out, indices_out,
                 [](std::uint64_t r) { return static_cast<KeyBits<T>>(r >> 32); },
                 [](std::uint64_t r) { return r & 0xFFFFFFFFu; });
      return;
    }
  }
  hwy::uint128_t* recs = grow(buf.u128, n);
  hwy::uint128_t* scratch = parallel ? grow(buf.u128_scratch, n) : nullptr;
  const std::int64_t count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel)
  for (std::int64_t i = 0; i < count; ++i) {
    recs[i].hi = static_cast<std::uint64_t>(key_image(row[i]));
    recs[i].lo = static_cast<std::uint64_t>(i);
  }
  const hwy::uint128_t* sorted = sort_records(recs, scratch, n, parallel ? threads : 1);
  write_rows(row, sorted, n, keys_out, indices_out,
             [](const hwy::uint128_t& r) { return static_cast<KeyBits<T>>(r.hi); },
             [](const hwy::uint128_t& r) { return r.lo; });
}

template <class T>
void sort_typed(const SortProblem& p) {
  if (p.len <= 0 || p.rows <= 0 || (!p.keys_out && !p.indices_out)) return;
  const T* keys = static_cast<const T*>(p.keys_in);
  T* keys_out = static_cast<T*>(p.keys_out);
  const std::size_t len = static_cast<std::size_t>(p.len);
  auto trivial = [&](std::int64_t r) {  // rows of one key
    if (keys_out) keys_out[r] = keys[r];
    if (p.indices_out) p.indices_out[r] = 0;
  };
  // tessel's thread setting (TESSEL_NUM_THREADS), one thread per kMinRecordsPerThread keys at most.
  const int threads = loop_threads(p.rows * p.len, static_cast<std::int64_t>(kMinRecordsPerThread));
  // Many rows: one thread per row. Few long rows: one after the other, each on every thread.
  const bool by_rows = p.rows > 1 && (p.rows >= threads || len < 2 * kMinRecordsPerThread);
  if (by_rows) {
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      Buffers buf;
#pragma omp for schedule(dynamic)
      for (std::int64_t r = 0; r < p.rows; ++r) {
        if (len == 1) {
          trivial(r);
          continue;
        }
        sort_row(keys + r * p.len, len, keys_out ? keys_out + r * p.len : nullptr,
                 p.indices_out ? p.indices_out + r * p.len : nullptr, buf, 1);
      }
    }
    return;
  }
  Buffers buf;
  for (std::int64_t r = 0; r < p.rows; ++r) {
    if (len == 1) {
      trivial(r);
      continue;
    }
    sort_row(keys + r * p.len, len, keys_out ? keys_out + r * p.len : nullptr,
             p.indices_out ? p.indices_out + r * p.len : nullptr, buf, threads);
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
