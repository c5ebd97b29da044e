#pragma once
// Element conversion between host types with NumPy's cast semantics (internal):
// - to bool: nonzero -> true (NaN is nonzero; complex: either part nonzero);
// - complex -> real: the imaginary part is dropped;
// - float -> integer where NumPy leaves the result undefined (NaN, out of range): tessel
//   defines it as CUDA's conversion does, NaN -> 0 and saturation at the integer's range, so the
//   CPU and the GPU agree;
// - integer -> integer wraps modulo 2^bits;
// - float16 / bfloat16 go through double (rounding once, to nearest even).
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tessel/array/half.hpp"

namespace tessel::detail {

template <class T> struct IsComplex : std::false_type {
  using part = T;
};
template <class T> struct IsComplex<std::complex<T>> : std::true_type {
  using part = T;
};
// The real type of a complex one, or the type itself.
template <class T> using real_part_t = typename IsComplex<T>::part;
template <class T> inline constexpr bool is_complex_v = IsComplex<T>::value;
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

// Any host element type as a double (real part for complex).
template <class T>
double real_as_double(T value) {
  if constexpr (is_complex_v<T>) {
    return static_cast<double>(value.real());
  } else if constexpr (is_half_v<T>) {
    return static_cast<double>(value);
  } else {
    return static_cast<double>(value);
  }
}

template <class Int>
Int saturating_float_to_int(double value) {
  if (std::isnan(value)) return 0;
  // The limits as doubles: lowest is exact; (max + 1) is a power of two, also exact.
  constexpr double lowest = static_cast<double>(std::numeric_limits<Int>::lowest());
  constexpr double above_max = 2.0 * static_cast<double>(std::numeric_limits<Int>::max() / 2 + 1);
  if (value <= lowest) return std::numeric_limits<Int>::lowest();
  if (value >= above_max) return std::numeric_limits<Int>::max();
  return static_cast<Int>(value);  // truncates toward zero, in range
}

template <class To, class From>
To cast_value(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_complex_v<From>) {
      return value.real() != 0 || value.imag() != 0;
    } else if constexpr (is_half_v<From>) {
      return static_cast<float>(value) != 0.0f;  // NaN != 0 is true
    } else {
      return value != From(0);
    }
  } else if constexpr (is_complex_v<To>) {
    using Part = typename To::value_type;
    if constexpr (is_complex_v<From>) {
      return To(static_cast<Part>(value.real()), static_cast<Part>(value.imag()));
    } else {
      return To(static_cast<Part>(real_as_double(value)), Part(0));
    }
  } else if constexpr (is_complex_v<From>) {
    return cast_value<To>(value.real());
  } else if constexpr (is_half_v<To>) {
    if constexpr (std::is_same_v<From, bool>) {
      return To(value ? 1.0 : 0.0);
    } else {
      return To(real_as_double(value));
    }
  } else if constexpr (std::is_floating_point_v<To>) {
    if constexpr (is_half_v<From>) {
      return static_cast<To>(static_cast<float>(value));
    } else {
      return static_cast<To>(value);
    }
  } else {
    // integer destination
    if constexpr (std::is_floating_point_v<From> || is_half_v<From>) {
      return saturating_float_to_int<To>(real_as_double(value));
    } else if constexpr (std::is_same_v<From, bool>) {
      return static_cast<To>(value ? 1 : 0);
    } else {
      return static_cast<To>(value);  // modular, as NumPy
    }
  }
}

}  // namespace tessel::detail
