// Ops over more than 2^31 elements (GPU only): the 64-bit index paths of the generated
// elementwise kernels (contiguous and strided) and of the reductions. Needs ~24 GB of free device
// memory and skips otherwise. Named *Huge* so that scripts/gpu-check.sh leaves it out of the
// sanitizer runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "testing.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/ops/backend_entry_points.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/indexing.hpp"
#include "tessel/ops/reduce.hpp"
#include "tessel/tessel.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace tessel {
namespace {

constexpr std::int64_t kHugeN = (std::int64_t{1} << 31) + 7;

// Skips unless `bytes` (plus 1 GiB of headroom) are free on the test GPU.
#define TESSEL_SKIP_UNLESS_FREE(bytes)                                                                  \
  do {                                                                                                  \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();             \
    TESSEL_SKIP_UNAVAILABLE(testing::test_gpu());                                                       \
    device_allocator(testing::test_gpu().index).empty_cache();                                          \
    std::size_t free_bytes = 0, total_bytes = 0;                                                        \
    DeviceGuard guard(testing::test_gpu());                                                             \
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) GTEST_SKIP() << "cudaMemGetInfo failed"; \
    const double need = static_cast<double>(bytes) + (1u << 30);                                        \
    if (static_cast<double>(free_bytes) < need) {                                                       \
      GTEST_SKIP() << "needs " << need / 1e9 << " GB free on " << testing::test_gpu().str() << ", has " << free_bytes / 1e9;         \
    }                                                                                                   \
  } while (0)

[[maybe_unused]] double at(const Array& a, std::int64_t i) { return a.slice(0, Slice(i, i + 1)).item<double>(); }

#if defined(TESSEL_HAVE_CUDA)
TEST(OpsHuge, Int8ElementwiseAndSumPast2To31) {
  // x (int8, 2.1 GB), y = x + 3, z = 2 * reversed x (strided, negative stride), and sum(x)
  // widened to int64 (17.2 GB): about 24 GB at the peak.
  TESSEL_SKIP_UNLESS_FREE(kHugeN * (1 + 1 + 1 + 8));
  const Device gpu = testing::test_gpu();
  const std::int64_t n = kHugeN;
  const std::int64_t two31 = std::int64_t{1} << 31;
  Array x = full({n}, 1, DType::int8, gpu);
  // A few marked positions on both sides of 2^31; everything else is 1.
  const std::vector<std::pair<std::int64_t, int>> marks = {{0, 5}, {two31 - 1, -7}, {two31, 9}, {two31 + 3, -3}, {n - 1, 11}};
  std::int64_t marked_sum = 0;
  for (const auto& [pos, value] : marks) {
    fill(x.slice(0, Slice(pos, pos + 1)), value);
    marked_sum += value;
  }
  {
    const Array y = add(x, Scalar(3));  // contiguous layout, 64-bit index
    ASSERT_EQ(y.dtype(), DType::int8);
    for (const auto& [pos, value] : marks) EXPECT_EQ(at(y, pos), value + 3) << "y[" << pos << "]";
    for (std::int64_t pos : {std::int64_t{1}, two31 - 2, two31 + 1, n - 2}) EXPECT_EQ(at(y, pos), 4) << "y[" << pos << "]";
  }
  {
    const Array z = multiply(x.slice(0, Slice(std::nullopt, std::nullopt, -1)), Scalar(2));  // strided, 64-bit
    for (const auto& [pos, value] : marks) EXPECT_EQ(at(z, n - 1 - pos), 2 * value) << "z[" << n - 1 - pos << "]";
    EXPECT_EQ(at(z, n / 2), 2);
  }
  // Exactly summable: n - marks + the marked values.
  const Array s = sum(x);
  ASSERT_EQ(s.dtype(), DType::int64);
  EXPECT_EQ(s.item<std::int64_t>(), n - static_cast<std::int64_t>(marks.size()) + marked_sum);
  EXPECT_EQ(max(x).item<double>(), 11);
  EXPECT_EQ(argmin(x).item<std::int64_t>(), two31 - 1);
}

TEST(OpsHuge, Float16AddPast2To31) {
  // Three float16 arrays of 4.3 GB each; the contiguous vector path with the scalar tail.
  TESSEL_SKIP_UNLESS_FREE(kHugeN * 2 * 3);
  const Device gpu = testing::test_gpu();
  const std::int64_t n = kHugeN;
  Array a = full({n}, 0.5, DType::float16, gpu);
  Array b = full({n}, 0.25, DType::float16, gpu);
  fill(a.slice(0, Slice(n - 1, n)), 8.0);
  fill(b.slice(0, Slice(std::int64_t{1} << 31, (std::int64_t{1} << 31) + 1)), -4.0);
  const Array c = add(a, b);
  ASSERT_EQ(c.dtype(), DType::float16);
  EXPECT_EQ(at(c, 0), 0.75);
  EXPECT_EQ(at(c, (std::int64_t{1} << 31) - 1), 0.75);
  EXPECT_EQ(at(c, std::int64_t{1} << 31), -3.5);
  EXPECT_EQ(at(c, n - 2), 0.75);
  EXPECT_EQ(at(c, n - 1), 8.25);
}

TEST(OpsHuge, GatherPast2To31) {
  // x[idx] from a uint8 source past 2^31 elements (2.1 GB), and from its every-other-element view
  // (2^30 + 32 elements whose stride reaches past 2^31): the 64-bit offsets.
  const std::int64_t two31 = std::int64_t{1} << 31;
  const std::int64_t n = two31 + 64;
  TESSEL_SKIP_UNLESS_FREE(n);
  const Device gpu = testing::test_gpu();
  Array x = full({n}, 1, DType::uint8, gpu);
  const std::vector<std::pair<std::int64_t, int>> marks = {{3, 5}, {two31 - 1, 7}, {two31, 9}, {n - 1, 11}};
  for (const auto& [pos, value] : marks) fill(x.slice(0, Slice(pos, pos + 1)), value);
  const Array idx = from_vector(std::vector<std::int64_t>{two31, -1, two31 - 1, 3, -n, two31 + 1}, {6}, gpu);
  const Array odd = x.index({Slice(1, none, 2)});  // element j is x[1 + 2j]
  ASSERT_EQ(odd.shape(), (Shape{n / 2}));
  const Array odd_idx = from_vector(std::vector<std::int64_t>{n / 2 - 1, two31 / 2 - 1, 1, -1, 0}, {5}, gpu);
  EXPECT_EQ(getitem(x, {idx}).to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{9, 11, 7, 5, 1, 1}));
  EXPECT_EQ(getitem(odd, {odd_idx}).to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{11, 7, 5, 11, 1}));
  try {
    getitem(x, {from_vector(std::vector<std::int64_t>{0, n}, {2}, gpu)});
    ADD_FAILURE() << "no IndexError for index n";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("index 2147483712 is out of bounds for axis 0 with size 2147483712"),
              std::string::npos)
        << e.what();
  }
}

TEST(OpsHuge, Uint8MaskSelectAndNonzeroPast2To31) {
  // x[m] over uint8 x and a mostly-true m (2.1 GB each, and 2.1 GB of result): 64-bit tile
  // offsets and count. Then nonzero of a sparse mask (2.1 GB of flags, 17.2 GB of int64
  // positions, as nonzero sizes them before it knows the count): about 24 GB at the peak.
  // n reaches past the whole tile that follows the one starting at 2^31 (tiles of 16384
  // elements), with a tail tile of 7: the positions below sit on both sides of 2^31 and of that
  // tile boundary. (With n = 2^31 + 7 the positions past n were silently not set: a slice past
  // the end is empty, as in Python.)
  constexpr std::int64_t tile = 16384;  // compact::kTileElems
  const std::int64_t two31 = std::int64_t{1} << 31;
  const std::int64_t n = two31 + 2 * tile + 7;
  TESSEL_SKIP_UNLESS_FREE(n * (1 + 1 + 1 + 8));
  const Device gpu = testing::test_gpu();
  Array x = full({n}, 1, DType::uint8, gpu);
  const std::vector<std::pair<std::int64_t, int>> marks = {
      {0, 5}, {tile - 1, 6}, {two31 - 1, 7}, {two31, 9}, {two31 + 3, 3}, {two31 + tile, 4}, {n - 1, 11}};
  // Unselected: on both sides of 2^31 and of a tile boundary there.
  const std::vector<std::int64_t> dropped = {1, two31 - 2, two31 + 1, two31 + tile - 1, n - 2};
  for (const auto& [pos, value] : marks) ASSERT_LT(pos, n) << "mark past the end";
  for (std::int64_t pos : dropped) ASSERT_LT(pos, n) << "dropped position past the end";
  for (const auto& [pos, value] : marks) fill(x.slice(0, Slice(pos, pos + 1)), value);
  const auto out_index = [&](std::int64_t pos) {
    std::int64_t before = 0;
    for (std::int64_t d : dropped) before += d < pos;
    return pos - before;
  };
  const std::int64_t expected_count = n - static_cast<std::int64_t>(dropped.size());
  std::int64_t count = 0;
  {
    Array m = full({n}, 1, DType::bool_, gpu);
    for (std::int64_t pos : dropped) fill(m.slice(0, Slice(pos, pos + 1)), 0);
    const Array r = getitem(x, {m});
    // On a wrong count, what went wrong where (evaluated only then; small reads and windows):
    // per dropped position, its flag, the flags set in a window of a tile on each side, and what
    // x[m] of that window alone selects; per mark, where its value landed in r relative to where
    // it belongs (a change of that shift between two marks brackets the wrong tile).
    const auto diagnose = [&]() {
      std::ostringstream os;
      os << "\nx[m] selected " << r.shape()[0] << ", expected " << expected_count << " (" << r.shape()[0] - expected_count
         << " more)";
      for (std::int64_t d : dropped) {
        if (d >= n) {
          os << "\n  dropped " << d << ": past the end (n = " << n << "), so never unset";
          continue;
        }
        const std::int64_t lo = std::max<std::int64_t>(0, d - tile), hi = std::min(n, d + tile + 1);
        std::int64_t expect = hi - lo;
        for (std::int64_t e : dropped) expect -= (e >= lo && e < hi) ? 1 : 0;
        const Array mw = m.slice(0, Slice(lo, hi));
        os << "\n  dropped " << d << " (tile " << d / tile << ", offset " << d % tile << "): m[d] = " << at(m, d)
           << "; window [" << lo << ", " << hi << "): " << sum(mw).item<std::int64_t>() << " flags set, x[m] of the window alone selects "
           << getitem(x.slice(0, Slice(lo, hi)), {mw}).shape()[0] << ", expected " << expect;
      }
      for (const auto& [pos, value] : marks) {
        const std::int64_t want = out_index(pos);
        const std::int64_t lo = std::max<std::int64_t>(0, want - 4), hi = std::min(r.shape()[0], want + 5);
        os << "\n  mark x[" << pos << "] = " << value << " (tile " << pos / tile << "): ";
        if (pos >= n) {
          os << "past the end (n = " << n << "), so never set";
          continue;
        }
        if (lo >= hi) {
          os << "r ends before " << want;
          continue;
        }
        const std::vector<std::uint8_t> got = r.slice(0, Slice(lo, hi)).to_vector<std::uint8_t>();
        std::string found;
        for (std::size_t k = 0; k < got.size(); ++k) {
          if (got[k] == value) found += " " + std::to_string(lo + static_cast<std::int64_t>(k) - want);
        }
        os << "in r at offset" << (found.empty() ? " (not within 4)" : found) << " from " << want;
      }
      return os.str();
    };
    ASSERT_EQ(r.shape(), (Shape{expected_count})) << diagnose();
    for (const auto& [pos, value] : marks) EXPECT_EQ(at(r, out_index(pos)), value) << "x[" << pos << "]";
    for (std::int64_t pos : {std::int64_t{2}, two31 - 3, two31 + 2, two31 + tile + 1, n - 3}) {
      EXPECT_EQ(at(r, out_index(pos)), 1) << "x[" << pos << "]";
    }
    count = r.shape()[0];
  }
  EXPECT_EQ(count, expected_count);
  {
    const Array sparse = not_equal(x, Scalar(1));
    const std::vector<Array> nz = nonzero(sparse);
    ASSERT_EQ(nz.size(), 1u);
    const std::vector<std::int64_t> got = nz[0].to_vector<std::int64_t>();
    ASSERT_EQ(got.size(), marks.size());
    for (std::size_t k = 0; k < marks.size(); ++k) EXPECT_EQ(got[k], marks[k].first) << k;
  }
}
#endif

}  // namespace
}  // namespace tessel
