#pragma once
// Array-test helpers: random reference data (as complex<double>, exactly representable in the
// dtype), arrays built from it, element reads back to complex<double>, and poisoning.
#include <cmath>
#include <complex>
#include <cstring>
#include <random>
#include <vector>

#include "tessel/array/array.hpp"
#include "testing.hpp"

namespace tessel::testing {

using Value = std::complex<double>;

// Values every dtype holds exactly: small integers (quarters for floats, both parts for complex).
inline std::vector<Value> random_values(std::mt19937_64& rng, DType dtype, std::int64_t count) {
  std::vector<Value> values(static_cast<std::size_t>(count));
  std::uniform_int_distribution<int> small(-100, 100), unsigned_small(0, 200), quarters(-255, 255), bit(0, 1);
  for (Value& v : values) {
    if (is_bool(dtype)) v = bit(rng);
    else if (is_unsigned_integer(dtype)) v = unsigned_small(rng);
    else if (is_signed_integer(dtype)) v = small(rng);
    else if (is_floating(dtype)) v = quarters(rng) / 4.0;
    else v = Value(quarters(rng) / 4.0, quarters(rng) / 4.0);
  }
  return values;
}

inline Scalar scalar_of(const Value& v, DType dtype) {
  if (is_complex(dtype)) return Scalar(v);
  if (is_bool(dtype)) return Scalar(v.real() != 0);
  if (is_integer(dtype)) return Scalar(static_cast<std::int64_t>(v.real()));
  return Scalar(v.real());
}

inline std::vector<unsigned char> encode(const std::vector<Value>& values, DType dtype) {
  std::vector<unsigned char> bytes(values.size() * static_cast<std::size_t>(itemsize(dtype)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    scalar_of(values[i], dtype).store(dtype, bytes.data() + i * static_cast<std::size_t>(itemsize(dtype)));
  }
  return bytes;
}

inline Array make_array(const std::vector<Value>& values, const Shape& shape, DType dtype, Device device) {
  const std::vector<unsigned char> bytes = encode(values, dtype);
  return from_host(bytes.data(), shape, dtype, device);
}

// The elements in C order, read with to_host and widened per element.
inline std::vector<Value> read_values(const Array& array) {
  std::vector<unsigned char> bytes(static_cast<std::size_t>(array.nbytes()));
  array.to_host(bytes.data());
  std::vector<Value> values(static_cast<std::size_t>(array.size()));
  dispatch_dtype(array.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (std::size_t i = 0; i < values.size(); ++i) {
      T element;
      std::memcpy(&element, bytes.data() + i * sizeof(T), sizeof(T));
      if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
        values[i] = Value(element.real(), element.imag());
      } else if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        values[i] = static_cast<double>(static_cast<float>(element));
      } else {
        values[i] = static_cast<double>(element);
      }
    }
  });
  return values;
}

// A value no random input takes (NaN for inexact dtypes), so untouched outputs stand out.
inline Scalar poison_value(DType dtype) {
  if (is_inexact(dtype)) return Scalar(std::nan(""));
  if (is_bool(dtype)) return Scalar(true);
  return Scalar(std::int64_t{117});
}
inline void poison(const Array& array) { fill(array, poison_value(array.dtype())); }

inline bool same_value(const Value& a, const Value& b) {
  auto same = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  return same(a.real(), b.real()) && same(a.imag(), b.imag());
}

// C-order multi-index iteration.
inline bool next_index(std::vector<std::int64_t>& index, const Shape& shape) {
  for (std::size_t axis = shape.size(); axis-- > 0;) {
    if (++index[axis] < shape[axis]) return true;
    index[axis] = 0;
  }
  return false;
}

inline std::int64_t flat_index(const std::vector<std::int64_t>& index, const Shape& shape) {
  std::int64_t flat = 0;
  for (std::size_t axis = 0; axis < shape.size(); ++axis) flat = flat * shape[axis] + index[axis];
  return flat;
}

// Checks every element of `view` against source_values[map(view index)].
template <class Map>
void expect_view(const Array& view, const Shape& expected_shape, const std::vector<Value>& source_values,
                 const Shape& source_shape, Map map) {
  ASSERT_EQ(view.shape(), expected_shape);
  const std::vector<Value> got = read_values(view);
  if (view.size() == 0) return;
  std::vector<std::int64_t> index(expected_shape.size(), 0);
  std::int64_t flat = 0;
  do {
    const Value expected = source_values[static_cast<std::size_t>(flat_index(map(index), source_shape))];
    ASSERT_TRUE(same_value(got[static_cast<std::size_t>(flat)], expected))
        << "at flat index " << flat << ": got " << got[static_cast<std::size_t>(flat)] << ", expected " << expected;
    ++flat;
  } while (next_index(index, expected_shape));
}

}  // namespace tessel::testing
