#include "tessel/array/scalar.hpp"

#include <cstdio>

#include "array/cast.hpp"
#include "tessel/array/dtype_dispatch.hpp"

namespace tessel {

ScalarKind Scalar::scalar_kind() const {
  switch (kind_) {
    case Kind::bool_: return ScalarKind::bool_;
    case Kind::int_:
    case Kind::uint_: return ScalarKind::int_;
    case Kind::float_: return ScalarKind::float_;
    case Kind::complex_: return ScalarKind::complex_;
  }
  return ScalarKind::int_;
}

DType Scalar::default_dtype() const {
  switch (kind_) {
    case Kind::bool_: return DType::bool_;
    case Kind::int_: return DType::int64;
    case Kind::uint_: return DType::uint64;
    case Kind::float_: return DType::float64;
    case Kind::complex_: return DType::complex128;
  }
  return DType::int64;
}

namespace {
// Calls f with the scalar's value in its natural C++ type.
template <class F>
decltype(auto) visit_scalar(Scalar::Kind kind, std::int64_t i, std::uint64_t u, double re, double im, F&& f) {
  switch (kind) {
    case Scalar::Kind::bool_: return f(i != 0);
    case Scalar::Kind::int_: return f(i);
    case Scalar::Kind::uint_: return f(u);
    case Scalar::Kind::float_: return f(re);
    case Scalar::Kind::complex_: break;
  }
  return f(std::complex<double>(re, im));
}
}  // namespace

bool Scalar::to_bool() const {
  return visit_scalar(kind_, int_, uint_, real_, imag_, [](auto v) { return detail::cast_value<bool>(v); });
}
std::int64_t Scalar::to_int64() const {
  return visit_scalar(kind_, int_, uint_, real_, imag_, [](auto v) { return detail::cast_value<std::int64_t>(v); });
}
std::uint64_t Scalar::to_uint64() const {
  return visit_scalar(kind_, int_, uint_, real_, imag_, [](auto v) { return detail::cast_value<std::uint64_t>(v); });
}
double Scalar::to_double() const {
  return visit_scalar(kind_, int_, uint_, real_, imag_, [](auto v) { return detail::cast_value<double>(v); });
}
std::complex<double> Scalar::to_complex() const {
  return visit_scalar(kind_, int_, uint_, real_, imag_,
                      [](auto v) { return detail::cast_value<std::complex<double>>(v); });
}

std::string Scalar::str() const {
  char text[96];
  switch (kind_) {
    case Kind::bool_: return int_ ? "True" : "False";
    case Kind::int_: return std::to_string(int_);
    case Kind::uint_: return std::to_string(uint_);
    case Kind::float_: std::snprintf(text, sizeof text, "%.17g", real_); return text;
    case Kind::complex_: std::snprintf(text, sizeof text, "(%.17g%+.17gj)", real_, imag_); return text;
  }
  return "";
}

void Scalar::store(DType dtype, void* out) const {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    *static_cast<T*>(out) =
        visit_scalar(kind_, int_, uint_, real_, imag_, [](auto v) { return detail::cast_value<T>(v); });
  });
}

}  // namespace tessel
