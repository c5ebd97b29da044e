// getitem / setitem with index arrays and masks, take, take_along_axis, put_along_axis and
// nonzero: one body over backend x dtype against a host reference on fresh random values,
// including strided and reversed inputs, broadcast index arrays, zero-size and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "array/array_testing.hpp"
#include "backend/indexing.hpp"
#include "jit/jit_test_util.hpp"
#include "tessel/jit/compiler.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/ops/backend_entry_points.hpp"
#include "tessel/ops/indexing.hpp"
#include "tessel/pipeline/graph.hpp"
#include "sanitizer.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

class IndexingTest : public BackendDTypeTest {};

Array int64_array(const std::vector<std::int64_t>& v, const Shape& shape, Device device) {
  return from_vector(v, shape, device);
}
Array bool_array(const std::vector<bool>& v, const Shape& shape, Device device) {
  std::vector<unsigned char> bytes(v.begin(), v.end());
  return from_host(bytes.data(), shape, DType::bool_, device);
}

// x (3, 4, 5) of random values, viewed reversed along axis 0 and strided along axis 2.
struct Input {
  Array x;
  std::vector<Value> values;  // C order of x's view
  Value at(std::int64_t i, std::int64_t j, std::int64_t k) const { return values[static_cast<std::size_t>((i * 4 + j) * 5 + k)]; }
};

Input make_input(std::mt19937_64& rng, DType dt, Device device) {
  const Array base = make_array(random_values(rng, dt, 3 * 4 * 10), {3, 4, 10}, dt, device);
  Input in;
  in.x = base.index({Slice(none, none, -1), Slice(), Slice(1, none, 2)});
  in.values = read_values(in.x);
  return in;
}

TEST_P(IndexingTest, IntegerArraysBroadcastAndTranspose) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Input in = make_input(rng, dtype(), device());
  const Array rows = int64_array({0, -1, 2}, {3, 1}, device());
  const Array cols = int64_array({1, -2}, {2}, device());
  // x[rows, cols]: (3, 2, 5).
  Array r = getitem(in.x, {rows, cols});
  ASSERT_EQ(r.shape(), (Shape{3, 2, 5}));
  EXPECT_TRUE(r.is_contiguous());
  const std::vector<Value> got = read_values(r);
  const std::int64_t ri[3] = {0, 2, 2}, ci[2] = {1, 2};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 2; ++b)
      for (int k = 0; k < 5; ++k) EXPECT_TRUE(same_value(got[static_cast<std::size_t>((a * 2 + b) * 5 + k)], in.at(ri[a], ci[b], k)));
  // x[rows, :, cols]: separated by a slice, the index dimensions go first: (3, 2, 4).
  r = getitem(in.x, {rows, Slice(), int64_array({4, 0}, {2}, device())});
  ASSERT_EQ(r.shape(), (Shape{3, 2, 4}));
  const std::vector<Value> sep = read_values(r);
  const std::int64_t ki[2] = {4, 0};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 2; ++b)
      for (int j = 0; j < 4; ++j) EXPECT_TRUE(same_value(sep[static_cast<std::size_t>((a * 2 + b) * 4 + j)], in.at(ri[a], j, ki[b])));
  // An integer next to an index array counts as one: x[1, :, cols] -> (2, 4).
  EXPECT_EQ(getitem(in.x, {1, Slice(), cols}).shape(), (Shape{2, 4}));
  EXPECT_EQ(getitem(in.x, {Slice(), cols, 1}).shape(), (Shape{3, 2}));
}

TEST_P(IndexingTest, MasksSelectAndAssign) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Input in = make_input(rng, dtype(), device());
  std::vector<bool> m(60);
  std::int64_t count = 0;
  for (std::size_t i = 0; i < m.size(); ++i) count += (m[i] = (rng() % 2) == 0);
  const Array mask = bool_array(m, {3, 4, 5}, device());
  const Array selected = getitem(in.x, {mask});
  ASSERT_EQ(selected.shape(), (Shape{count}));
  const std::vector<Value> got = read_values(selected);
  std::size_t n = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i]) {
      EXPECT_TRUE(same_value(got[n++], in.values[i])) << "element " << i;
    }
  }
  // A 2-d mask over the leading axes, then a slice: x[m2, 1:] -> (count2, 4) of the last axis.
  std::vector<bool> m2(12);
  std::int64_t count2 = 0;
  for (std::size_t i = 0; i < m2.size(); ++i) count2 += (m2[i] = (rng() % 3) != 0);
  const Array rows = getitem(in.x, {bool_array(m2, {3, 4}, device()), Slice(1, none)});
  ASSERT_EQ(rows.shape(), (Shape{count2, 4}));
  const std::vector<Value> row_values = read_values(rows);
  n = 0;
  for (std::int64_t i = 0; i < 12; ++i) {
    if (!m2[static_cast<std::size_t>(i)]) continue;
    for (std::int64_t k = 1; k < 5; ++k) EXPECT_TRUE(same_value(row_values[n++], in.at(i / 4, i % 4, k)));
  }
  // x[m] = scalar writes exactly the selected elements.
  Array y = in.x.copy();
  const Value v = random_values(rng, dtype(), 1)[0];
  setitem(y, {mask}, scalar_of(v, dtype()));
  const std::vector<Value> after = read_values(y);
  for (std::size_t i = 0; i < m.size(); ++i) EXPECT_TRUE(same_value(after[i], m[i] ? v : in.values[i])) << i;
  // x[m] = array of the selected count.
  Array z = in.x.copy();
  const std::vector<Value> fresh = random_values(rng, dtype(), count);
  setitem(z, {mask}, make_array(fresh, {count}, dtype(), device()));
  const std::vector<Value> z_values = read_values(z);
  n = 0;
  for (std::size_t i = 0; i < m.size(); ++i) EXPECT_TRUE(same_value(z_values[i], m[i] ? fresh[n++] : in.values[i]));
}

TEST_P(IndexingTest, SetitemWithIntegerArrays) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Input in = make_input(rng, dtype(), device());
  Array y = in.x.copy();
  const std::vector<Value> fresh = random_values(rng, dtype(), 2 * 5);
  // y[[2, -3], 1] = fresh (2, 5)
  setitem(y, {int64_array({2, -3}, {2}, device()), 1}, make_array(fresh, {2, 5}, dtype(), device()));
  const std::vector<Value> after = read_values(y);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 5; ++k) {
        Value want = in.at(i, j, k);
        if (j == 1 && i == 2) want = fresh[static_cast<std::size_t>(k)];
        if (j == 1 && i == 0) want = fresh[static_cast<std::size_t>(5 + k)];
        EXPECT_TRUE(same_value(after[static_cast<std::size_t>((i * 4 + j) * 5 + k)], want));
      }
}

TEST_P(IndexingTest, TakeTakeAlongAxisPutAlongAxis) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Input in = make_input(rng, dtype(), device());
  const Array t = take(in.x, int64_array({4, 0, -1}, {3}, device()), 2);
  ASSERT_EQ(t.shape(), (Shape{3, 4, 3}));
  const std::vector<Value> tv = read_values(t);
  const std::int64_t ks[3] = {4, 0, 4};
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (int c = 0; c < 3; ++c) EXPECT_TRUE(same_value(tv[static_cast<std::size_t>((i * 4 + j) * 3 + c)], in.at(i, j, ks[c])));
  const Array flat = take(in.x, int64_array({59, 7}, {2}, device()));
  const std::vector<Value> fv = read_values(flat);
  EXPECT_TRUE(same_value(fv[0], in.values[59]));
  EXPECT_TRUE(same_value(fv[1], in.values[7]));
  // take_along_axis along axis 1 with indices (3, 2, 1) broadcast over the last axis.
  std::vector<std::int64_t> idx(6);
  for (auto& v : idx) v = static_cast<std::int64_t>(rng() % 4);
  const Array along = take_along_axis(in.x, int64_array(idx, {3, 2, 1}, device()), 1);
  ASSERT_EQ(along.shape(), (Shape{3, 2, 5}));
  const std::vector<Value> av = read_values(along);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j)
      for (std::int64_t k = 0; k < 5; ++k)
        EXPECT_TRUE(same_value(av[static_cast<std::size_t>((i * 2 + j) * 5 + k)], in.at(i, idx[static_cast<std::size_t>(i * 2 + j)], k)));
  // put_along_axis writes one value per (i, k) at row idx[i].
  Array y = in.x.copy();
  const std::vector<Value> fresh = random_values(rng, dtype(), 3 * 5);
  std::vector<std::int64_t> one(3);
  for (auto& v : one) v = static_cast<std::int64_t>(rng() % 4);
  put_along_axis(y, int64_array(one, {3, 1, 1}, device()), make_array(fresh, {3, 1, 5}, dtype(), device()), 1);
  const std::vector<Value> yv = read_values(y);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t k = 0; k < 5; ++k) {
        const Value want = j == one[static_cast<std::size_t>(i)] ? fresh[static_cast<std::size_t>(i * 5 + k)] : in.at(i, j, k);
        EXPECT_TRUE(same_value(yv[static_cast<std::size_t>((i * 4 + j) * 5 + k)], want));
      }
}

TEST_P(IndexingTest, Nonzero) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  std::vector<Value> values = random_values(rng, dtype(), 24);
  for (std::size_t i = 0; i < values.size(); i += 3) values[i] = 0;
  const Array x = make_array(values, {2, 3, 4}, dtype(), device());
  const std::vector<Array> nz = nonzero(x);
  ASSERT_EQ(nz.size(), 3u);
  std::vector<std::vector<std::int64_t>> coords(3);
  for (int d = 0; d < 3; ++d) coords[static_cast<std::size_t>(d)] = nz[static_cast<std::size_t>(d)].to_vector<std::int64_t>();
  std::size_t n = 0;
  for (std::int64_t i = 0; i < 24; ++i) {
    if (values[static_cast<std::size_t>(i)] == Value(0)) continue;
    ASSERT_LT(n, coords[0].size());
    EXPECT_EQ(coords[0][n], i / 12);
    EXPECT_EQ(coords[1][n], (i / 4) % 3);
    EXPECT_EQ(coords[2][n], i % 4);
    ++n;
  }
  EXPECT_EQ(n, coords[0].size());
  EXPECT_EQ(nonzero(zeros({0, 3}, dtype(), device()))[0].shape(), (Shape{0}));
}

TEST_P(IndexingTest, Errors) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Array x = zeros({3, 4}, dtype(), device());
  expect_error<IndexError>([&] { getitem(x, {bool_array({true, false, true, true}, {4}, device())}); },
                           {"boolean index of shape (4,)", "(3,)"});
  expect_error<IndexError>([&] { getitem(x, {zeros({2}, DType::float32, device())}); }, {"integer", "float32"});
  expect_error<IndexError>([&] { getitem(x, {int64_array({0, 3}, {2}, device())}); },
                           {"index 3 is out of bounds for axis 0 with size 3"});
  expect_error<IndexError>([&] { setitem(x, {Slice(), int64_array({-5}, {1}, device())}, Scalar(1)); },
                           {"index -5 is out of bounds for axis 1 with size 4"});
  expect_error<IndexError>([&] { take(x, int64_array({4}, {1}, device()), 1); },
                           {"take", "index 4 is out of bounds for axis 1 with size 4"});
  expect_error<IndexError>([&] { take_along_axis(x, int64_array({3}, {1, 1}, device()), 0); },
                           {"take_along_axis", "out of bounds for axis 0 with size 3"});
  expect_error<IndexError>([&] { getitem(x, {int64_array({0}, {1}, device()), 1, 2}); }, {"too many indices"});
  expect_error<IndexError>([&] { getitem(x, {int64_array({0, 1}, {2}, device()), int64_array({0, 1, 2}, {3}, device())}); },
                           {"could not be broadcast together", "(2,)", "(3,)"});
  expect_error<ValueError>([&] { nonzero(zeros({}, dtype(), device())); }, {"nonzero", "0-d"});
  // Still usable after the failures.
  EXPECT_EQ(getitem(x, {int64_array({2, -1}, {2}, device())}).shape(), (Shape{2, 4}));
}

// x[idx] over 1-d views, the form that reads the source by its address: an index array long
// enough for the vector loop and its tail, negative indices, index views offset by one element
// (not 16-byte aligned: the element loop) and strided (the strided layout), sources strided and
// reversed, and an out-of-range index on either side.
TEST_P(IndexingTest, GatherByAddress) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t m = 3000, size = 1000;  // every source view below has `size` elements
  const std::vector<Value> base_values = random_values(rng, dtype(), m);
  const Array base = make_array(base_values, {m}, dtype(), device());
  const std::int64_t k = 2 * 4096 + 37;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(k + 1));
  std::uniform_int_distribution<std::int64_t> pick(-size, size - 1);
  for (auto& i : idx) i = pick(rng);
  const Array indices = int64_array(idx, {k + 1}, device());
  struct SourceView {
    Array view;
    std::int64_t first, step;  // element j of the view is base[first + j * step]
  };
  const std::vector<SourceView> sources = {{base.index({Slice(0, size)}), 0, 1},
                                           {base.index({Slice(0, none, 3)}), 0, 3},
                                           {base.index({Slice(m - 1, none, -3)}), m - 1, -3}};
  struct IndexView {
    Array view;
    std::int64_t first, step;  // element t of the view is idx[first + t * step]
    std::int64_t count;
  };
  const std::vector<IndexView> index_views = {{indices.index({Slice(0, k)}), 0, 1, k},
                                              {indices.index({Slice(1, none)}), 1, 1, k},
                                              {indices.index({Slice(0, none, 2)}), 0, 2, (k + 2) / 2}};
  {
    for (std::size_t si = 0; si < sources.size(); ++si) {
      const SourceView& src = sources[si];
      ASSERT_EQ(src.view.shape(), (Shape{size}));
      for (std::size_t ii = 0; ii < index_views.size(); ++ii) {
        SCOPED_TRACE("source " + std::to_string(si) + ", index view " + std::to_string(ii));
        const IndexView& iv = index_views[ii];
        const Array r = getitem(src.view, {iv.view});
        ASSERT_EQ(r.shape(), (Shape{iv.count}));
        const std::vector<Value> got = read_values(r);
        std::int64_t wrong = 0;
        for (std::int64_t t = 0; t < iv.count; ++t) {
          std::int64_t j = idx[static_cast<std::size_t>(iv.first + t * iv.step)];
          if (j < 0) j += size;
          const Value& want = base_values[static_cast<std::size_t>(src.first + j * src.step)];
          if (!same_value(got[static_cast<std::size_t>(t)], want) && wrong++ < 3) ADD_FAILURE() << "element " << t;
        }
        EXPECT_EQ(wrong, 0);
      }
      expect_error<IndexError>([&] { getitem(src.view, {int64_array({0, size, 1}, {3}, device())}); },
                               {"index 1000 is out of bounds for axis 0 with size 1000"});
      expect_error<IndexError>([&] { getitem(src.view, {int64_array({-size - 1}, {1}, device())}); },
                               {"index -1001 is out of bounds for axis 0 with size 1000"});
    }
    // Index arrays broadcast over a reversed, strided 3-d view (the source through its strides),
    // and an out-of-range index on the second indexed axis.
    const Input in = make_input(rng, dtype(), device());
    const Array rows = int64_array({0, -1, 2}, {3, 1}, device());
    const Array cols = int64_array({1, -2}, {2}, device());
    const Array r = getitem(in.x, {Slice(), rows, cols});  // (3, 3, 2): x[i, rows[a], cols[b]]
    ASSERT_EQ(r.shape(), (Shape{3, 3, 2}));
    const std::vector<Value> got = read_values(r);
    const std::int64_t ri[3] = {0, 3, 2}, ci[2] = {1, 3};
    for (int i = 0; i < 3; ++i)
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 2; ++b) {
          EXPECT_TRUE(same_value(got[static_cast<std::size_t>((i * 3 + a) * 2 + b)], in.at(i, ri[a], ci[b])));
        }
    expect_error<IndexError>([&] { getitem(in.x, {Slice(), rows, int64_array({0, 5}, {2}, device())}); },
                             {"index 5 is out of bounds for axis 2 with size 5"});
  }
}

// x[m] and nonzero over 1-d arrays of several tiles (16K elements) with a tail, on views offset
// by one element (unaligned for vector loads), and with all-true and all-false masks.
TEST_P(IndexingTest, MaskSelectTilesTailsAndOffsetViews) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::int64_t n = 3 * 16384 + 77;
  const std::vector<Value> values = random_values(rng, dtype(), n + 1);
  const Array base = make_array(values, {n + 1}, dtype(), device());
  for (int pattern = 0; pattern < 3; ++pattern) {
    std::vector<bool> m(static_cast<std::size_t>(n + 1));
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = pattern == 0 ? rng() % 2 == 0 : pattern == 1;
    const Array mask = bool_array(m, {n + 1}, device());
    for (std::int64_t offset : {0, 1}) {
      const Array x = base.index({Slice(offset, offset + n)});
      const Array mx = mask.index({Slice(offset, offset + n)});
      const Array selected = getitem(x, {mx});
      std::vector<std::size_t> want;
      for (std::int64_t i = 0; i < n; ++i) {
        if (m[static_cast<std::size_t>(i + offset)]) want.push_back(static_cast<std::size_t>(i + offset));
      }
      ASSERT_EQ(selected.shape(), (Shape{static_cast<std::int64_t>(want.size())})) << "pattern " << pattern << " offset " << offset;
      const std::vector<Value> got = read_values(selected);
      for (std::size_t k = 0; k < want.size(); ++k) {
        ASSERT_TRUE(same_value(got[k], values[want[k]])) << "pattern " << pattern << " offset " << offset << " item " << k;
      }
      if (dtype() != DType::float32) continue;  // nonzero: one dtype
      const std::vector<std::int64_t> nz = nonzero(mx)[0].to_vector<std::int64_t>();
      ASSERT_EQ(nz.size(), want.size());
      for (std::size_t k = 0; k < want.size(); ++k) ASSERT_EQ(nz[k], static_cast<std::int64_t>(want[k]) - offset) << k;
    }
  }
}

#if defined(TESSEL_HAVE_CUDA)
// The CUDA compaction kernel through the backend call, against a host reference: every item
// width; items at offsets that select each load path (16-byte vectors, one word per item, bytes);
// flags aligned and not; outputs aligned to 16, to the width only, and not at all; sizes around
// the tile (16384) and the vector (16); random, all-true, all-false, sparse, long runs and
// flags stored as nonzero bytes other than 1. nonzero's positions kernel the same way.
TEST(IndexingCuda, CompactionKernelWidthsAlignmentsAndTails) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Device gpu = test_gpu();
  TESSEL_SKIP_UNAVAILABLE(gpu);
  TESSEL_SEEDED_RNG(rng);
  const Stream stream = current_stream(gpu);
  const std::vector<std::int64_t> sizes = {0, 1, 15, 16, 17, 511, 4097, 16383, 16384, 16385, 3 * 16384 + 77, 200003};
  const auto device_bytes = [&](const std::vector<std::uint8_t>& bytes) {
    return from_host(bytes.data(), {static_cast<std::int64_t>(bytes.size())}, DType::uint8, gpu);
  };
  int combination = 0;  // under compute-sanitizer: a rotating sixth of the combinations, sizes to 20000
  for (std::int64_t n : sizes) {
    if (under_sanitizer() && n > 20000) continue;
    for (int pattern = 0; pattern < 6; ++pattern) {
      if (n < 16384 && pattern >= 3) continue;  // the structured patterns need tiles
      // Flags with 32 bytes of slack on both sides, so that offset pointers stay inside.
      std::vector<std::uint8_t> flags(static_cast<std::size_t>(n) + 64, 0);
      std::vector<std::size_t> selected;  // positions, in order
      std::size_t run = 0;
      bool on = false;
      for (std::int64_t i = 0; i < n; ++i) {
        bool f = false;
        switch (pattern) {
          case 0: f = rng() % 2 == 0; break;
          case 1: f = true; break;
          case 2: f = false; break;
          case 3: f = rng() % 97 == 0; break;
          case 4:
            if (run == 0) {
              run = 1 + rng() % 40000;
              on = !on;
            }
            --run;
            f = on;
            break;
          default: f = rng() % 3 == 0; break;
        }
        if (f) selected.push_back(static_cast<std::size_t>(i));
        flags[static_cast<std::size_t>(i) + 32] = f ? (pattern == 5 ? static_cast<std::uint8_t>(1 + rng() % 255) : 1) : 0;
      }
      // Flags start at byte 32 (aligned) or 33 (not aligned).
      const Array flags_dev = device_bytes(flags);
      const Array flags_dev_shifted = device_bytes([&] {
        std::vector<std::uint8_t> f(flags.size(), 0);
        std::copy(flags.begin() + 32, flags.begin() + 32 + n, f.begin() + 33);
        return f;
      }());
      for (int width : {1, 2, 4, 8, 16}) {
        const auto w = static_cast<std::size_t>(width);
        std::vector<std::uint8_t> items(static_cast<std::size_t>(n) * w + 64);
        for (auto& b : items) b = static_cast<std::uint8_t>(rng());
        const Array items_dev = device_bytes(items);
        std::vector<std::size_t> item_offsets = {32, 32 + w};  // vector; word (or vector for 16)
        if (width == 16) item_offsets.push_back(40);           // 8-byte aligned: word
        if (width > 1) item_offsets.push_back(33);             // bytes
        for (std::size_t item_offset : item_offsets) {
          for (int flag_shift : {0, 1}) {
            for (std::size_t out_offset : {std::size_t{32}, 32 + w, std::size_t{33}}) {
              if (out_offset == 33 && width == 1) continue;
              // One combination per size beyond the first few, to bound the run time.
              const bool full = item_offset == 32 && flag_shift == 0 && out_offset == 32;
              if (!full && n > 20000 && pattern != 0) continue;
              if (!sanitizer_sample(combination++, static_cast<int>(n % 6))) continue;
              Array out_dev = zeros({static_cast<std::int64_t>(static_cast<std::size_t>(n) * w + 64)}, DType::uint8, gpu);
              const auto* in = static_cast<const std::uint8_t*>(items_dev.data()) + item_offset;
              const bool* f = reinterpret_cast<const bool*>(
                  static_cast<const std::uint8_t*>((flag_shift ? flags_dev_shifted : flags_dev).data()) + 32 + flag_shift);
              std::int64_t count = -1;
              {
                backend::cuda::StatusLease lease = backend::cuda::lease_status(stream);
                lease.host[0] = -1;
                backend::cuda::select_flagged(in, width, f, n, static_cast<std::uint8_t*>(out_dev.data()) + out_offset,
                                              lease.words, stream);
                backend::cuda::read_status(lease, stream);
                count = lease.host[0];
              }
              const std::string where = "n " + std::to_string(n) + " pattern " + std::to_string(pattern) + " width " +
                                        std::to_string(width) + " items +" + std::to_string(item_offset) + " flags +" +
                                        std::to_string(flag_shift) + " out +" + std::to_string(out_offset);
              ASSERT_EQ(count, static_cast<std::int64_t>(selected.size())) << where;
              const std::vector<std::uint8_t> got = out_dev.to_vector<std::uint8_t>();
              for (std::size_t b = 0; b < out_offset; ++b) ASSERT_EQ(got[b], 0) << where << ": wrote before the output";
              for (std::size_t k = 0; k < selected.size(); ++k) {
                for (std::size_t c = 0; c < w; ++c) {
                  ASSERT_EQ(got[out_offset + k * w + c], items[item_offset + selected[k] * w + c]) << where << " item " << k;
                }
              }
              for (std::size_t b = out_offset + selected.size() * w; b < got.size(); ++b) {
                ASSERT_EQ(got[b], 0) << where << ": wrote past the count";
              }
            }
          }
        }
      }
      // nonzero's positions: flags aligned and not; output aligned to 16 and to 8 only.
      for (int flag_shift : {0, 1}) {
        for (std::int64_t out_offset : {0, 1}) {
          Array out_dev = full({n + 2}, Scalar(-7), DType::int64, gpu);
          const bool* f = reinterpret_cast<const bool*>(
              static_cast<const std::uint8_t*>((flag_shift ? flags_dev_shifted : flags_dev).data()) + 32 + flag_shift);
          std::int64_t count = -1;
          {
            backend::cuda::StatusLease lease = backend::cuda::lease_status(stream);
            lease.host[0] = -1;
            backend::cuda::flat_nonzero(f, n, out_dev.data_as<std::int64_t>() + out_offset, lease.words, stream);
            backend::cuda::read_status(lease, stream);
            count = lease.host[0];
          }
          const std::string where = "nonzero n " + std::to_string(n) + " pattern " + std::to_string(pattern) +
                                    " flags +" + std::to_string(flag_shift) + " out +" + std::to_string(out_offset);
          ASSERT_EQ(count, static_cast<std::int64_t>(selected.size())) << where;
          const std::vector<std::int64_t> got = out_dev.to_vector<std::int64_t>();
          if (out_offset) {
            ASSERT_EQ(got[0], -7) << where;
          }
          for (std::size_t k = 0; k < selected.size(); ++k) {
            ASSERT_EQ(got[static_cast<std::size_t>(out_offset) + k], static_cast<std::int64_t>(selected[k])) << where << " " << k;
          }
          for (std::size_t k = static_cast<std::size_t>(out_offset) + selected.size(); k < got.size(); ++k) {
            ASSERT_EQ(got[k], -7) << where << ": wrote past the count";
          }
        }
      }
    }
  }
}
#endif

#if defined(TESSEL_HAVE_CUDA)
// The compaction keeps its tile counter and look-back states per stream and reuses them without
// zeroing (an epoch per call): many calls back to back on one stream with no host wait between
// them, sizes going up and down (a small call after a large one leaves stale states past its own
// tiles, a large one after a small one reads states a larger earlier call left), the items and
// the positions kernels mixed; then alternating between two streams that run at once, the second
// stream's scratch growing mid-sequence; then across the epoch wrap-around (the host zeroes the
// states again). Counts go to a device array, one slot per call, read once at the end.
TEST(IndexingCuda, CompactionScratchReusedAcrossCallsAndStreams) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Device gpu = test_gpu();
  TESSEL_SKIP_UNAVAILABLE(gpu);
  TESSEL_SEEDED_RNG(rng);
  const Stream s1 = Stream::create(gpu);
  const Stream s2 = Stream::create(gpu);
  // 37 tiles (look-back windows of 32 tiles), 13 tiles, one tile, one element, none, and in between.
  std::vector<std::int64_t> sizes = {600001, 1, 200003, 16385, 0, 3 * 16384 + 77, 16384, 100000};
  if (under_sanitizer()) sizes = {40000, 1, 16385, 0, 33000};
  struct Input {
    std::int64_t n;
    Array items, flags;                  // items[i] == i (int32), so the selection is the positions
    std::vector<std::int64_t> selected;  // positions, in order
  };
  std::vector<Input> inputs;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    Input in;
    in.n = sizes[k];
    std::vector<std::int32_t> items(static_cast<std::size_t>(in.n) + 1);
    std::vector<std::uint8_t> flags(static_cast<std::size_t>(in.n) + 1, 0);
    const unsigned every = k % 3 == 0 ? 2 : k % 3 == 1 ? 1 : 50;  // half, all, sparse
    for (std::int64_t i = 0; i < in.n; ++i) {
      items[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
      if (rng() % every == 0) {
        flags[static_cast<std::size_t>(i)] = 1;
        in.selected.push_back(i);
      }
    }
    in.items = from_vector(items, {in.n + 1}, gpu);
    in.flags = from_host(flags.data(), {in.n + 1}, DType::bool_, gpu);
    inputs.push_back(std::move(in));
  }
  current_stream(gpu).synchronize();

  struct Call {
    std::size_t input;
    bool positions;  // flat_nonzero, else select_flagged of the int32 items
    Array out;
  };
  // Enqueues every call (stream s of call k: streams[k % streams.size()]), then waits and checks.
  const auto run = [&](const std::vector<Stream>& streams, const std::vector<std::size_t>& order, const std::string& what) {
    std::vector<Call> calls;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const Input& in = inputs[order[k]];
      const bool positions = k % 3 == 2;
      calls.push_back({order[k], positions, full({in.n + 1}, Scalar(-7), positions ? DType::int64 : DType::int32, gpu)});
    }
    Array counts = full({static_cast<std::int64_t>(order.size())}, Scalar(-1), DType::int64, gpu);
    current_stream(gpu).synchronize();
    for (std::size_t k = 0; k < calls.size(); ++k) {
      const Stream& stream = streams[k % streams.size()];
      const Input& in = inputs[calls[k].input];
      std::int64_t* count = counts.data_as<std::int64_t>() + k;
      if (calls[k].positions) {
        backend::cuda::flat_nonzero(in.flags.data_as<bool>(), in.n, calls[k].out.data_as<std::int64_t>(), count, stream);
      } else {
        backend::cuda::select_flagged(in.items.data(), 4, in.flags.data_as<bool>(), in.n, calls[k].out.data(), count,
                                      stream);
      }
    }
    for (const Stream& stream : streams) stream.synchronize();
    const std::vector<std::int64_t> got_counts = counts.to_vector<std::int64_t>();
    for (std::size_t k = 0; k < calls.size(); ++k) {
      const Input& in = inputs[calls[k].input];
      const std::string where = what + " call " + std::to_string(k) + " n " + std::to_string(in.n) +
                                (calls[k].positions ? " positions" : " items");
      ASSERT_EQ(got_counts[k], static_cast<std::int64_t>(in.selected.size())) << where;
      std::vector<std::int64_t> got;
      if (calls[k].positions) {
        got = calls[k].out.to_vector<std::int64_t>();
      } else {
        for (std::int32_t v : calls[k].out.to_vector<std::int32_t>()) got.push_back(v);
      }
      for (std::size_t i = 0; i < in.selected.size(); ++i) ASSERT_EQ(got[i], in.selected[i]) << where << " item " << i;
      for (std::size_t i = in.selected.size(); i < got.size(); ++i) ASSERT_EQ(got[i], -7) << where << ": past the count";
    }
  };
  // Sizes up and down: every input after every other, several times (shuffled).
  const int rounds = under_sanitizer() ? 2 : 6;
  std::vector<std::size_t> order;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::size_t> round(inputs.size());
    for (std::size_t k = 0; k < round.size(); ++k) round[k] = k;
    std::shuffle(round.begin(), round.end(), rng);
    order.insert(order.end(), round.begin(), round.end());
  }
  run({s1}, order, "one stream");
  // Two streams at once; s2 starts on the one-element input, so its scratch grows later.
  std::vector<std::size_t> alternating = {1, 1};
  alternating.insert(alternating.end(), order.begin(), order.end());
  run({s1, s2}, alternating, "two streams");
  run({s2, s1}, order, "two streams, swapped");
  // The epoch wrap-around on s1 (its scratch already holds the largest input): 5 calls take the
  // last epochs, then the states are zeroed again and 7 calls take epochs 1 to 7.
  const unsigned last_epoch = (1u << 22) - 1;
  backend::cuda::compaction_epoch_for_testing(s1, last_epoch - 5);
  std::vector<std::size_t> wrap;
  for (std::size_t k = 0; k < 12; ++k) wrap.push_back(order[k % order.size()]);
  run({s1}, wrap, "epoch wrap-around");
  EXPECT_EQ(backend::cuda::compaction_epoch_for_testing(s1), 7u);
}
#endif

#if defined(TESSEL_HAVE_CUDA)
// A compaction captured in a CUDA graph takes scratch of its own (zeroed in the graph): every
// replay is right, with uncaptured compactions of other sizes on the same stream in between
// (they use the stream's reused scratch and epochs).
TEST(IndexingCuda, CompactionCapturedInAGraphReplays) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const Device gpu = test_gpu();
  TESSEL_SKIP_UNAVAILABLE(gpu);
  if (!device_allocator(gpu.index).options().caching) {
    GTEST_SKIP() << "TESSEL_ALLOCATOR=direct: graph capture needs the caching allocator's reservation";
  }
  TESSEL_SEEDED_RNG(rng);
  const Stream s = Stream::create(gpu);
  const auto make = [&](std::int64_t n, std::vector<std::int64_t>& selected) {
    std::vector<std::int32_t> items(static_cast<std::size_t>(n) + 1);
    std::vector<std::uint8_t> flags(static_cast<std::size_t>(n) + 1, 0);
    for (std::int64_t i = 0; i < n; ++i) {
      items[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
      if (rng() % 2 == 0) {
        flags[static_cast<std::size_t>(i)] = 1;
        selected.push_back(i);
      }
    }
    return std::make_pair(from_vector(items, {n + 1}, gpu), from_host(flags.data(), {n + 1}, DType::bool_, gpu));
  };
  const std::int64_t n = under_sanitizer() ? 40000 : 300001, m = under_sanitizer() ? 20000 : 700001;
  std::vector<std::int64_t> selected, other_selected;
  // (Pairs, not structured bindings: C++17 lambdas cannot capture those.)
  const std::pair<Array, Array> input = make(n, selected), other = make(m, other_selected);
  const Array &items = input.first, &flags = input.second;
  const Array &other_items = other.first, &other_flags = other.second;
  Array out = full({n + 1}, Scalar(-7), DType::int32, gpu);
  Array other_out = full({m + 1}, Scalar(-7), DType::int32, gpu);
  Array counts = full({2}, Scalar(-1), DType::int64, gpu);
  current_stream(gpu).synchronize();
  const auto select = [&](const Array& in, const Array& f, std::int64_t size, const Array& o, std::int64_t slot) {
    backend::cuda::select_flagged(in.data(), 4, f.data_as<bool>(), size, o.data(), counts.data_as<std::int64_t>() + slot, s);
  };
  const auto check = [&](const Array& o, std::int64_t slot, const std::vector<std::int64_t>& want, const std::string& where) {
    ASSERT_EQ(counts.to_vector<std::int64_t>()[static_cast<std::size_t>(slot)], static_cast<std::int64_t>(want.size())) << where;
    const std::vector<std::int32_t> got = o.to_vector<std::int32_t>();
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << where << " item " << i;
    for (std::size_t i = want.size(); i < got.size(); ++i) ASSERT_EQ(got[i], -7) << where << ": past the count";
  };
  select(other_items, other_flags, m, other_out, 1);  // the stream's scratch exists before the capture
  Graph g = Graph::capture(s, [&] { select(items, flags, n, out, 0); });
  s.synchronize();
  for (int r = 0; r < 4; ++r) {
    fill(out, Scalar(-7), s);
    fill(other_out, Scalar(-7), s);
    fill(counts, Scalar(-1), s);
    if (r % 2 == 1) select(other_items, other_flags, m, other_out, 1);
    g.replay(s);
    if (r % 2 == 0) select(other_items, other_flags, m, other_out, 1);
    s.synchronize();
    const std::string where = "replay " + std::to_string(r);
    check(out, 0, selected, where);
    check(other_out, 1, other_selected, where + ", uncaptured");
  }
}
#endif

#if defined(TESSEL_HAVE_CUDA)
// A generated kernel's spec compiles for the test architecture; a failure shows the source.
void expect_compiles(const jit::ElementwiseSpec& spec, const std::string& context) {
  jit::CompileRequest r;
  r.source = jit::generate_elementwise_source(spec);
  r.name = jit::elementwise_kernel_name(spec);
  r.arch = jit::test::kTestArch;
  try {
    EXPECT_FALSE(jit::compile_to_cubin(r).cubin.empty());
  } catch (const CompileError& e) {
    ADD_FAILURE() << context << e.what() << "\n----\n" << r.source;
  }
}

// Every kind of generated gather / scatter / check kernel compiles under NVRTC (no GPU needed),
// for every dtype, in both layouts (and index widths for float32), with plain and mask index operands.
TEST(IndexingKernels, GeneratedSourcesCompile) {
  TESSEL_REQUIRE_NVRTC();
  for (DType dt : all_dtypes()) {
    for (DType index_dtype : {DType::int64, DType::uint8, DType::int32}) {
      if (index_dtype != DType::int64 && dt != DType::float32) continue;  // index dtypes: one element dtype
      backend::GatherProblem p;
      p.dtype = dt;
      backend::IndexOperand plain;
      plain.dtype = index_dtype;
      plain.axes = {{5, 3}};
      backend::IndexOperand mask;
      mask.dtype = DType::int64;
      mask.from_mask = true;
      mask.axes = {{2, 7}, {3, 1}};
      p.indices = {plain, mask};
      for (backend::cuda::IndexKernel kind :
           {backend::cuda::IndexKernel::gather, backend::cuda::IndexKernel::scatter, backend::cuda::IndexKernel::check}) {
        for (bool scalar : {false, true}) {
          if (scalar && kind == backend::cuda::IndexKernel::check) continue;
          p.value_is_scalar = scalar;
          // Gathers read the source through a strided pointer operand, or by address when every
          // result axis comes from the indices.
          p.base_strides = {0, scalar ? 0 : 4, 0};
          std::vector<jit::ElementwiseSpec> specs = {backend::cuda::index_kernel_spec(kind, p)};
          if (kind == backend::cuda::IndexKernel::scatter && index_dtype == DType::int64) {
            specs.push_back(backend::cuda::masked_assign_spec(dt, scalar));
          }
          for (jit::ElementwiseSpec& spec : specs)
          for (int layout = 0; layout < 3; ++layout) {
            if (layout == 1 && dt != DType::float32) continue;  // 32-bit index math: one element dtype
            spec.layout = layout == 0 ? jit::ElementwiseLayout::contiguous : jit::ElementwiseLayout::strided;
            spec.rank = layout == 2 ? 3 : 1;
            spec.index32 = layout == 1;
            expect_compiles(spec, "");
          }
        }
      }
    }
  }
}

// The gather's kernels compile under NVRTC for every element size (1 to 16 bytes, so every vector
// and word width of the loads), reading the source by address and through a strided operand,
// checked and not; and the kernels of one (kind, dtype, operands) are one launcher's.
TEST(IndexingKernels, GatherKernelsCompile) {
  TESSEL_REQUIRE_NVRTC();
  using backend::cuda::IndexKernel;
  for (DType dt : {DType::bool_, DType::float16, DType::float32, DType::float64, DType::complex128}) {
    backend::GatherProblem p;
    p.dtype = dt;
    backend::IndexOperand plain;
    plain.dtype = DType::int64;
    plain.axes = {{5, -3}};
    p.indices = {plain};
    for (bool checked : {false, true}) {
      p.check_bounds = checked;
      for (bool by_address : {true, false}) {
        p.shape = by_address ? std::vector<std::int64_t>{7} : std::vector<std::int64_t>{7, 2};
        p.base_strides = by_address ? std::vector<std::int64_t>{0} : std::vector<std::int64_t>{0, 4};
        p.indices[0].strides = by_address ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{1, 0};
        jit::ElementwiseSpec spec = backend::cuda::index_kernel_spec(IndexKernel::gather, p);
        EXPECT_TRUE(spec.streaming);
        EXPECT_EQ(spec.body.find("tessel_index_fail") != std::string::npos, checked);
        for (int layout = 0; layout < 2; ++layout) {
          if (layout == 1 && dt != DType::float32) continue;  // the strided layout: one element dtype
          spec.layout = layout == 0 ? jit::ElementwiseLayout::contiguous : jit::ElementwiseLayout::strided;
          spec.rank = layout == 0 ? 1 : 2;
          spec.unroll = std::max(1, spec.own_tuning.unroll);
          expect_compiles(spec, std::string(dtype_name(dt)) + (checked ? " checked: " : ": "));
        }
      }
    }
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(All, IndexingTest, ::testing::ValuesIn(backend_dtype_cases(all_dtypes())), case_name);

}  // namespace
}  // namespace tessel::testing
