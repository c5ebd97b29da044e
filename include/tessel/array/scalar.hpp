#pragma once
// Scalar: a host value of any kind (bool, int64, uint64, double, complex<double>) that converts
// to any dtype with NumPy's cast rules. Used by full(), fill() and arange().
#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tessel/array/dtype.hpp"

namespace tessel {

class Scalar {
 public:
  enum class Kind : std::uint8_t { bool_, int_, uint_, float_, complex_ };

  Scalar() : Scalar(std::int64_t{0}) {}
  // Any C++ arithmetic type: bool -> bool, signed -> int64, unsigned -> uint64, floating -> double.
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T value) {  // NOLINT: implicit on purpose, full(shape, 1.5)
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::bool_;
      int_ = value ? 1 : 0;
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      kind_ = Kind::int_;
      int_ = static_cast<std::int64_t>(value);
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::uint_;
      uint_ = static_cast<std::uint64_t>(value);
    } else {
      kind_ = Kind::float_;
      real_ = static_cast<double>(value);
    }
  }
  template <class T>
  Scalar(std::complex<T> value)  // NOLINT: implicit on purpose
      : kind_(Kind::complex_), real_(static_cast<double>(value.real())), imag_(static_cast<double>(value.imag())) {}

  Kind kind() const { return kind_; }
  // The kind as a weak Python scalar for promotion (uint counts as int).
  ScalarKind scalar_kind() const;
  // The dtype NumPy gives a lone Python scalar of this kind (int64, float64, complex128, bool;
  // uint64 for a uint).
  DType default_dtype() const;

  bool to_bool() const;
  std::int64_t to_int64() const;   // C++ conversion (truncates floats)
  std::uint64_t to_uint64() const;
  double to_double() const;        // real part for complex
  std::complex<double> to_complex() const;
  std::string str() const;

  // Writes the value converted to `dtype` (NumPy's unsafe cast) into `out` (itemsize(dtype) bytes).
  void store(DType dtype, void* out) const;

 private:
  Kind kind_ = Kind::int_;
  std::int64_t int_ = 0;
  std::uint64_t uint_ = 0;
  double real_ = 0;
  double imag_ = 0;
};

}  // namespace tessel
