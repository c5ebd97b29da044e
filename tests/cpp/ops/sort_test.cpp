// sort, argsort, searchsorted and unique: one body over backend x dtype against std::stable_sort
// of the same elements (NaN last), on fresh random inputs with many ties, strided views.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "array/array_testing.hpp"
#include "tessel/ops/sort.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

std::vector<double> reals(const Array& a) {
  std::vector<double> out;
  for (const Value& v : read_values(a)) out.push_back(v.real());
  return out;
}

bool nan_last_less(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Stable argsort of each row of a (rows, len) C-ordered buffer.
std::vector<std::int64_t> ref_argsort(const std::vector<double>& v, std::int64_t rows, std::int64_t len) {
  std::vector<std::int64_t> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(len));
    std::iota(idx.begin(), idx.end(), std::int64_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t i, std::int64_t j) {
      return nan_last_less(v[static_cast<std::size_t>(r * len + i)], v[static_cast<std::size_t>(r * len + j)]);
    });
    out.insert(out.end(), idx.begin(), idx.end());
  }
  return out;
}

class SortTest : public BackendDTypeTest {};

TEST_P(SortTest, SortAndArgsortLastAxis) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType dt = dtype();
  if (is_complex(dt)) {
    const Array a = zeros({3}, dt, device());
    expect_error<DTypeError>([&] { sort(a); }, {"sort", dtype_name(dt)});
    expect_error<DTypeError>([&] { argsort(a); }, {"argsort", dtype_name(dt)});
    expect_error<DTypeError>([&] { unique(a); }, {"unique", dtype_name(dt)});
    return;
  }
  for (const Shape& shape : {Shape{0}, Shape{1}, Shape{17}, Shape{3, 0}, Shape{4, 33}, Shape{2, 3, 5}, Shape{3, 2500}}) {
    for (int view = 0; view < 2; ++view) {
      Array a = make_array(random_values(rng, dt, numel(shape)), shape, dt, device());
      if (view == 1) a = a.slice(static_cast<std::int64_t>(shape.size()) - 1, Slice(none, none, -1));
      std::vector<double> values = reals(a);
      if (is_floating(dt) && !values.empty()) {
        // Put NaNs in: rebuild from values with every 7th element NaN.
        std::vector<Value> with_nan;
        for (std::size_t i = 0; i < values.size(); ++i) with_nan.push_back(i % 7 == 3 ? std::nan("") : values[i]);
        a = make_array(with_nan, shape, dt, device());
        values = reals(a);
      }
      SCOPED_TRACE("shape " + shape_str(shape) + " view " + std::to_string(view));
      const std::int64_t len = shape.back();
      const std::int64_t rows = len == 0 ? 0 : numel(shape) / len;
      const std::vector<std::int64_t> expected = ref_argsort(values, rows, len);
      Array idx = argsort(a);
      EXPECT_EQ(idx.dtype(), DType::int64);
      EXPECT_EQ(idx.shape(), shape);
      EXPECT_EQ(idx.to_vector<std::int64_t>(), expected) << "argsort must be stable";
      Array sorted = sort(a);
      EXPECT_EQ(sorted.dtype(), dt);
      EXPECT_EQ(sorted.shape(), shape);
      const std::vector<double> got = reals(sorted);
      for (std::size_t i = 0; i < got.size(); ++i) {
        const std::size_t row = i / static_cast<std::size_t>(len);
        const double want = values[row * static_cast<std::size_t>(len) + static_cast<std::size_t>(expected[i])];
        EXPECT_TRUE(same(got[i], want)) << i << ": " << got[i] << " vs " << want;
      }
    }
  }
}

TEST_P(SortTest, OtherAxesAndZeroD) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType dt = dtype();
  if (is_complex(dt)) return;
  const Array a = make_array(random_values(rng, dt, 24), {2, 3, 4}, dt, device());
  for (std::int64_t axis : {0, 1, -3}) {
    // Reference: argsort of the axis moved last, then moved back.
    const std::int64_t ax = axis < 0 ? axis + 3 : axis;
    std::vector<std::int64_t> order;
    for (std::int64_t i = 0; i < 3; ++i) {
      if (i != ax) order.push_back(i);
    }
    order.push_back(ax);
    const Array moved = a.permute(order);
    const std::vector<std::int64_t> ref = ref_argsort(reals(moved), 24 / a.dim(ax), a.dim(ax));
    const Array ref_array = from_vector(ref, moved.shape(), Device::cpu());
    std::vector<std::int64_t> inverse(3);
    for (std::int64_t i = 0; i < 3; ++i) inverse[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = i;
    EXPECT_EQ(argsort(a, axis).to_vector<std::int64_t>(), ref_array.permute(inverse).contiguous().to_vector<std::int64_t>())
        << "axis " << axis;
  }
  const Array zero_d = make_array({Value(5)}, {}, dt, device());
  EXPECT_EQ(sort(zero_d).shape(), Shape{});
  EXPECT_EQ(argsort(zero_d).to_vector<std::int64_t>(), std::vector<std::int64_t>{0});
  expect_error<IndexError>([&] { sort(a, 3); }, {"sort", "axis 3"});
  expect_error<IndexError>([&] { argsort(a, -4); }, {"argsort", "axis -4"});
}

TEST_P(SortTest, SignedZerosTieStably) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const DType dt = dtype();
  if (!is_floating(dt)) return;
  const Array a = make_array({Value(0.0), Value(-0.0), Value(-1), Value(0.0), Value(-0.0), Value(std::nan(""))}, {6}, dt,
                             device());
  EXPECT_EQ(argsort(a).to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 0, 1, 3, 4, 5}));
}

TEST_P(SortTest, SearchsortedAndUnique) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType dt = dtype();
  if (is_complex(dt)) return;
  std::vector<Value> raw = random_values(rng, dt, 200);
  if (is_floating(dt)) raw[5] = raw[77] = std::nan("");
  const Array a = make_array(raw, {200}, dt, device());
  const Array sorted = sort(a);
  const std::vector<double> s = reals(sorted);
  const std::vector<Value> probe_values = random_values(rng, dt, 50);
  const Array probes = make_array(probe_values, {5, 10}, dt, device());
  const std::vector<double> p = reals(probes);
  for (bool right : {false, true}) {
    const Array pos = searchsorted(sorted, probes, right);
    EXPECT_EQ(pos.shape(), (Shape{5, 10}));
    std::vector<std::int64_t> expected;
    for (double v : p) {
      const auto it = right ? std::upper_bound(s.begin(), s.end(), v, nan_last_less)
                            : std::lower_bound(s.begin(), s.end(), v, nan_last_less);
      expected.push_back(it - s.begin());
    }
    EXPECT_EQ(pos.to_vector<std::int64_t>(), expected) << (right ? "right" : "left");
  }
  const UniqueResult u = unique(a.reshape({10, 20}), true);
  std::vector<double> want_values;
  std::vector<std::int64_t> want_counts;
  for (double v : s) {
    if (!want_values.empty() && same(want_values.back(), v)) {
      ++want_counts.back();
    } else {
      want_values.push_back(v);
      want_counts.push_back(1);
    }
  }
  const std::vector<double> got = reals(u.values);
  ASSERT_EQ(got.size(), want_values.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same(got[i], want_values[i])) << i;
  EXPECT_EQ(u.values.dtype(), dt);
  EXPECT_EQ(u.counts.to_vector<std::int64_t>(), want_counts);
  EXPECT_FALSE(unique(a).counts.defined());
  EXPECT_EQ(unique(zeros({0}, dt, device())).values.size(), 0);
  expect_error<ValueError>([&] { searchsorted(zeros({2, 2}, dt, device()), probes); }, {"searchsorted", "1-D", "(2, 2)"});
  if (device().is_cuda()) {
    expect_error<DeviceError>([&] { searchsorted(sorted, probes.to(Device::cpu())); }, {"searchsorted", "cpu"});
  }
}

// Rows long enough for the CPU sort's threads (one row is cut into chunks that are sorted apart and
// merged) and many rows of one thread each, with many ties, infinities, both zeros and NaNs: argsort
// is the stable argsort and sort its gather, for every dtype (float16/bfloat16 and the narrow
// integers are widened for the sort and cast back).
TEST_P(SortTest, LargeRowsMatchTheStableReference) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType dt = dtype();
  if (is_complex(dt)) return;
  for (const Shape& shape : {Shape{200003}, Shape{2, 70001}, Shape{300, 700}}) {
    SCOPED_TRACE("shape " + shape_str(shape));
    std::vector<Value> raw = random_values(rng, dt, numel(shape));
    if (is_floating(dt)) {
      std::uniform_int_distribution<int> pick(0, 15);
      const double inf = std::numeric_limits<double>::infinity();
      for (Value& v : raw) {
        switch (pick(rng)) {
          case 0: v = std::nan(""); break;
          case 1: v = -std::nan(""); break;
          case 2: v = 0.0; break;
          case 3: v = -0.0; break;
          case 4: v = inf; break;
          case 5: v = -inf; break;
          default: break;
        }
      }
    }
    const Array a = make_array(raw, shape, dt, device());
    const std::vector<double> values = reals(a);
    const std::int64_t len = shape.back(), rows = numel(shape) / len;
    const std::vector<std::int64_t> expected = ref_argsort(values, rows, len);
    EXPECT_EQ(argsort(a).to_vector<std::int64_t>(), expected) << "argsort must be stable";
    const std::vector<double> got = reals(sort(a));
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const std::size_t row = i / static_cast<std::size_t>(len);
      const double want = values[row * static_cast<std::size_t>(len) + static_cast<std::size_t>(expected[i])];
      mismatches += same(got[i], want) && std::signbit(got[i]) == std::signbit(want) ? 0 : 1;
    }
    EXPECT_EQ(mismatches, 0u);
  }
}

// The sorted keys are the input's bits in stable order: -0.0 and +0.0 keep their input order, and
// NaNs of either sign and any payload go last in input order, bits unchanged (float32 and float64,
// the two float keys the CPU sort does not widen), one thread and several.
template <class T, class Bits>
void expect_bitwise_stable_sort(std::mt19937_64& rng, Device device, DType dt, std::int64_t n) {
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_int_distribution<std::uint64_t> payload(1, 1000);
  std::vector<T> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i) {
    T v = static_cast<T>(pick(rng) - 4);  // small integers: many ties
    switch (pick(rng)) {
      case 0: v = T(0); break;
      case 1: v = -T(0); break;
      case 2: {  // a quiet NaN with a payload, either sign
        Bits bits;
        const T q = std::numeric_limits<T>::quiet_NaN();
        std::memcpy(&bits, &q, sizeof(T));
        bits |= static_cast<Bits>(payload(rng));
        if (pick(rng) < 5) bits |= Bits{1} << (8 * sizeof(T) - 1);
        std::memcpy(&v, &bits, sizeof(T));
        break;
      }
      default: break;
    }
    values[i] = v;
  }
  std::vector<std::int64_t> order(values.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t i, std::int64_t j) {
    return nan_last_less(double(values[static_cast<std::size_t>(i)]), double(values[static_cast<std::size_t>(j)]));
  });
  const Array a = from_vector(values, {n}, Device::cpu()).to(device);
  ASSERT_EQ(a.dtype(), dt);
  const std::vector<T> got = sort(a).template to_vector<T>();
  ASSERT_EQ(got.size(), values.size());
  std::size_t mismatches = 0;
  for (std::size_t k = 0; k < got.size(); ++k) {
    mismatches += std::memcmp(&got[k], &values[static_cast<std::size_t>(order[k])], sizeof(T)) == 0 ? 0 : 1;
  }
  EXPECT_EQ(mismatches, 0u) << "n " << n;
  EXPECT_EQ(argsort(a).to_vector<std::int64_t>(), order) << "n " << n;
}

TEST_P(SortTest, NaNPayloadsAndSignedZerosKeepTheirBitsInStableOrder) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  for (std::int64_t n : {5, 1000, 150001}) {
    if (dtype() == DType::float32) expect_bitwise_stable_sort<float, std::uint32_t>(rng, device(), dtype(), n);
    if (dtype() == DType::float64) expect_bitwise_stable_sort<double, std::uint64_t>(rng, device(), dtype(), n);
  }
}

// The extremes of each integer key type sort in place (the order-preserving images of the CPU
// sort flip the sign bit of signed keys; unsigned keys keep theirs).
TEST_P(SortTest, IntegerExtremes) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const DType dt = dtype();
  if (!is_integer(dt) || is_bool(dt)) return;
  if (dt == DType::int64) {
    const std::vector<std::int64_t> v{5, std::numeric_limits<std::int64_t>::max(), -1, std::numeric_limits<std::int64_t>::min(), 0};
    const Array a = from_vector(v, {5}, Device::cpu()).to(device());
    EXPECT_EQ(argsort(a).to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 2, 4, 0, 1}));
    EXPECT_EQ(sort(a).to_vector<std::int64_t>(),
              (std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), -1, 0, 5, std::numeric_limits<std::int64_t>::max()}));
  } else if (dt == DType::uint64) {
    const std::vector<std::uint64_t> v{5, std::numeric_limits<std::uint64_t>::max(), std::uint64_t{1} << 63, 0};
    const Array a = from_vector(v, {4}, Device::cpu()).to(device());
    EXPECT_EQ(argsort(a).to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 0, 2, 1}));
  } else if (dt == DType::int32) {
    const std::vector<std::int32_t> v{5, std::numeric_limits<std::int32_t>::max(), -1, std::numeric_limits<std::int32_t>::min(), 0};
    const Array a = from_vector(v, {5}, Device::cpu()).to(device());
    EXPECT_EQ(argsort(a).to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 2, 4, 0, 1}));
  } else if (dt == DType::uint32) {
    const std::vector<std::uint32_t> v{5, std::numeric_limits<std::uint32_t>::max(), std::uint32_t{1} << 31, 0};
    const Array a = from_vector(v, {4}, Device::cpu()).to(device());
    EXPECT_EQ(argsort(a).to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 0, 2, 1}));
  }
}

INSTANTIATE_TEST_SUITE_P(All, SortTest, ::testing::ValuesIn(backend_dtype_cases(all_dtypes())), case_name);

}  // namespace
}  // namespace tessel::testing
