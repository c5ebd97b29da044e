// Reductions and scans: one body over backend x dtype against a float64 reference computed on
// the host from the same elements, on fresh random inputs, contiguous and strided views.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "array/array_testing.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/reduce.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

const double nan_value = std::numeric_limits<double>::quiet_NaN();

std::vector<double> reals(const Array& a) {
  std::vector<double> out;
  for (const Value& v : read_values(a)) out.push_back(v.real());
  return out;
}

// Reference reduction: out[kept index] = f(slice values in C order of the reduced axes).
std::vector<double> reference(const std::vector<double>& values, const Shape& shape, const std::vector<bool>& reduced,
                              const std::function<double(const std::vector<double>&)>& f) {
  const std::int64_t ndim = static_cast<std::int64_t>(shape.size());
  Shape kept_shape;
  for (std::int64_t i = 0; i < ndim; ++i) {
    if (!reduced[static_cast<std::size_t>(i)]) kept_shape.push_back(shape[static_cast<std::size_t>(i)]);
  }
  std::vector<std::vector<double>> slices(static_cast<std::size_t>(numel(kept_shape)));
  std::vector<std::int64_t> index(static_cast<std::size_t>(ndim), 0);
  for (std::size_t linear = 0; linear < values.size(); ++linear) {
    std::int64_t out = 0;
    for (std::int64_t i = 0; i < ndim; ++i) {
      if (!reduced[static_cast<std::size_t>(i)]) out = out * shape[static_cast<std::size_t>(i)] + index[static_cast<std::size_t>(i)];
    }
    slices[static_cast<std::size_t>(out)].push_back(values[linear]);
    for (std::int64_t i = ndim - 1; i >= 0; --i) {
      if (++index[static_cast<std::size_t>(i)] < shape[static_cast<std::size_t>(i)]) break;
      index[static_cast<std::size_t>(i)] = 0;
    }
  }
  std::vector<double> result;
  for (const auto& s : slices) result.push_back(f(s));
  return result;
}

double ref_sum(const std::vector<double>& s, bool skip) {
  double t = 0;
  for (double x : s) t += (skip && std::isnan(x)) ? 0 : x;
  return t;
}
double ref_count(const std::vector<double>& s, bool skip) {
  double n = 0;
  for (double x : s) n += (skip && std::isnan(x)) ? 0 : 1;
  return n;
}
double ref_extremum(const std::vector<double>& s, bool want_min, bool skip) {
  double best = nan_value;
  for (double x : s) {
    if (std::isnan(x)) {
      if (!skip) return nan_value;
      continue;
    }
    if (std::isnan(best) || (want_min ? x < best : x > best)) best = x;
  }
  return best;
}
double ref_arg(const std::vector<double>& s, bool want_min, bool skip) {
  double best = -1;
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (std::isnan(s[k])) {
      if (!skip) return static_cast<double>(k);
      continue;
    }
    if (best < 0 || (want_min ? s[k] < s[static_cast<std::size_t>(best)] : s[k] > s[static_cast<std::size_t>(best)])) {
      best = static_cast<double>(k);
    }
  }
  return best;
}
double ref_var(const std::vector<double>& s, bool skip, std::int64_t ddof) {
  const double n = ref_count(s, skip);
  const double m = ref_sum(s, skip) / n;
  double ss = 0;
  for (double x : s) {
    if (!(skip && std::isnan(x))) ss += (x - m) * (x - m);
  }
  return n - static_cast<double>(ddof) > 0 ? ss / (n - static_cast<double>(ddof)) : nan_value;
}

// Relative tolerance of a result in `dtype` computed from inputs of that dtype.
double tolerance(DType dtype) {
  switch (dtype) {
    case DType::float16: return 2e-3;
    case DType::bfloat16: return 1.6e-2;
    case DType::float32: return 1e-5;
    default: return 1e-12;
  }
}

void expect_close(const std::vector<double>& expected, const Array& actual, DType dtype, const std::string& what) {
  const std::vector<double> got = reals(actual);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "] expected NaN, got " << got[i];
      continue;
    }
    const double tol = tolerance(dtype) * std::max(1.0, std::abs(expected[i]));
    EXPECT_NEAR(got[i], expected[i], tol) << what << " [" << i << "]";
  }
}

Shape expected_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (!reduced[i]) out.push_back(shape[i]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

DType sum_dtype(DType d) {
  if (is_floating(d)) return d;
  return is_unsigned_integer(d) ? DType::uint64 : DType::int64;
}
DType mean_dtype(DType d) { return is_floating(d) ? d : DType::float64; }

struct Case {
  Shape shape;
  Axes axes;
};

class ReduceTest : public BackendDTypeTest {};

TEST_P(ReduceTest, MatchesReference) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType dt = dtype();
  if (is_complex(dt)) {
    // sum and mean reduce the real and imaginary parts (an infinite part stays in its own part);
    // all and any read x != 0; prod multiplies pairwise; the other complex reductions are not
    // implemented.
    const double inf = std::numeric_limits<double>::infinity();
    const std::vector<Value> v = {Value(1, 2), Value(-3, inf), Value(0.5, -1), Value(0, 0), Value(2, 0), Value(0, -0.0)};
    const Array a = make_array(v, {2, 3}, dt, device());
    const std::vector<std::int64_t> last{1};
    const std::vector<Value> sums = read_values(sum(a, last));
    ASSERT_EQ(sums.size(), 2u);
    EXPECT_EQ(sums[0], Value(-1.5, inf));  // not NaN + inf j (re + im * 1j would make the real part NaN)
    EXPECT_EQ(sums[1], Value(2, 0));
    const Array means = mean(a, std::vector<std::int64_t>{0});
    EXPECT_EQ(means.dtype(), dt);
    const std::vector<Value> m = read_values(means);
    EXPECT_EQ(m[0], Value(0.5, 1));
    EXPECT_EQ(m[1], Value(-0.5, inf));
    EXPECT_EQ(m[2], Value(0.25, -0.5));
    EXPECT_EQ(read_values(any(a, last)), (std::vector<Value>{1, 1}));
    EXPECT_EQ(read_values(all(a, last)), (std::vector<Value>{1, 0}));
    EXPECT_EQ(read_values(sum(zeros({0}, dt, device()))), (std::vector<Value>{0}));
    // prod by pairwise multiplication: an odd count (3) and an empty axis (the empty product, 1).
    const Array b = make_array({Value(1, 2), Value(3, -1), Value(0, 0.5), Value(2, 0), Value(0, -1), Value(1, 1)}, {2, 3},
                               dt, device());
    EXPECT_EQ(read_values(prod(b, last)), (std::vector<Value>{Value(-2.5, 2.5), Value(2, -2)}));
    EXPECT_EQ(read_values(prod(b, std::vector<std::int64_t>{0}, true)),
              (std::vector<Value>{Value(2, 4), Value(-1, -3), Value(-0.5, 0.5)}));
    EXPECT_EQ(prod(b, std::vector<std::int64_t>{0}, true).shape(), (Shape{1, 3}));
    EXPECT_EQ(read_values(prod(zeros({2, 0}, dt, device()), last)), (std::vector<Value>{1, 1}));
    expect_error<DTypeError>([&] { argmax(a); }, {"argmax", dtype_name(dt)});
    const std::vector<Value> running = read_values(cumsum(a, 1));
    EXPECT_EQ(running, (std::vector<Value>{Value(1, 2), Value(-2, inf), Value(-1.5, inf), Value(0, 0), Value(2, 0),
                                           Value(2, 0)}));
    expect_error<DTypeError>([&] { cumprod(a, 1); }, {"cumprod", dtype_name(dt)});
    return;
  }
  const std::vector<Case> cases = {
      {{}, std::nullopt},         {{0}, std::nullopt},       {{7}, std::nullopt},      {{3, 0}, std::vector<std::int64_t>{1}},
      {{3, 0}, std::vector<std::int64_t>{0}}, {{4, 5, 6}, std::nullopt}, {{4, 5, 6}, std::vector<std::int64_t>{-1}},
      {{4, 5, 6}, std::vector<std::int64_t>{0}}, {{4, 5, 6}, std::vector<std::int64_t>{0, 2}},
      {{4, 5, 6}, std::vector<std::int64_t>{1}}, {{4, 5, 6}, std::vector<std::int64_t>{}},
      {{3, 1000}, std::vector<std::int64_t>{1}}, {{2000, 3}, std::vector<std::int64_t>{0}},
      {{5000}, std::nullopt},
  };
  for (const Case& c : cases) {
    for (int view = 0; view < 2; ++view) {
      // view 1: a negative-stride view of a larger array (reversed last axis, every other row).
      Array a;
      if (view == 0 || c.shape.empty()) {
        a = make_array(random_values(rng, dt, numel(c.shape)), c.shape, dt, device());
      } else {
        Shape big = c.shape;
        big[0] = big[0] * 2;
        a = make_array(random_values(rng, dt, numel(big)), big, dt, device())
                .slice(0, Slice(none, none, 2))
                .slice(static_cast<std::int64_t>(c.shape.size()) - 1, Slice(none, none, -1));
      }
      std::vector<double> values = reals(a);
      std::vector<bool> reduced(c.shape.size(), !c.axes.has_value());
      if (c.axes) {
        for (std::int64_t ax : *c.axes) reduced[static_cast<std::size_t>(ax < 0 ? ax + static_cast<std::int64_t>(c.shape.size()) : ax)] = true;
      }
      for (bool keepdims : {false, true}) {
        const std::string what = "shape " + shape_str(c.shape) + " view " + std::to_string(view) +
                                 " keepdims " + std::to_string(keepdims) + " " + dtype_name(dt) + " " + device().str();
        SCOPED_TRACE(what);
        const Shape out_shape = expected_shape(c.shape, reduced, keepdims);
        auto ref = [&](auto f) { return reference(values, c.shape, reduced, f); };
        std::int64_t len = 1;
        for (std::size_t i = 0; i < reduced.size(); ++i) len *= reduced[i] ? c.shape[i] : 1;
        const bool nonempty_out = numel(out_shape) > 0;

        Array s = sum(a, c.axes, keepdims);
        EXPECT_EQ(s.dtype(), sum_dtype(dt));
        EXPECT_EQ(s.shape(), out_shape);
        expect_close(ref([](const auto& v) { return ref_sum(v, false); }), s, dt, "sum");
        expect_close(ref([](const auto& v) { return ref_sum(v, true); }), nansum(a, c.axes, keepdims), dt, "nansum");

        Array m = mean(a, c.axes, keepdims);
        EXPECT_EQ(m.dtype(), mean_dtype(dt));
        expect_close(ref([](const auto& v) { return ref_sum(v, false) / ref_count(v, false); }), m, dt, "mean");
        expect_close(ref([](const auto& v) { return ref_var(v, false, 0); }), var(a, c.axes, 0, keepdims), dt, "var");
        expect_close(ref([](const auto& v) { return std::sqrt(ref_var(v, false, 1)); }), std(a, c.axes, 1, keepdims), dt,
                     "std ddof 1");

        Array any_result = any(a, c.axes, keepdims);
        EXPECT_EQ(any_result.dtype(), DType::bool_);
        expect_close(ref([](const auto& v) { return std::any_of(v.begin(), v.end(), [](double x) { return x != 0; }) ? 1.0 : 0.0; }),
                     any_result, DType::float64, "any");
        expect_close(ref([](const auto& v) { return std::all_of(v.begin(), v.end(), [](double x) { return x != 0; }) ? 1.0 : 0.0; }),
                     all(a, c.axes, keepdims), DType::float64, "all");

        if (len == 0 && nonempty_out) {
          expect_error<ValueError>([&] { min(a, c.axes, keepdims); },
                                   {"zero-size array to reduction operation min which has no identity"});
          expect_error<ValueError>([&] { max(a, c.axes, keepdims); }, {"max", "no identity"});
        } else {
          Array mn = min(a, c.axes, keepdims);
          EXPECT_EQ(mn.dtype(), dt);
          expect_close(ref([](const auto& v) { return ref_extremum(v, true, false); }), mn, dt, "min");
          expect_close(ref([](const auto& v) { return ref_extremum(v, false, false); }), max(a, c.axes, keepdims), dt, "max");
          expect_close(ref([](const auto& v) { return ref_extremum(v, true, true); }), nanmin(a, c.axes, keepdims), dt, "nanmin");
        }
        // Products of small slices only, so integers do not overflow.
        if (len <= 6) {
          std::function<double(const std::vector<double>&)> product = [](const std::vector<double>& v) {
            double p = 1;
            for (double x : v) p *= x;
            return p;
          };
          Array p = prod(a, c.axes, keepdims);
          EXPECT_EQ(p.dtype(), sum_dtype(dt));
          if (dt != DType::float16 && dt != DType::bfloat16) expect_close(ref(product), p, dt, "prod");
        }
      }
      // Arg reductions: flattened, and along each axis.
      if (a.size() > 0) {
        Array am = argmin(a);
        EXPECT_EQ(am.dtype(), DType::int64);
        EXPECT_EQ(am.shape(), Shape{});
        std::vector<bool> all_axes(c.shape.size(), true);
        expect_close(reference(values, c.shape, all_axes, [](const auto& v) { return ref_arg(v, true, false); }), am,
                     DType::float64, "argmin flat");
        for (std::int64_t axis = 0; axis < static_cast<std::int64_t>(c.shape.size()); ++axis) {
          std::vector<bool> one(c.shape.size(), false);
          one[static_cast<std::size_t>(axis)] = true;
          expect_close(reference(values, c.shape, one, [](const auto& v) { return ref_arg(v, false, false); }),
                       argmax(a, axis), DType::float64, "argmax axis " + std::to_string(axis));
          expect_close(reference(values, c.shape, one, [](const auto& v) { return ref_arg(v, true, true); }),
                       nanargmin(a, axis - static_cast<std::int64_t>(c.shape.size()), true), DType::float64, "nanargmin");
        }
      } else if (!c.shape.empty()) {
        expect_error<ValueError>([&] { argmin(a); }, {"argmin", "empty sequence"});
      }
    }
  }
}

TEST_P(ReduceTest, Scans) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType dt = dtype();
  if (is_complex(dt)) return;
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{9}, Shape{3, 4}, Shape{2, 3, 5}, Shape{1, 3000}}) {
    const Array base = make_array(random_values(rng, dt, numel(shape)), shape, dt, device());
    const Array a = shape.size() >= 2 ? base.slice(1, Slice(none, none, -1)) : base;
    const std::vector<double> values = reals(a);
    // Flattened cumsum.
    {
      Array c = cumsum(a);
      EXPECT_EQ(c.dtype(), sum_dtype(dt));
      EXPECT_EQ(c.shape(), Shape{a.size()});
      std::vector<double> expected;
      double run = 0;
      for (double x : values) expected.push_back(run += x);
      // float16/bfloat16 scans round at every step: compare loosely.
      expect_close(expected, c, is_floating(dt) && dt != DType::float64 ? DType::bfloat16 : dt, "cumsum flat");
    }
    for (std::int64_t axis = 0; axis < static_cast<std::int64_t>(shape.size()); ++axis) {
      Array c = cumprod(a, axis - static_cast<std::int64_t>(shape.size()));
      EXPECT_EQ(c.shape(), shape);
      EXPECT_EQ(c.dtype(), sum_dtype(dt));
      if (shape[static_cast<std::size_t>(axis)] > 4 || dt == DType::float16 || dt == DType::bfloat16) continue;
      // Reference: running product along `axis`.
      std::vector<double> expected(values.size());
      const Strides st = contiguous_strides(shape);
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::int64_t coord = (static_cast<std::int64_t>(i) / st[static_cast<std::size_t>(axis)]) % shape[static_cast<std::size_t>(axis)];
        expected[i] = values[i] * (coord > 0 ? expected[i - static_cast<std::size_t>(st[static_cast<std::size_t>(axis)])] : 1.0);
      }
      expect_close(expected, c, dt, "cumprod axis " + std::to_string(axis));
    }
  }
}

TEST_P(ReduceTest, NaNs) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const DType dt = dtype();
  if (!is_floating(dt)) return;
  // Rows: [1, nan, -2, nan], [nan, nan, nan, nan], [3, 0, 5, 0]
  const double n = nan_value;
  const std::vector<Value> v = {1, n, -2, n, n, n, n, n, 3, 0, 5, 0};
  const Array a = make_array(v, {3, 4}, dt, device());
  const std::vector<std::int64_t> last{1};
  expect_close({n, n, 8}, sum(a, last), dt, "sum");
  expect_close({-1, 0, 8}, nansum(a, last), dt, "nansum");
  expect_close({n, n, 0}, min(a, last), dt, "min");
  expect_close({-2, n, 0}, nanmin(a, last), dt, "nanmin");
  expect_close({1, n, 5}, nanmax(a, last), dt, "nanmax");
  expect_close({-0.5, n, 2}, nanmean(a, last), dt, "nanmean");
  expect_close({2.25, n, 4.5}, nanvar(a, last), dt, "nanvar");
  expect_close({1.5, n, std::sqrt(4.5)}, nanstd(a, last), dt, "nanstd");
  expect_close({-2, 1, 0}, nanprod(a, last), dt, "nanprod");
  expect_close({1, 0, 1}, argmin(a, 1), DType::float64, "argmin");
  // Rows with a value; the all-NaN row raises as NumPy ("All-NaN slice encountered").
  const Array with_values = a.index({Slice(0, 3, 2)});
  expect_close({2, 1}, nanargmin(with_values, 1), DType::float64, "nanargmin");
  expect_close({0, 2}, nanargmax(with_values, 1), DType::float64, "nanargmax");
  expect_close({2}, nanargmin(with_values.index({0})), DType::float64, "nanargmin flat");
  expect_error<ValueError>([&] { nanargmin(a, 1); }, {"nanargmin", "All-NaN slice encountered"});
  expect_error<ValueError>([&] { nanargmax(a, 1); }, {"nanargmax", "All-NaN slice encountered"});
  expect_error<ValueError>([&] { nanargmax(a.index({1})); }, {"nanargmax", "All-NaN slice encountered"});
  expect_error<ValueError>([&] { nanargmin(a.index({Slice(1, 2)}), std::nullopt, true); }, {"nanargmin", "All-NaN slice encountered"});
  expect_close({1, 1, 1}, any(a, last), DType::float64, "any (NaN is true)");
  expect_close({1, 1, 0}, all(a, last), DType::float64, "all");
  // Mean of an empty array is NaN; sum 0; prod 1.
  const Array empty_array = zeros({0}, dt, device());
  expect_close({n}, mean(empty_array), dt, "mean empty");
  expect_close({0}, sum(empty_array), dt, "sum empty");
  expect_close({1}, prod(empty_array), dt, "prod empty");
}

TEST_P(ReduceTest, Errors) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const DType dt = dtype();
  if (is_complex(dt)) return;
  const Array a = zeros({2, 3}, dt, device());
  expect_error<IndexError>([&] { sum(a, std::vector<std::int64_t>{2}); }, {"sum", "axis 2", "dimension 2"});
  expect_error<IndexError>([&] { max(a, std::vector<std::int64_t>{-3}); }, {"max", "axis -3", "dimension 2"});
  expect_error<ValueError>([&] { mean(a, std::vector<std::int64_t>{1, -1}); }, {"mean", "duplicate", "-1"});
  expect_error<IndexError>([&] { argmin(a, 5); }, {"argmin", "axis 5", "dimension 2"});
  expect_error<IndexError>([&] { cumsum(a, 2); }, {"cumsum", "axis 2"});
  const Array e = zeros({0, 2}, dt, device());
  expect_error<ValueError>([&] { nanmax(e); }, {"zero-size array to reduction operation nanmax which has no identity"});
  EXPECT_EQ(min(e, std::vector<std::int64_t>{1}).shape(), Shape{0});  // empty output: no error, as NumPy
}

// Long full reductions take the parallel (CPU) or multi-block (CUDA) path; checked exactly.
TEST_P(ReduceTest, LongFullSum) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const DType dt = dtype();
  if (dt != DType::float64 && dt != DType::int64 && dt != DType::float32) return;
  const std::int64_t n = (std::int64_t{1} << 21) + 38;  // even, for the reshape below
  if (dt == DType::float32) {
    // Every partial sum stays an integer below 2^24, so float32 accumulation is exact too.
    EXPECT_EQ(sum(ones({n}, dt, device())).item<double>(), static_cast<double>(n));
    EXPECT_EQ(mean(ones({n}, dt, device())).item<double>(), 1.0);
    return;
  }
  const Array a = arange(0, n, 1, dt, device());
  EXPECT_EQ(sum(a).item<double>(), static_cast<double>(n) * static_cast<double>(n - 1) / 2);
  EXPECT_EQ(nansum(a).item<double>(), static_cast<double>(n) * static_cast<double>(n - 1) / 2);
  EXPECT_EQ(argmax(a).item<std::int64_t>(), n - 1);
  EXPECT_EQ(max(a.reshape({2, -1}), std::vector<std::int64_t>{0}).shape(), Shape{n / 2});
}

INSTANTIATE_TEST_SUITE_P(All, ReduceTest, ::testing::ValuesIn(backend_dtype_cases(all_dtypes())), case_name);

}  // namespace
}  // namespace tessel::testing
