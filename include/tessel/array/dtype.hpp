#pragma once
// Element types: one constexpr table (DTypeInfo) holds everything known about a dtype, and
// type promotion follows NumPy 2 (NEP 50: Python scalars are weak). Host C++ types and the
// single dtype switch live in dtype_dispatch.hpp.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessel {

enum class DType : std::uint8_t {
  bool_,
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  float16,
  bfloat16,
  float32,
  float64,
  complex64,
  complex128,
};
constexpr int num_dtypes = 15;

enum class DTypeKind : std::uint8_t { boolean, signed_int, unsigned_int, floating, complex };

struct DTypeInfo {
  DType dtype;
  const char* name;       // as NumPy spells it ("bool", "float32", "bfloat16" as in ml_dtypes)
  std::int64_t itemsize;  // bytes
  DTypeKind kind;
  const char* cuda_type;  // the type name in generated CUDA code
  int bits_of_precision;  // integers: value bits (incl. sign); floats: significand bits; complex: per part
};

// Indexed by DType; the order must match the enum (checked below).
inline constexpr std::array<DTypeInfo, num_dtypes> dtype_table{{
    {DType::bool_, "bool", 1, DTypeKind::boolean, "bool", 1},
    {DType::int8, "int8", 1, DTypeKind::signed_int, "signed char", 8},
    {DType::int16, "int16", 2, DTypeKind::signed_int, "short", 16},
    {DType::int32, "int32", 4, DTypeKind::signed_int, "int", 32},
    {DType::int64, "int64", 8, DTypeKind::signed_int, "long long", 64},
    {DType::uint8, "uint8", 1, DTypeKind::unsigned_int, "unsigned char", 8},
    {DType::uint16, "uint16", 2, DTypeKind::unsigned_int, "unsigned short", 16},
    {DType::uint32, "uint32", 4, DTypeKind::unsigned_int, "unsigned int", 32},
    {DType::uint64, "uint64", 8, DTypeKind::unsigned_int, "unsigned long long", 64},
    {DType::float16, "float16", 2, DTypeKind::floating, "__half", 11},
    {DType::bfloat16, "bfloat16", 2, DTypeKind::floating, "__nv_bfloat16", 8},
    {DType::float32, "float32", 4, DTypeKind::floating, "float", 24},
    {DType::float64, "float64", 8, DTypeKind::floating, "double", 53},
    {DType::complex64, "complex64", 8, DTypeKind::complex, "tessel::complex64", 24},
    {DType::complex128, "complex128", 16, DTypeKind::complex, "tessel::complex128", 53},
}};

namespace detail {
constexpr bool dtype_table_in_enum_order() {
  for (int i = 0; i < num_dtypes; ++i) {
    if (static_cast<int>(dtype_table[static_cast<std::size_t>(i)].dtype) != i) return false;
  }
  return true;
}
static_assert(dtype_table_in_enum_order(), "dtype_table must be indexed by DType");
}  // namespace detail

constexpr const DTypeInfo& dtype_info(DType dtype) {
  return dtype_table[static_cast<std::size_t>(dtype)];
}
constexpr const char* dtype_name(DType dtype) { return dtype_info(dtype).name; }
constexpr std::int64_t itemsize(DType dtype) { return dtype_info(dtype).itemsize; }
constexpr DTypeKind dtype_kind(DType dtype) { return dtype_info(dtype).kind; }
constexpr const char* cuda_type_name(DType dtype) { return dtype_info(dtype).cuda_type; }

constexpr bool is_bool(DType d) { return dtype_kind(d) == DTypeKind::boolean; }
constexpr bool is_signed_integer(DType d) { return dtype_kind(d) == DTypeKind::signed_int; }
constexpr bool is_unsigned_integer(DType d) { return dtype_kind(d) == DTypeKind::unsigned_int; }
constexpr bool is_integer(DType d) { return is_signed_integer(d) || is_unsigned_integer(d); }
constexpr bool is_floating(DType d) { return dtype_kind(d) == DTypeKind::floating; }
constexpr bool is_complex(DType d) { return dtype_kind(d) == DTypeKind::complex; }
// float or complex (NumPy's "inexact")
constexpr bool is_inexact(DType d) { return is_floating(d) || is_complex(d); }

// Parses a NumPy dtype name ("float32", "bool", "complex64"; also "half", "float", "double",
// "int", "cfloat"... as NumPy's aliases). Raises DTypeError naming the text otherwise.
DType parse_dtype(std::string_view text);
std::string str(DType dtype);  // == dtype_name

// NumPy 2 promotion of two array dtypes (symmetric). int64 + uint64 -> float64 as in NumPy;
// bfloat16 + float16 -> float32; bfloat16 holds int8/uint8 exactly, so int8 + bfloat16 -> bfloat16.
DType result_type(DType a, DType b);

// The kind of a Python scalar operand. Python scalars are "weak" (NEP 50): they take the
// array's dtype when their kind is not higher (int8 array + 1 -> int8; float16 array + 1.0 ->
// float16), otherwise the default dtype of their kind at the array's precision
// (int array + 1.0 -> float64; float32 array + 1j -> complex64; bool array + 1 -> int64).
enum class ScalarKind : std::uint8_t { bool_, int_, float_, complex_ };
DType result_type(DType array, ScalarKind scalar);

// The complex dtype with the precision of a real dtype (float32 -> complex64) and back
// (complex128 -> float64); other dtypes map to themselves for to_real.
DType to_complex(DType dtype);
DType to_real(DType dtype);

// True when casting from -> to loses no values (NumPy's can_cast(..., "safe")).
bool can_cast_safely(DType from, DType to);
// True for safe casts and casts within a kind or to a higher one (bool < unsigned < signed <
// float < complex): NumPy's can_cast(..., "same_kind").
bool can_cast_same_kind(DType from, DType to);

}  // namespace tessel
