#pragma once
// The dispatch from a runtime DType to its host storage type, for every dtype:
// dispatch_dtype(dtype, f) calls f(TypeTag<T>{}) with T the host storage type of dtype.
// Type-erased code dispatches once, at its boundary, and runs templated loops inside. Backends
// that take only a few compute dtypes (the reductions' four, linear algebra's four, sort keys),
// or map them to other types (cuComplex, LAPACK's prefixes), switch over those few themselves.
#include <complex>
#include <cstdint>
#include <type_traits>

#include "tessel/array/dtype.hpp"
#include "tessel/array/half.hpp"

namespace tessel {

template <class T>
struct TypeTag {
  using type = T;
};

// DType -> host storage type.
template <DType D> struct HostType;
template <> struct HostType<DType::bool_> { using type = bool; };
template <> struct HostType<DType::int8> { using type = std::int8_t; };
template <> struct HostType<DType::int16> { using type = std::int16_t; };
template <> struct HostType<DType::int32> { using type = std::int32_t; };
template <> struct HostType<DType::int64> { using type = std::int64_t; };
template <> struct HostType<DType::uint8> { using type = std::uint8_t; };
template <> struct HostType<DType::uint16> { using type = std::uint16_t; };
template <> struct HostType<DType::uint32> { using type = std::uint32_t; };
template <> struct HostType<DType::uint64> { using type = std::uint64_t; };
template <> struct HostType<DType::float16> { using type = float16; };
template <> struct HostType<DType::bfloat16> { using type = bfloat16; };
template <> struct HostType<DType::float32> { using type = float; };
template <> struct HostType<DType::float64> { using type = double; };
template <> struct HostType<DType::complex64> { using type = std::complex<float>; };
template <> struct HostType<DType::complex128> { using type = std::complex<double>; };
template <DType D>
using host_type_t = typename HostType<D>::type;

// Host storage type -> DType (dtype_of<float>::value == DType::float32).
template <class T> struct DTypeOf;
template <> struct DTypeOf<bool> { static constexpr DType value = DType::bool_; };
template <> struct DTypeOf<std::int8_t> { static constexpr DType value = DType::int8; };
template <> struct DTypeOf<std::int16_t> { static constexpr DType value = DType::int16; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::int32; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::int64; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct DTypeOf<std::uint16_t> { static constexpr DType value = DType::uint16; };
template <> struct DTypeOf<std::uint32_t> { static constexpr DType value = DType::uint32; };
template <> struct DTypeOf<std::uint64_t> { static constexpr DType value = DType::uint64; };
template <> struct DTypeOf<float16> { static constexpr DType value = DType::float16; };
template <> struct DTypeOf<bfloat16> { static constexpr DType value = DType::bfloat16; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::float64; };
template <> struct DTypeOf<std::complex<float>> { static constexpr DType value = DType::complex64; };
template <> struct DTypeOf<std::complex<double>> { static constexpr DType value = DType::complex128; };
template <class T>
inline constexpr DType dtype_of = DTypeOf<std::remove_cv_t<T>>::value;

namespace detail {
[[noreturn]] void throw_invalid_dtype(int value);  // DTypeError for a value outside the enum
}  // namespace detail

template <class F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::bool_: return f(TypeTag<bool>{});
    case DType::int8: return f(TypeTag<std::int8_t>{});
    case DType::int16: return f(TypeTag<std::int16_t>{});
    case DType::int32: return f(TypeTag<std::int32_t>{});
    case DType::int64: return f(TypeTag<std::int64_t>{});
    case DType::uint8: return f(TypeTag<std::uint8_t>{});
    case DType::uint16: return f(TypeTag<std::uint16_t>{});
    case DType::uint32: return f(TypeTag<std::uint32_t>{});
    case DType::uint64: return f(TypeTag<std::uint64_t>{});
    case DType::float16: return f(TypeTag<float16>{});
    case DType::bfloat16: return f(TypeTag<bfloat16>{});
    case DType::float32: return f(TypeTag<float>{});
    case DType::float64: return f(TypeTag<double>{});
    case DType::complex64: return f(TypeTag<std::complex<float>>{});
    case DType::complex128: return f(TypeTag<std::complex<double>>{});
  }
  detail::throw_invalid_dtype(static_cast<int>(dtype));
}

}  // namespace tessel
