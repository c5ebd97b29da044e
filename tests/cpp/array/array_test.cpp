// Array views, creation, copies and casts, joins and errors: one body over backend x dtype,
// checked against plain loops over float64/complex128 reference data.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "array/backend.hpp"
#include "array_testing.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/error.hpp"
#include "tessel/ops/cast.hpp"

namespace tessel {
namespace {

using testing::expect_view;
using testing::read_values;
using testing::Value;

class ArrayViews : public testing::BackendDTypeTest {};

TEST_P(ArrayViews, SlicingIndexingAndPermutations) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Shape shape{4, 5, 6};
  const std::vector<Value> values = testing::random_values(rng, dtype(), numel(shape));
  const Array a = testing::make_array(values, shape, dtype(), device());
  using Index = std::vector<std::int64_t>;

  expect_view(a, shape, values, shape, [](const Index& i) { return i; });
  expect_view(a[1], {5, 6}, values, shape, [](const Index& i) { return Index{1, i[0], i[1]}; });
  expect_view(a[-1][2], {6}, values, shape, [](const Index& i) { return Index{3, 2, i[0]}; });
  expect_view(a[2][3][4], {}, values, shape, [](const Index&) { return Index{2, 3, 4}; });
  expect_view(a.index({Slice(none, none, -1)}), shape, values, shape,
              [](const Index& i) { return Index{3 - i[0], i[1], i[2]}; });
  expect_view(a.index({ellipsis, Slice(1, none, 2)}), {4, 5, 3}, values, shape,
              [](const Index& i) { return Index{i[0], i[1], 1 + 2 * i[2]}; });
  expect_view(a.index({-1, newaxis, Slice(-2, -6, -1)}), {1, 4, 6}, values, shape,
              [](const Index& i) { return Index{3, 3 - i[1], i[2]}; });
  expect_view(a.index({Slice(1, 3), ellipsis, -2}), {2, 5}, values, shape,
              [](const Index& i) { return Index{1 + i[0], i[1], 4}; });
  expect_view(a.index({Slice(10, 20)}), {0, 5, 6}, values, shape, [](const Index& i) { return i; });
  expect_view(a.index({Slice(none, none, -2), Slice(none, none, -3)}), {2, 2, 6}, values, shape,
              [](const Index& i) { return Index{3 - 2 * i[0], 4 - 3 * i[1], i[2]}; });
  expect_view(a.T(), {6, 5, 4}, values, shape, [](const Index& i) { return Index{i[2], i[1], i[0]}; });
  expect_view(a.permute({1, 2, 0}), {5, 6, 4}, values, shape, [](const Index& i) { return Index{i[2], i[0], i[1]}; });
  expect_view(a.swapaxes(0, -1), {6, 5, 4}, values, shape, [](const Index& i) { return Index{i[2], i[1], i[0]}; });
  expect_view(a.index({0, Slice(), Slice(0, 1)}).broadcast_to({3, 5, 4}), {3, 5, 4}, values, shape,
              [](const Index& i) { return Index{0, i[1], 0}; });
  expect_view(a.expand_dims(1), {4, 1, 5, 6}, values, shape, [](const Index& i) { return Index{i[0], i[2], i[3]}; });
  expect_view(a.index({Slice(), Slice(0, 1)}).squeeze(), {4, 6}, values, shape,
              [](const Index& i) { return Index{i[0], 0, i[1]}; });
  // Views share storage: no copy was made.
  EXPECT_EQ(a.T().buffer(), a.buffer());
  EXPECT_EQ(a.index({Slice(none, none, -1)}).strides(), (Strides{-30, 6, 1}));
}

TEST_P(ArrayViews, ReshapeRavelFlattenAndCopies) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Shape shape{4, 6};
  const std::vector<Value> values = testing::random_values(rng, dtype(), numel(shape));
  const Array a = testing::make_array(values, shape, dtype(), device());
  using Index = std::vector<std::int64_t>;

  const Array r = a.reshape({2, -1, 3});
  EXPECT_EQ(r.buffer(), a.buffer());  // a view
  expect_view(r, {2, 4, 3}, values, shape, [](const Index& i) {
    const std::int64_t flat = i[0] * 12 + i[1] * 3 + i[2];
    return Index{flat / 6, flat % 6};
  });
  // A transposed array cannot be reshaped as a view: reshape copies, view refuses.
  const Array t = a.T();
  const Array flat = t.reshape({-1});
  EXPECT_NE(flat.buffer(), a.buffer());
  expect_view(flat, {24}, values, shape, [](const Index& i) { return Index{i[0] % 4, i[0] / 4}; });
  testing::expect_error<ShapeError>([&] { t.view({24}); }, {"(6, 4)", "(24,)", "without a copy"});
  // Splitting an axis of a transposed array is still a view.
  EXPECT_EQ(t.reshape({3, 2, 4}).buffer(), a.buffer());
  // ravel of a negative-stride view copies; of a contiguous one it does not.
  const Array reversed = a.index({Slice(none, none, -1), Slice(none, none, -1)});
  expect_view(reversed.ravel(), {24}, values, shape, [](const Index& i) { return Index{3 - i[0] / 6, 5 - i[0] % 6}; });
  EXPECT_EQ(a.ravel().buffer(), a.buffer());
  EXPECT_NE(a.flatten().buffer(), a.buffer());
  // copy() and contiguous() of a strided view give contiguous equal arrays.
  const Array strided = a.index({Slice(none, none, 2), Slice(none, none, -3)});
  for (const Array& c : {strided.copy(), strided.contiguous()}) {
    EXPECT_TRUE(c.is_contiguous());
    expect_view(c, {2, 2}, values, shape, [](const Index& i) { return Index{2 * i[0], 5 - 3 * i[1]}; });
  }
  EXPECT_EQ(a.contiguous().buffer(), a.buffer());
  // Zero-size and 0-d arrays.
  const Array empty_rows = a.index({Slice(2, 2)});
  EXPECT_EQ(empty_rows.shape(), (Shape{0, 6}));
  EXPECT_EQ(empty_rows.reshape({3, 0, 2}).shape(), (Shape{3, 0, 2}));
  EXPECT_EQ(empty_rows.copy().size(), 0);
  const Array scalar = a[1][2];
  EXPECT_EQ(scalar.ndim(), 0);
  EXPECT_EQ(scalar.reshape({1, 1}).shape(), (Shape{1, 1}));
  expect_view(scalar.copy(), {}, values, shape, [](const Index&) { return Index{1, 2}; });
}

// Copies that transpose the last two axes (the CUDA backend's tiled path takes those at least 32
// wide, in either direction, with a batch axis of any stride) and the ones just too narrow for it.
TEST_P(ArrayViews, TransposingCopies) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  using Index = std::vector<std::int64_t>;
  for (const Shape& shape : {Shape{3, 70, 45}, Shape{33, 100}, Shape{2, 31, 64}, Shape{4, 32, 32}}) {
    const std::vector<Value> values = testing::random_values(rng, dtype(), numel(shape));
    const Array a = testing::make_array(values, shape, dtype(), device());
    const auto n = a.ndim();
    const auto swapped = [n](const Index& i) {
      Index j = i;
      std::swap(j[static_cast<std::size_t>(n - 1)], j[static_cast<std::size_t>(n - 2)]);
      return j;
    };
    Shape t_shape = shape;
    std::swap(t_shape[static_cast<std::size_t>(n - 1)], t_shape[static_cast<std::size_t>(n - 2)]);
    // Contiguous source into a transposed destination view (linalg's column-major copies), over
    // ones (an element left unwritten shows) ...
    Array out = ones(t_shape, dtype(), device());
    copyto(out.swapaxes(-1, -2), a);
    expect_view(out, t_shape, values, shape, swapped);
    // ... and a transposed source into a contiguous destination.
    expect_view(a.swapaxes(-1, -2).contiguous(), t_shape, values, shape, swapped);
    if (n == 3) {  // every other batch entry, transposed
      const Array strided = a.index({Slice(none, none, 2)}).swapaxes(-1, -2).copy();
      expect_view(strided, {(shape[0] + 1) / 2, t_shape[1], t_shape[2]}, values, shape,
                  [](const Index& i) { return Index{2 * i[0], i[2], i[1]}; });
    }
  }
}

TEST_P(ArrayViews, CreationFunctions) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const DType d = dtype();
  auto all_equal = [](const Array& array, Value expected) {
    for (const Value& v : read_values(array)) {
      if (!testing::same_value(v, expected)) return false;
    }
    return true;
  };
  EXPECT_TRUE(all_equal(zeros({3, 4}, d, device()), 0.0));
  EXPECT_TRUE(all_equal(ones({2, 0, 3}, d, device()), 1.0));
  EXPECT_TRUE(all_equal(ones({5}, d, device()), 1.0));
  EXPECT_TRUE(all_equal(full({}, 1, d, device()), 1.0));
  const Value seven = is_bool(d) ? Value(1.0) : Value(7.0);
  EXPECT_TRUE(all_equal(full({3, 3}, 7, d, device()), seven));
  const Array like = full_like(zeros({2, 3}, DType::float32, device()), 7, d);
  EXPECT_EQ(like.shape(), (Shape{2, 3}));
  EXPECT_EQ(like.dtype(), d);
  EXPECT_TRUE(all_equal(like, seven));
  EXPECT_TRUE(all_equal(zeros_like(like), 0.0));
  EXPECT_TRUE(all_equal(ones_like(like), 1.0));
  EXPECT_EQ(empty_like(like).shape(), like.shape());

  // eye with a diagonal offset, against a loop.
  for (std::int64_t k : {-2, 0, 1, 5}) {
    const Array e = eye(3, 4, k, d, device());
    const std::vector<Value> got = read_values(e);
    for (std::int64_t i = 0; i < 3; ++i) {
      for (std::int64_t j = 0; j < 4; ++j) {
        EXPECT_EQ(got[static_cast<std::size_t>(i * 4 + j)], Value(j - i == k ? 1.0 : 0.0)) << i << "," << j << " k=" << k;
      }
    }
  }
  if (is_bool(d)) return;
  // arange: NumPy's length rule, ints and floats.
  const std::vector<Value> counted = read_values(arange(2, 11, 3, d, device()));
  EXPECT_EQ(counted, (std::vector<Value>{2.0, 5.0, 8.0}));
  EXPECT_EQ(arange(5, 0, -2, d, device()).size(), 3);
  EXPECT_EQ(arange(5, 0, 1, d, device()).size(), 0);
  EXPECT_EQ(arange(0.0, 1.0, 0.25, std::nullopt, device()).dtype(), DType::float64);
  EXPECT_EQ(arange(0.0, 1.0, 0.25, std::nullopt, device()).size(), 4);
  EXPECT_EQ(arange(0.5, 3, 0.5, std::nullopt, device()).size(), 5);
  EXPECT_EQ(arange(10, std::nullopt, device()).dtype(), DType::int64);
  if (is_inexact(d)) {
    EXPECT_EQ(read_values(arange(0.5, 2.0, 0.5, d, device())), (std::vector<Value>{0.5, 1.0, 1.5}));
    EXPECT_EQ(read_values(linspace(0, 1, 5, true, d, device())), (std::vector<Value>{0, 0.25, 0.5, 0.75, 1.0}));
    EXPECT_EQ(read_values(linspace(0, 1, 4, false, d, device())), (std::vector<Value>{0, 0.25, 0.5, 0.75}));
  } else {
    // NumPy 2 floors before casting to an integer dtype.
    EXPECT_EQ(read_values(linspace(0, 5, 4, true, d, device())), (std::vector<Value>{0, 1, 3, 5}));
  }
  EXPECT_EQ(linspace(0, 1, 0, true, d, device()).size(), 0);
  EXPECT_EQ(read_values(linspace(3, 7, 1, true, d, device())), (std::vector<Value>{3.0}));
}

INSTANTIATE_TEST_SUITE_P(All, ArrayViews, ::testing::ValuesIn(testing::backend_dtype_cases(testing::all_dtypes())),
                         testing::case_name);

// ---- casts between every dtype pair ----

// The reference cast, written from the rules rather than from the implementation's helper.
Value reference_cast(Value v, DType from, DType to) {
  if (is_bool(to)) return (v.real() != 0 || v.imag() != 0 || std::isnan(v.real())) ? 1.0 : 0.0;
  if (!is_complex(to)) v = v.real();
  if (is_integer(to)) {
    const double x = v.real();
    const double bits = static_cast<double>(8 * itemsize(to));
    double low = is_signed_integer(to) ? -std::ldexp(1.0, static_cast<int>(bits) - 1) : 0;
    double high = is_signed_integer(to) ? std::ldexp(1.0, static_cast<int>(bits) - 1) - 1 : std::ldexp(1.0, static_cast<int>(bits)) - 1;
    if (is_inexact(from)) {
      if (std::isnan(x)) return 0.0;
      return std::min(std::max(std::trunc(x), low), high);  // tessel defines saturation
    }
    // integer -> integer wraps modulo 2^bits
    double wrapped = std::fmod(x, std::ldexp(1.0, static_cast<int>(bits)));
    if (wrapped < low) wrapped += std::ldexp(1.0, static_cast<int>(bits));
    if (wrapped > high) wrapped -= std::ldexp(1.0, static_cast<int>(bits));
    return wrapped;
  }
  auto round_part = [&](double x) {
    switch (is_complex(to) ? to_real(to) : to) {
      case DType::float16: return static_cast<double>(static_cast<float>(float16(x)));
      case DType::bfloat16: return static_cast<double>(static_cast<float>(bfloat16(x)));
      case DType::float32: return static_cast<double>(static_cast<float>(x));
      default: return x;
    }
  };
  return Value(round_part(v.real()), round_part(v.imag()));
}

class ArrayCasts : public testing::BackendDTypeTest {};

TEST_P(ArrayCasts, AstypeToEveryDTypeFromStridedSource) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType from = dtype();
  std::vector<Value> values = testing::random_values(rng, from, 60);
  if (is_inexact(from)) {
    // Special values: NaN, infinities, signed zero, halves, and values out of the small-int range.
    const std::vector<double> special = {NAN, INFINITY, -INFINITY, -0.0, 0.5, -1.5, 300.0, -200.0, 65000.0, 2.75};
    for (std::size_t i = 0; i < special.size(); ++i) values[i] = Value(special[i], is_complex(from) ? special[i] : 0.0);
    values = read_values(testing::make_array(values, {60}, from, Device::cpu()));  // as stored in `from`
  }
  const Array source = testing::make_array(values, {6, 10}, from, device()).index({Slice(none, none, -1), Slice(none, none, 2)});
  for (DType to : testing::all_dtypes()) {
    SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
    const Array cast = astype(source, to);
    ASSERT_EQ(cast.dtype(), to);
    ASSERT_EQ(cast.device(), device());
    ASSERT_EQ(cast.shape(), (Shape{6, 5}));
    const std::vector<Value> got = read_values(cast);
    for (std::int64_t i = 0; i < 6; ++i) {
      for (std::int64_t j = 0; j < 5; ++j) {
        const Value input = values[static_cast<std::size_t>((5 - i) * 10 + 2 * j)];
        const Value expected = reference_cast(input, from, to);
        ASSERT_TRUE(testing::same_value(got[static_cast<std::size_t>(i * 5 + j)], expected))
            << "input " << input << " got " << got[static_cast<std::size_t>(i * 5 + j)] << " expected " << expected;
      }
    }
  }
}

TEST_P(ArrayCasts, CopytoBroadcastsIntoPoisonedStridedView) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType d = dtype();
  const std::vector<Value> row = testing::random_values(rng, d, 4);
  const Array source = testing::make_array(row, {4}, d, device());
  const Array target = empty({5, 8}, d, device());
  testing::poison(target);
  const std::vector<Value> poisoned = read_values(target);
  // Rows 3, 1 (negative step) and every other column, written with a broadcast row.
  const Array view = target.index({Slice(3, 0, -2), Slice(none, none, 2)});
  copyto(view, source);
  const std::vector<Value> got = read_values(target);
  for (std::int64_t i = 0; i < 5; ++i) {
    for (std::int64_t j = 0; j < 8; ++j) {
      const bool written = (i == 3 || i == 1) && j % 2 == 0;
      const Value expected = written ? row[static_cast<std::size_t>(j / 2)] : poisoned[static_cast<std::size_t>(i * 8 + j)];
      ASSERT_TRUE(testing::same_value(got[static_cast<std::size_t>(i * 8 + j)], expected)) << i << "," << j;
    }
  }
  testing::expect_error<ShapeError>([&] { copyto(view, zeros({3}, d, device())); }, {"(3,)", "(2, 4)", "axis 1"});
}

TEST_P(ArrayCasts, ConcatenateAndStack) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const DType d = dtype();
  const std::vector<Value> va = testing::random_values(rng, d, 6), vb = testing::random_values(rng, d, 4);
  const Array a = testing::make_array(va, {2, 3}, d, device());
  const Array b = testing::make_array(vb, {2, 2}, d, device());
  using Index = std::vector<std::int64_t>;
  const Array joined = concatenate({a, b.index({Slice(), Slice(none, none, -1)})}, 1);
  ASSERT_EQ(joined.shape(), (Shape{2, 5}));
  const std::vector<Value> got = read_values(joined);
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t j = 0; j < 5; ++j) {
      const Value expected = j < 3 ? va[static_cast<std::size_t>(i * 3 + j)] : vb[static_cast<std::size_t>(i * 2 + (1 - (j - 3)))];
      EXPECT_EQ(got[static_cast<std::size_t>(i * 5 + j)], expected);
    }
  }
  const Array stacked = stack({a, a.index({Slice(none, none, -1)})}, -1);
  expect_view(stacked, {2, 3, 2}, va, {2, 3}, [](const Index& i) { return Index{i[2] == 0 ? i[0] : 1 - i[0], i[1]}; });
  // Mixed dtypes promote.
  EXPECT_EQ(concatenate({a, zeros({1, 3}, DType::float32, device())}).dtype(), result_type(d, DType::float32));
  testing::expect_error<ShapeError>([&] { concatenate({a, b}, 0); }, {"concatenate", "axis 1", "(2, 3)", "(2, 2)"});
  testing::expect_error<ShapeError>([&] { stack({a, b}); }, {"stack", "(2, 3)", "(2, 2)"});
  testing::expect_error<ShapeError>([&] { concatenate({a, zeros({3}, d, device())}); }, {"number of dimensions", "(3,)"});
  testing::expect_error<DTypeError>([&] { concatenate({astype(a, DType::complex64), a}, 0, DType::int8); },
                                    {"concatenate", "complex64", "int8", "same_kind"});
  testing::expect_error<ShapeError>([&] { concatenate({a[0][0]}); }, {"zero-dimensional"});
}

INSTANTIATE_TEST_SUITE_P(All, ArrayCasts, ::testing::ValuesIn(testing::backend_dtype_cases(testing::all_dtypes())),
                         testing::case_name);

// ---- errors and printing, per backend ----

class ArrayErrors : public testing::BackendTest {};

TEST_P(ArrayErrors, BadInputsNameTheProblem) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Array a = zeros({3, 4}, DType::float32, device());
  testing::expect_error<IndexError>([&] { a.index({1, 4}); }, {"index 4", "axis 1", "size 4"});
  testing::expect_error<IndexError>([&] { a[-4]; }, {"index -4", "axis 0", "size 3"});
  testing::expect_error<IndexError>([&] { a.index({0, 0, 0}); }, {"too many indices", "2-dimensional", "3"});
  testing::expect_error<IndexError>([&] { a.index({ellipsis, ellipsis}); }, {"single ellipsis"});
  testing::expect_error<ValueError>([&] { a.index({Slice(0, 2, 0)}); }, {"step cannot be zero"});
  testing::expect_error<ShapeError>([&] { a.reshape({5, -1}); }, {"size 12", "(3, 4)", "(5, -1)"});
  testing::expect_error<ShapeError>([&] { a.reshape({-1, -1}); }, {"one unknown dimension"});
  testing::expect_error<ShapeError>([&] { a.reshape({7}); }, {"cannot reshape array of size 12", "(7,)"});
  testing::expect_error<ShapeError>([&] { a.broadcast_to({3, 5}); }, {"(3, 4)", "(3, 5)", "axis 1"});
  testing::expect_error<ShapeError>([&] { a.squeeze({0}); }, {"squeeze", "axis 0", "(3, 4)"});
  testing::expect_error<IndexError>([&] { a.permute({0, 2}); }, {"axis 2", "dimension 2"});
  testing::expect_error<ValueError>([&] { a.permute({0, 0}); }, {"repeated axis"});
  testing::expect_error<ValueError>([&] { a.item<float>(); }, {"size 1", "(3, 4)"});
  testing::expect_error<DTypeError>([&] { a.to_vector<double>(); }, {"float64", "float32"});
  // The array layer copies one dtype; casting is the ops layer's (tessel::copyto, tessel::astype).
  const Array ints = zeros({3, 4}, DType::int32, device());
  testing::expect_error<DTypeError>([&] { detail::copy_into(ints, a, std::nullopt); },
                                    {"copy", "float32", "int32", "tessel::copyto"});
  if (device().is_cuda()) {
    const Stream other = Stream::cpu();
    testing::expect_error<DeviceError>([&] { astype(a, DType::int32, other); }, {"astype", "stream is on cpu", device().str()});
    testing::expect_error<DeviceError>([&] { arange(0, 4, 1, std::nullopt, device(), other); }, {"arange", "stream is on cpu"});
  }
  testing::expect_error<DeviceError>([&] { a.to(Device::cuda(1000)); }, {"1000"});
  testing::expect_error<ShapeError>([&] { eye(-1); }, {"negative"});
  testing::expect_error<ValueError>([&] { arange(0, 5, 0); }, {"step"});
  if (cuda_available()) {
    const Device other = device().is_cpu() ? testing::test_gpu() : Device::cpu();
    testing::expect_error<DeviceError>([&] { concatenate({a, zeros({3, 4}, DType::float32, other)}); },
                                       {"concatenate", device().str(), other.str(), "array 1"});
  }
}

TEST_P(ArrayErrors, ItemAndVectorReads) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Array a = arange(6, DType::int32, device()).reshape({2, 3});
  EXPECT_EQ(a[1][2].item<int>(), 5);
  EXPECT_EQ(a[1][2].item<double>(), 5.0);
  EXPECT_EQ(a.T().to_vector<std::int32_t>(), (std::vector<std::int32_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(full({2}, true, DType::bool_, device()).to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(full({}, std::complex<double>(1, 2), DType::complex64, device()).item<std::complex<double>>(),
            std::complex<double>(1, 2));
  EXPECT_EQ(full({}, 2.5, DType::float16, device()).item<float>(), 2.5f);
}

TEST_P(ArrayErrors, StrPrintsLikeNumPy) {
  TESSEL_SKIP_UNAVAILABLE(device());
  EXPECT_EQ(arange(6, std::nullopt, device()).reshape({2, 3}).str(), "array([[0, 1, 2],\n       [3, 4, 5]])");
  EXPECT_EQ(arange(3, DType::int32, device()).str(), "array([0, 1, 2], dtype=int32)");
  EXPECT_EQ(linspace(0, 1, 3, true, DType::float64, device()).str(), "array([0. , 0.5, 1. ])");
  EXPECT_EQ(linspace(-1, 10, 3, true, DType::float64, device()).str(), "array([-1. ,  4.5, 10. ])");
  EXPECT_EQ(ones({2}, DType::float32, device()).str(), "array([1., 1.], dtype=float32)");
  EXPECT_EQ(full({}, 2.5, DType::float64, device()).str(), "array(2.5)");
  EXPECT_EQ(zeros({0}, DType::float32, device()).str(), "array([], dtype=float32)");
  EXPECT_EQ(zeros({2, 0}, DType::float64, device()).str(), "array([], shape=(2, 0), dtype=float64)");
  EXPECT_EQ(full({2}, true, DType::bool_, device()).str(), "array([True, True])");
  EXPECT_EQ(full({1}, 0.1, DType::float16, device()).str(), "array([0.1], dtype=float16)");
  EXPECT_EQ(arange(2000, std::nullopt, device()).str(), "array([   0,    1,    2, ..., 1997, 1998, 1999])");
  EXPECT_EQ(full({2}, std::complex<double>(1, -2), DType::complex128, device()).str(), "array([1.-2.j, 1.-2.j])");
  EXPECT_EQ(zeros({2, 2, 1}, DType::int64, device()).str(), "array([[[0],\n        [0]],\n\n       [[0],\n        [0]]])");
}

INSTANTIATE_TEST_SUITE_P(All, ArrayErrors, ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

}  // namespace
}  // namespace tessel
