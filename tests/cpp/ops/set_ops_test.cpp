// unique_all, isin and repeat: one body over backend x dtype against std::map / std::set and
// loops over the same elements, on fresh random inputs with many ties (and NaNs, signed zeros for
// floats), through reversed views, with the error cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "array/array_testing.hpp"
#include "tessel/ops/set_ops.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

std::vector<double> reals(const Array& a) {
  std::vector<double> out;
  for (const Value& v : read_values(a)) out.push_back(v.real());
  return out;
}

// Random elements of `dt` with every 5th a NaN and every 9th a -0.0 (floats).
Array random_input(std::mt19937_64& rng, DType dt, const Shape& shape, Device device) {
  std::vector<Value> values = random_values(rng, dt, numel(shape));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!is_integer(dt) && !is_bool(dt)) {
      values[i] = Value(std::round(values[i].real() / 8.0), 0);  // few distinct values
      if (i % 5 == 2) values[i] = std::nan("");
      if (i % 9 == 4) values[i] = -0.0;
    } else if (!is_bool(dt)) {
      values[i] = Value(std::fmod(values[i].real(), 13.0), 0);
    }
  }
  return make_array(values, shape, dt, device);
}

class SetOpsTest : public BackendDTypeTest {};

TEST_P(SetOpsTest, UniqueAllMatchesReference) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType dt = dtype();
  if (is_complex(dt)) {
    const Array a = zeros({3}, dt, device());
    expect_error<DTypeError>([&] { unique_all(a); }, {"unique_all", dtype_name(dt)});
    expect_error<DTypeError>([&] { isin(a, a); }, {"isin", dtype_name(dt)});
    return;
  }
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{1}, Shape{37}, Shape{4, 0}, Shape{6, 45}, Shape{3000}}) {
    for (int view = 0; view < 2; ++view) {
      Array a = random_input(rng, dt, shape, device());
      if (view == 1 && !shape.empty()) a = a.slice(static_cast<std::int64_t>(shape.size()) - 1, Slice(none, none, -1));
      SCOPED_TRACE("shape " + shape_str(shape) + " view " + std::to_string(view));
      const std::vector<double> x = reals(a);
      // Reference: distinct non-NaN values in order with first index and count; NaNs each alone, last.
      std::map<double, std::pair<std::int64_t, std::int64_t>> groups;  // value -> (first, count); -0 == +0
      std::vector<std::int64_t> nans;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(x[i])) {
          nans.push_back(static_cast<std::int64_t>(i));
          continue;
        }
        auto [it, inserted] = groups.try_emplace(x[i], static_cast<std::int64_t>(i), 0);
        ++it->second.second;
      }
      const UniqueAllResult r = unique_all(a);
      ASSERT_EQ(r.values.dtype(), dt);
      ASSERT_EQ(r.inverse_indices.shape(), a.shape());
      const std::vector<double> values = reals(r.values);
      const auto indices = r.indices.to_vector<std::int64_t>();
      const auto counts = r.counts.to_vector<std::int64_t>();
      const auto inverse = r.inverse_indices.reshape({a.size()}).to_vector<std::int64_t>();
      ASSERT_EQ(values.size(), groups.size() + nans.size());
      std::size_t k = 0;
      for (const auto& [value, first_count] : groups) {
        EXPECT_EQ(values[k], value) << "value " << k;
        EXPECT_EQ(indices[k], first_count.first) << "first index " << k;
        EXPECT_EQ(counts[k], first_count.second) << "count " << k;
        ++k;
      }
      std::vector<std::int64_t> nan_indices(indices.begin() + static_cast<std::ptrdiff_t>(k), indices.end());
      std::sort(nan_indices.begin(), nan_indices.end());
      EXPECT_EQ(nan_indices, nans);
      for (; k < values.size(); ++k) {
        EXPECT_TRUE(std::isnan(values[k]));
        EXPECT_EQ(counts[k], 1);
      }
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double back = values[static_cast<std::size_t>(inverse[i])];
        EXPECT_TRUE(std::isnan(x[i]) ? std::isnan(back) : back == x[i]) << "inverse " << i;
      }
      // The parts alone: values only, values and counts.
      const UniqueAllResult only = unique_all(a, UniqueParts{});
      EXPECT_FALSE(only.indices.defined());
      EXPECT_FALSE(only.counts.defined());
      EXPECT_EQ(only.values.size(), r.values.size());
      const UniqueAllResult with_counts = unique_all(a, UniqueParts{false, false, true});
      EXPECT_EQ(with_counts.counts.to_vector<std::int64_t>(), counts);
    }
  }
}

TEST_P(SetOpsTest, IsinMatchesReference) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType dt = dtype();
  if (is_complex(dt)) return;  // DTypeError: UniqueAllMatchesReference
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{29}, Shape{5, 40}}) {
    // 2 x 3000: past the size where the CUDA search first narrows through every 64th key.
    for (const Shape& other : {Shape{0}, Shape{7}, Shape{2, 300}, Shape{2, 3000}}) {
      Array a = random_input(rng, dt, shape, device());
      Array b = random_input(rng, dt, other, device());
      if (!other.empty() && other.back() > 1) b = b.slice(static_cast<std::int64_t>(other.size()) - 1, Slice(none, none, -1));
      SCOPED_TRACE("x1 " + shape_str(shape) + " x2 " + shape_str(other));
      const std::vector<double> x = reals(a), y = reals(b);
      for (bool invert : {false, true}) {
        const Array got = isin(a, b, invert);
        ASSERT_EQ(got.dtype(), DType::bool_);
        ASSERT_EQ(got.shape(), a.shape());
        const std::vector<double> flags = reals(got);
        for (std::size_t i = 0; i < x.size(); ++i) {
          const bool found = std::find(y.begin(), y.end(), x[i]) != y.end();  // NaN == NaN is false
          EXPECT_EQ(flags[i] != 0, found != invert) << "element " << i << " = " << x[i];
        }
      }
    }
  }
  // Mixed dtypes compare in the promoted dtype.
  const Array ints = make_array({Value(1), Value(2), Value(3)}, {3}, DType::int64, device());
  const Array probe = make_array({Value(2), Value(5)}, {2}, dt, device());
  const std::vector<double> got = reals(isin(probe, ints));
  EXPECT_TRUE(got[0] != 0);
  EXPECT_EQ(got[1] != 0, is_bool(dt));  // bool: 5 is True, which is 1
}

TEST_P(SetOpsTest, RepeatMatchesReference) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType dt = dtype();
  const Array a = make_array(random_values(rng, dt, 24), {2, 3, 4}, dt, device()).slice(1, Slice(none, none, -1));
  const std::vector<Value> x = read_values(a);  // (2, 3, 4) reversed along axis 1
  std::uniform_int_distribution<int> count(0, 3);
  for (std::int64_t axis : {0, 1, 2, -1}) {
    const std::int64_t ax = axis < 0 ? axis + 3 : axis;
    const std::int64_t len = a.shape()[static_cast<std::size_t>(ax)];
    std::vector<Value> counts;
    for (std::int64_t i = 0; i < len; ++i) counts.push_back(count(rng));
    const Array got = repeat(a, make_array(counts, {len}, DType::int32, device()), axis);
    // Reference: output index -> source index along the axis.
    std::vector<std::int64_t> source;
    for (std::int64_t i = 0; i < len; ++i) {
      for (int c = 0; c < static_cast<int>(counts[static_cast<std::size_t>(i)].real()); ++c) source.push_back(i);
    }
    Shape shape = a.shape();
    shape[static_cast<std::size_t>(ax)] = static_cast<std::int64_t>(source.size());
    ASSERT_EQ(got.shape(), shape);
    const std::vector<Value> values = read_values(got);
    std::int64_t inner = 1, outer = 1;
    for (std::int64_t d = ax + 1; d < 3; ++d) inner *= a.shape()[static_cast<std::size_t>(d)];
    for (std::int64_t d = 0; d < ax; ++d) outer *= a.shape()[static_cast<std::size_t>(d)];
    const auto total = static_cast<std::int64_t>(source.size());
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t j = 0; j < total; ++j) {
        for (std::int64_t i = 0; i < inner; ++i) {
          EXPECT_EQ(values[static_cast<std::size_t>((o * total + j) * inner + i)],
                    x[static_cast<std::size_t>((o * len + source[static_cast<std::size_t>(j)]) * inner + i)])
              << "axis " << axis;
        }
      }
    }
    // One count for all: the broadcast form.
    const Array twice = repeat(a, 2, axis);
    Shape doubled = a.shape();
    doubled[static_cast<std::size_t>(ax)] *= 2;
    EXPECT_EQ(twice.shape(), doubled);
  }
  // Flattened, with a (1,) count array.
  const Array flat = repeat(a, make_array({Value(3)}, {1}, DType::int64, device()));
  EXPECT_EQ(flat.shape(), Shape{72});
  EXPECT_EQ(read_values(flat)[5], x[1]);
  // Errors name the op and the offending value.
  expect_error<ValueError>([&] { repeat(a, -1, 0); }, {"repeat", "non-negative", "-1"});
  expect_error<ValueError>([&] { repeat(a, make_array({Value(1), Value(-3)}, {2}, DType::int64, device()), 0); },
                           {"repeat", "non-negative", "-3"});
  expect_error<ShapeError>([&] { repeat(a, make_array({Value(1), Value(2)}, {2}, DType::int64, device()), 1); },
                           {"repeat", "(2,)", "3"});
  expect_error<DTypeError>([&] { repeat(a, make_array({Value(1)}, {1}, DType::float32, device()), 1); },
                           {"repeat", "float32"});
}

INSTANTIATE_TEST_SUITE_P(All, SetOpsTest, ::testing::ValuesIn(backend_dtype_cases(all_dtypes())), case_name);

}  // namespace
}  // namespace tessel::testing
